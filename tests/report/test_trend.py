"""Trend text helpers: sparkline and the reward/loss sentences."""

from __future__ import annotations

import math

import pytest

from report.models import SignalEvidence
from report.trend import (
    TREND_MAX,
    collapse_text,
    describe_loss,
    describe_reward,
    shorten,
    sparkline,
    with_sparkline,
)


@pytest.mark.parametrize(
    ("values", "width", "expected"),
    [
        ([1, 2, 3, 4, 5, 6, 7, 8], 8, "▁▂▃▄▅▆▇█"),
        ([0, 10], 8, "▁█"),
        ([5, 5, 5], 8, "▅▅▅"),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4, "▁▃▆█"),  # only the last `width` values
        ([1.0, math.nan, 3.0], 8, "▁×█"),
        ([math.inf], 8, "×"),
        ([], 8, ""),
        ([1, 2], 0, ""),
    ],
)
def test_sparkline(values: list[float], width: int, expected: str) -> None:
    """Values map linearly onto eight bars; non-finite values show as ×."""
    assert sparkline(values, width) == expected


@pytest.mark.parametrize(
    ("values", "saved", "expected"),
    [
        ([0.60, 0.63, 0.652, 0.619], True, "Checkpoint saved. Slight dip from 0.652"),
        ([0.60, 0.65, 0.70, 0.50], False, "Reward falling from 0.7"),
        ([0.40, 0.45, 0.50, 0.55], False, "Reward rising 0.4→0.55"),
        ([0.45, 0.451, 0.450, 0.451], False, "Stable"),
        ([0.5], False, "First steps logged"),
    ],
)
def test_describe_reward(values: list[float], saved: bool, expected: str) -> None:
    """Reward trends read like an operator's note."""
    assert describe_reward(values, checkpoint_saved=saved) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([2.0, 1.8, 1.5, 1.21], "Loss descending; healthy"),
        ([1.0, 1.0, 1.005], "Loss flat; healthy"),
        ([1.0, 1.2, 1.5], "Loss rising"),
        ([1.0, math.nan, 0.9], "Loss descending; healthy"),
    ],
)
def test_describe_loss(values: list[float], expected: str) -> None:
    """Loss trends compare the window's first and last finite values."""
    assert describe_loss(values) == expected


def test_collapse_text_names_each_signal() -> None:
    """The collapse trend quotes grad_norm's value and entropy's change vs trend."""
    fired = [
        SignalEvidence(signal="grad_norm", step=9, value=3.2, window_mean=0.2, fired=True, why=""),
        SignalEvidence(signal="entropy", step=9, value=0.19, window_mean=0.5, fired=True, why=""),
    ]
    assert collapse_text(fired, 1.0) == "COLLAPSE: grad_norm 3.20 (>1.0), entropy −62% vs trend"


def test_shorten_and_sparkline_respect_the_limit() -> None:
    """Long texts are cut with an ellipsis; a sparkline is dropped rather than overflow."""
    long = "x" * 100
    assert len(shorten(long)) == TREND_MAX and shorten(long).endswith("…")
    assert with_sparkline("Stable", [1, 2, 3]) == "Stable ▁▅█"
    assert with_sparkline("y" * 58, [1, 2, 3]) == "y" * 58
    assert with_sparkline("Stable", [1, 2]) == "Stable"
