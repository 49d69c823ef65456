"""The grad-norm early warning holds while its prediction window is open.

Rulebook: raw_grad_norm "> 1.0 for >= 2 steps has predicted collapse 2-5 steps early". Replayed
on the real SLURM (SkyRL v0.3 console, policy/raw_grad_norm 1.3 and 1.45 on steps 15-16, then
0.30 and 0.28 on steps 17-18, entropy steady): the sweep read verdict healthy, trend 'Reward
rising 0.35->0.394', two steps into the window the warning was about. The warning now holds
while the run of >1.0 values ends on one of the last ``collapse_recent_steps`` logged steps,
as the collapse flag does.
"""

from __future__ import annotations

import pytest

from report.settings import Thresholds
from report.signals import collapse_scan
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last

TH = Thresholds()


@pytest.mark.parametrize(
    ("tail", "warning"),
    [([1.3, 1.45, 0.3, 0.28], True), ([1.3, 1.45, 0.3, 0.3, 0.3, 0.3], True),
     ([1.3, 1.45, 0.3, 0.3, 0.3, 0.3, 0.3], False), ([1.3, 0.3, 1.4, 0.3], False)],
)
def test_the_warning_holds_for_the_recent_steps(tail: list[float], warning: bool) -> None:
    """A pair above 1.0 warns while it ends within the last 5 logged values, and only a pair."""
    history = points({"grad_norm": [0.2] * (12 - len(tail)) + tail})
    assert collapse_scan(history, TH).grad_norm_warning is warning


def test_a_recovered_pair_is_named_in_the_trend() -> None:
    """The row says which steps the pair was on and what the grad norm reads now."""
    series = healthy_rl(18, grad_norm=with_last([0.2] * 18, 1.3, 1.45, 0.3, 0.28))
    report = judge(facts(record("rl-skyrl-warn", "37"), points(series))).report
    assert report.verdict == "warning"
    assert report.trend == "grad_norm >1.0 on steps 15–16, now 0.28: collapse risk"
