"""An ended run's grad-norm pair that the run outlived is no warning about steps it will not take.

c52bee0 holds the early warning ("> 1.0 for >= 2 steps has predicted collapse 2-5 steps early")
for the last 5 logged steps after the pair. On a run that has ended, no step is left for the
prediction: a COMPLETED SkyRL run with grad norm 1.3 and 1.45 on steps 15-16, then 0.30 and
0.28 to its last step 18, read verdict warning 'grad_norm >1.0 on steps 15–16, now 0.28:
collapse risk' next to its cleanup recommendation. As for a single signal ("an ended run is
watched no more"), the window holds only while the run is live; a pair on an ended run's last
steps still warns, as before.
"""

from __future__ import annotations

from probes.models import JobState
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last


def _judged(state: JobState, *tail: float) -> tuple[str, str]:
    series = healthy_rl(18, grad_norm=with_last([0.2] * 18, *tail))
    report = judge(facts(record("rl-skyrl-warn", "37", state=state), points(series))).report
    return report.verdict, report.trend


def test_a_completed_run_past_its_pair_is_done() -> None:
    """Two healthy steps after the pair to the end: done, no collapse risk."""
    verdict, trend = _judged(JobState.COMPLETED, 1.3, 1.45, 0.3, 0.28)
    assert verdict == "done" and "collapse risk" not in trend


def test_a_running_run_still_holds_it() -> None:
    """The live run keeps the warning through its window (c52bee0)."""
    assert _judged(JobState.RUNNING, 1.3, 1.45, 0.3, 0.28)[0] == "warning"


def test_a_completed_run_ending_on_the_pair_still_warns() -> None:
    """A pair on the last two logged steps warns on an ended run, as before c52bee0."""
    assert _judged(JobState.COMPLETED, 0.3, 0.28, 1.3, 1.45)[0] == "warning"
