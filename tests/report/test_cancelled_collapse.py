"""A cancelled run reads as cancelled: its collapse is why it stopped, not a call to act now.

Found judging a SkyRL-shaped run that collapsed on its last step (grad_norm 3.1, entropy −52 %)
and was then ``scancel``ed: its row read verdict ``collapse``, Trend 'COLLAPSE: grad_norm 3.10
(>1.0), ...' exactly as a live collapsing run's (the RL table has no State column), no
recommendation, and the daily summary counted it 'COLLAPSE' for the whole ``recent_hours``. The
cancel was the collapse rule's first half; its second, the salvage, is still to make sure of.
A cancelled run whose last grad norms were above 1.0 read verdict ``warning`` (a prediction
about steps it will never take).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from probes.models import JobState
from report.models import Report
from report.sweep_summary import summary_lines
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, with_last

COLLAPSED = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1), entropy=with_last([0.5] * 12, 0.24))


def _cancelled(name: str = "rl-run", series: dict[str, Any] | None = None) -> Any:
    return judge(facts(record(name, "41", JobState.CANCELLED), points(series or COLLAPSED),
                       checkpoints=[10])).report


def test_a_cancelled_collapse_reads_cancelled_and_names_the_salvage() -> None:
    """Verdict done, Trend 'Cancelled; COLLAPSE: ...' (whole in the cell), the collapse flag
    kept as evidence, and a diagnose naming the banked step before the collapse to salvage."""
    report = _cancelled()
    assert report.verdict == "done"
    assert "collapse" in report.flags
    assert report.trend == "Cancelled; COLLAPSE: grad_norm 3.10 (>1.0), entropy −52%"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    why = report.recommendation.why
    assert why.startswith("collapse at step 12: grad_norm 3.1 > 1")
    assert "banked step 10" in why and "rollouts" in why
    line = "\n".join(summary_lines(Report(generated_at=NOW, clusters=[], jobs=[report])))
    assert "COLLAPSE" not in line


def test_a_cancelled_run_is_no_warning() -> None:
    """Grad norm above 1.0 on its last two steps: a cancelled run takes no more steps."""
    report = _cancelled(series=healthy_rl(grad_norm=with_last([0.2] * 12, 1.3, 1.45)))
    assert (report.verdict, report.trend, report.recommendation) == ("done", "Cancelled", None)


def test_a_cancelled_ablation_has_nothing_to_salvage_for() -> None:
    """A spike-mitigation ablation's collapse is its experiment's result: no diagnose."""
    report = _cancelled("rl-zclip-ablation")
    assert report.verdict == "done" and report.recommendation is None
    assert report.trend.startswith("Cancelled; COLLAPSE")


def _cancelled_before(restart: Any) -> Any:
    end = NOW - timedelta(minutes=20)
    cancelled = facts(record("rl-run", "100", JobState.CANCELLED, end_time=end),
                      points(COLLAPSED), checkpoints=[10])
    return judge(cancelled, others=[restart(end)]).report


def test_a_cancel_its_afterany_restart_survives_names_the_restart() -> None:
    """The run was cancelled on its collapse, but its ``afterany`` restart, queued before the
    cancel, is released by it (afterany is satisfied by any end) and resumes the collapsed
    policy from the last save: the cancel stopped nothing. Pending (its dependency shown) or
    already running (released at the cancel), the restart is the one to cancel."""
    def pending(end: Any) -> Any:
        return record("rl-run", "4242", JobState.PENDING, depends_on=("100",),
                      dependency="afterany:100(unfulfilled)", start_time=None,
                      submit_time=NOW - timedelta(hours=2))

    def running(end: Any) -> Any:
        return record("rl-run", "4242", JobState.RUNNING, submit_time=NOW - timedelta(hours=2),
                      eligible_time=end, start_time=end, elapsed_s=1200)

    for restart in (pending, running):
        report = _cancelled_before(restart)
        assert report.verdict == "collapse", report.trend
        assert report.trend.startswith("Cancelled; restart 4242 goes on"), report.trend
        assert report.recommendation is not None
        assert report.recommendation.action == "cancel_and_salvage"
        assert "cancel 4242" in report.recommendation.why


def test_a_relaunch_by_hand_after_the_cancel_is_not_cancelled() -> None:
    """Near-miss: a job of the run submitted after the cancel is someone's deliberate relaunch."""
    def relaunch(end: Any) -> Any:
        later = end + timedelta(minutes=5)
        return record("rl-run", "4243", JobState.RUNNING, submit_time=later,
                      eligible_time=later, start_time=later, elapsed_s=900)

    report = _cancelled_before(relaunch)
    assert report.verdict == "done"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
