"""The collapse rule, signal by signal, as CONTRACT §5 defines it (near-misses included)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from probes.models import MetricPoint
from report.settings import Thresholds
from report.signals import collapse_scan, evaluate_step
from tests.report.factories import points, trial

TH = Thresholds()
NAN = math.nan


def _fired(series: dict[str, Sequence[float | None]], **kw: object) -> set[str]:
    history = points(series)
    evidence = evaluate_step(history, len(history) - 1, TH, **kw)  # type: ignore[arg-type]
    return {e.signal for e in evidence if e.fired}


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ([0.2] * 10 + [1.01], True),  # absolute test
        ([0.6] * 10 + [1.0], False),  # near-miss: not strictly above 1.0, under 2x window
        ([1.5], True),  # the absolute test needs no window
        ([0.2] * 10 + [0.41], True),  # > 2x window mean 0.2
        ([0.2] * 10 + [0.39], False),  # near-miss: < 2x
        ([0.2] * 4 + [0.9], False),  # window of 4 < 5: the relative test cannot fire
        ([0.2] * 5 + [0.9], True),  # window of 5 is enough
        ([0.2] * 10 + [NAN], True),  # non-finite fires
        ([0.2] * 10 + [math.inf], True),
        ([1e-5] * 10 + [1e-5], False),  # seqnorm regime: tiny is not vanishing
        ([1e-5] * 10 + [1e-7], False),
    ],
)
def test_grad_norm(values: list[float], fires: bool) -> None:
    """grad_norm fires above 1.0, above 2x its window mean, or when not finite."""
    assert ("grad_norm" in _fired({"grad_norm": values})) is fires


def test_window_skips_absent_and_non_finite_values() -> None:
    """Steps without the metric and NaN values do not count towards the window."""
    values = [0.2, None, NAN, 0.2, None, 0.2, 0.2, None, 0.2, 0.5]
    history = points({"grad_norm": values})
    [e] = evaluate_step(history, len(history) - 1, TH)
    assert e.window == (0.2, 0.2, 0.2, 0.2, 0.2) and e.fired
    shorter = points({"grad_norm": [0.2, None, NAN, 0.2, 0.2, 0.2, 0.5]})
    [e] = evaluate_step(shorter, len(shorter) - 1, TH)
    assert e.window_mean is None and not e.fired  # only 4 finite values


def test_window_is_the_previous_ten_values() -> None:
    """Older values fall out of the window."""
    history = points({"grad_norm": [0.9] * 5 + [0.1] * 10 + [0.3]})
    [e] = evaluate_step(history, len(history) - 1, TH)
    assert e.window == (0.1,) * 10 and e.fired


@pytest.mark.parametrize(
    ("latest", "fires"),
    [
        (0.64, False),  # +28%
        (0.66, True),  # +32%: entropy explosion counts too
        (0.36, False),  # -28%
        (0.34, True),  # -32%
        (NAN, True),
    ],
)
def test_entropy_two_sided(latest: float, fires: bool) -> None:
    """Entropy fires when off its 10-step trend by more than 30% in either direction."""
    assert ("entropy" in _fired({"entropy": [0.5] * 10 + [latest]})) is fires


def test_entropy_needs_a_window() -> None:
    """Entropy cannot fire before 5 values have been logged."""
    assert _fired({"entropy": [0.5] * 4 + [0.1]}) == set()


@pytest.mark.parametrize(
    ("mean", "top", "fires"),
    [
        (0.03, 0.5, True),  # 3x window mean, max bounded (0.5 < 10 x 0.3)
        (0.019, 0.5, False),  # near-miss: 1.9x
        (0.03, 3.5, False),  # max unbounded (3.5 >= 10 x 0.3): not this signal
        (0.03, None, True),  # max not emitted: treated as bounded
        (0.03, math.inf, False),
        (NAN, 0.5, True),
    ],
)
def test_log_ratio(mean: float, top: float | None, fires: bool) -> None:
    """log_ratio_abs_mean > 2x window fires only while the max stays bounded."""
    series: dict[str, Sequence[float | None]] = {
        "log_ratio_abs_mean": [0.01] * 10 + [mean], "log_ratio_abs_max": [0.3] * 10 + [top],
    }
    assert ("log_ratio" in _fired(series)) is fires


@pytest.mark.parametrize(
    ("passed", "total", "fires"),
    [(9, 100, True), (10, 100, False), (0, 5, True), (0, 4, False), (50, 300, True)],
)
def test_pass_rate(passed: int, total: int, fires: bool) -> None:
    """Pass-rate fires below 10% of the last 100 trials (needs at least 5 trials)."""
    trials = [trial(1.0)] * passed + [trial(0.0)] * (total - passed)
    if total == 300:  # 50 passes, all outside the last 100
        trials = [trial(1.0)] * 50 + [trial(0.0)] * 250
    assert ("pass_rate" in _fired({"grad_norm": [0.2]}, trials=trials)) is fires


def test_pass_rate_without_trials_is_not_evaluated() -> None:
    """Standard RL (no trial tree) never evaluates pass-rate and never errors."""
    history = points({"grad_norm": [0.2] * 3})
    assert [e.signal for e in evaluate_step(history, 2, TH, trials=None)] == ["grad_norm"]
    assert [e.signal for e in evaluate_step(history, 2, TH, trials=[])] == ["grad_norm"]


def test_pass_rate_only_on_the_latest_step() -> None:
    """Trials are not attributed to steps, so earlier steps never carry a pass-rate."""
    history = points({"grad_norm": [0.2] * 3})
    trials = [trial(0.0)] * 10
    assert all(e.signal != "pass_rate" for e in evaluate_step(history, 1, TH, trials=trials))


def _history(n: int = 12, /, **last: list[float]) -> tuple[MetricPoint, ...]:
    series: dict[str, list[float | None]] = {
        "grad_norm": [0.2] * n, "entropy": [0.5] * n, "log_ratio_abs_mean": [0.01] * n,
    }
    for key, tail in last.items():
        series[key] = series[key][: n - len(tail)] + list(tail)
    return points(series)


@pytest.mark.parametrize(
    ("last", "collapse_step", "latest"),
    [
        ({}, None, set()),
        ({"grad_norm": [3.2]}, None, {"grad_norm"}),  # one signal alone: no collapse
        ({"grad_norm": [3.2], "entropy": [0.19]}, 12, {"grad_norm", "entropy"}),
        # collapse 3 steps ago still counts (within the last 5 logged steps)
        ({"grad_norm": [3.2, 0.2, 0.2], "entropy": [0.19, 0.5, 0.5]}, 10, set()),
        # near-miss: 5 steps back is outside the last 5
        ({"grad_norm": [3.2, 0.2, 0.2, 0.2, 0.2, 0.2], "entropy": [0.19, 0.5, 0.5, 0.5, 0.5, 0.5]},
         None, set()),
        # two signals on different steps are not a collapse
        ({"grad_norm": [3.2, 0.2], "entropy": [0.5, 0.19]}, None, {"entropy"}),
    ],
)
def test_collapse_scan(
    last: dict[str, list[float]], collapse_step: int | None, latest: set[str]
) -> None:
    """Collapse needs >= 2 signals on the same step within the last 5 logged steps."""
    scan = collapse_scan(_history(**last), TH)
    assert scan.collapse_step == collapse_step
    assert set(scan.latest_fired) == latest
    assert len(scan.steps) == 5


@pytest.mark.parametrize(
    ("tail", "warning"),
    [([1.2, 1.3], True), ([0.9, 1.3], False), ([1.3, 0.9], False), ([NAN, 1.1], True),
     ([1.5], False)],
)
def test_grad_norm_warning(tail: list[float], warning: bool) -> None:
    """grad_norm above 1.0 on the two latest logged values is the early warning."""
    history = points({"grad_norm": [0.2] * (10 - len(tail)) + tail} if len(tail) > 1
                     else {"grad_norm": tail})
    assert collapse_scan(history, TH).grad_norm_warning is warning


def test_configurable_thresholds() -> None:
    """Every number comes from Thresholds: a looser grad_norm limit silences the signal."""
    history = points({"grad_norm": [1.5]})
    assert not evaluate_step(history, 0, Thresholds(grad_norm_abs=2.0))[0].fired
    assert collapse_scan((), TH).collapse_step is None
