"""The one set of formatters: fixed-decimal cells, prose values, counts, durations, states."""

from __future__ import annotations

import math

import pytest

from probes.models import JobState
from report import cells


@pytest.mark.parametrize(
    ("value", "decimals", "trim", "expected"),
    [
        (0.619, 3, False, "0.619"),
        (-0.004, 4, False, "-0.0040"),
        (0.006, 3, False, "0.006"),
        (1.2e-5, 3, False, "1.2e-05"),
        (-1.2e-5, 4, False, "-1.2e-05"),
        (0.0009, 3, False, "9.0e-04"),
        (0.001, 3, False, "0.001"),
        (0.0, 3, False, "0.000"),
        (-0.0, 4, False, "0.0000"),
        (float("nan"), 3, False, "NaN"),
        (float("inf"), 3, False, "inf"),
        (float("-inf"), 3, False, "-inf"),
        (None, 3, False, "—"),
        (2.5e7, 3, False, "2.5e+07"),
        (1.21, 3, True, "1.21"),
        (1.2134, 3, True, "1.213"),
        (2.0, 3, True, "2.00"),
        ("n/a", 3, False, "n/a"),
    ],
)
def test_format_number(value: float | str | None, decimals: int, trim: bool,
                       expected: str) -> None:
    """Numbers use fixed decimals, tiny nonzero values go scientific, never 0.000 for nonzero."""
    assert cells.format_number(value, decimals, trim=trim) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "—"), (842, "842"), (999, "999"), (1000, "~1.0k"), (8600, "~8.6k"),
     (12_345, "~12k"), (2_400_000, "~2.4M"), (float("nan"), "NaN")],
)
def test_format_count(value: float | None, expected: str) -> None:
    """Counts are exact below 1,000 and humanised above."""
    assert cells.format_count(value) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(None, "—"), (0, "0s"), (59, "59s"), (60, "1m"), (720, "12m"), (3599, "59m"),
     (3600, "1h00m"), (11_100, "3h05m"), (86_399, "23h59m"), (86_400, "1d00h"),
     (187_200, "2d04h")],
)
def test_format_duration(seconds: int | None, expected: str) -> None:
    """Elapsed reads 12m, 3h05m, 2d04h."""
    assert cells.format_duration(seconds) == expected


@pytest.mark.parametrize(
    ("step", "total", "expected"),
    [(15, 80, "15/80"), (15, None, "15/—"), (None, 80, "—"), (None, None, "—"), (0, 80, "0/80")],
)
def test_format_step(step: int | None, total: int | None, expected: str) -> None:
    """Step reads cur/max, with a dash for what is unknown."""
    assert cells.format_step(step, total) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [("AgentTimeoutError", "AgentTO"), ("ContextLengthExceededError", "CtxLen"),
     ("harbor.errors.AgentTimeoutError", "AgentTO"), ("RuntimeError", "Runtime"),
     ("DaytonaTimeoutError", "DaytonaTO"), ("Error", "Error"),
     ("SomeExtraordinarilyLongException", "SomeExtraor…")],
)
def test_abbreviate_exception(name: str, expected: str) -> None:
    """Known exceptions get their short names; others lose the suffix and stay short."""
    assert cells.abbreviate_exception(name) == expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [(JobState.RUNNING, "running"), (JobState.PENDING, "pending"),
     (JobState.COMPLETED, "COMPLETED"), (JobState.FAILED, "FAILED"),
     (JobState.UNKNOWN, "UNKNOWN")],
)
def test_format_state(state: JobState, expected: str) -> None:
    """Active states are lower case, terminal ones stand out in capitals."""
    assert cells.format_state(state) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3.2, "3.20"), (0.652, "0.652"), (-0.004, "-0.004"), (1e-5, "1.00e-05"), (0.0, "0"),
     (250.0, "250"), (5e8, "5.00e+08"), (math.nan, "NaN"), (math.inf, "inf"), (None, "—")],
)
def test_format_value(value: float | None, expected: str) -> None:
    """Values in prose print compactly: 3 significant figures, scientific when tiny or huge,
    and NaN spelled as in the table cells."""
    assert cells.format_value(value) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"), [(30, "30s"), (45 * 60, "45m"), (2 * 3600 + 600, "2h10m"), (-5, "0s"),
                              (30.7, "30s"), (26 * 3600, "1d02h")]
)
def test_duration_in_prose(seconds: float, expected: str) -> None:
    """ETAs and silences print as the largest two units, the same as the Elapsed cell
    (26 hours is ``1d02h`` everywhere, never ``26h00m``)."""
    assert cells.format_duration(seconds) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_is_spelled_the_same_everywhere(value: float) -> None:
    """A cell, a count and a prose value spell a non-finite number the same way."""
    assert cells.format_number(value) == cells.format_count(value) == cells.format_value(value)
