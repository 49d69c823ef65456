"""A collapse on the last steps of a walltime TIMEOUT whose restart is queued: the run goes on.

Found by replaying a verl console on the real SLURM: an ``sbatch --time=1`` job whose step 29
of 30 fired grad_norm 3.1 and entropy −52 %, with its ``--dependency=afterany`` restart
pending. The row read verdict ``collapse``, flags ``chain-restart`` and ``collapse``, successor
named, and recommendation ``null``: the collapse rule's cancel + salvage was skipped because the
TIMEOUT job itself had nothing left to cancel, while its restart was about to resume the
collapsed policy from its last save. The cancel now targets the restart the run goes on in.
"""

from __future__ import annotations

from typing import Any

from probes.models import JobFacts, JobState
from report.settings import ReportSettings
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, with_last

COLLAPSED = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1, 0.2),
                       entropy=with_last([0.5] * 12, 0.24, 0.5))
"""Collapse on step 11 of 12 (one of the last five), the last step calm again."""


def _timed_out(name: str = "rl-run", series: dict[str, Any] | None = None) -> JobFacts:
    rec = record(name, "100", JobState.TIMEOUT, end_time=NOW)
    return facts(rec, points(series or COLLAPSED), checkpoints=[10])


def _restart(state: JobState = JobState.PENDING, name: str = "rl-run") -> Any:
    return record(name, "4242", state, depends_on=("100",))


def test_the_cancel_targets_the_restart_the_run_goes_on_in() -> None:
    """Collapse and chain restart both stand; the recommendation cancels the successor."""
    report = judge(_timed_out(), others=[_restart()]).report
    assert {"collapse", "chain-restart"} <= set(report.flags)
    assert report.verdict == "collapse" and report.successor == "4242"
    assert report.recommendation is not None
    assert report.recommendation.action == "cancel_and_salvage"
    why = report.recommendation.why
    assert why.startswith("collapse at step 11: grad_norm 3.1 > 1")
    assert "4242" in why and "banked step 10" in why


def test_a_running_restart_is_cancelled_too() -> None:
    """The restart already resumed: it is the live run, still the one to cancel."""
    report = judge(_timed_out(), others=[_restart(JobState.RUNNING)]).report
    assert report.recommendation is not None
    assert report.recommendation.action == "cancel_and_salvage"
    assert "4242" in report.recommendation.why


def test_an_ablation_s_restart_is_left_running() -> None:
    """A spike-mitigation ablation is never cancelled, in its restart either."""
    name = "rl-zclip-ablation"
    report = judge(_timed_out(name), others=[_restart(name=name)]).report
    assert "ablation-exempt" in report.flags
    assert report.recommendation is not None and report.recommendation.action == "none"
    assert "4242" in report.recommendation.why


def test_no_kill_keeps_it_a_recommendation() -> None:
    """Under no-kill the cancel of the restart is a recommendation only."""
    report = judge(_timed_out(), others=[_restart()],
                   settings=ReportSettings(no_kill=True)).report
    assert "no-kill" in report.flags and report.recommendation is not None
    assert report.recommendation.why.startswith("RECOMMENDATION ONLY (no-kill in force): collapse")


def test_near_misses_cancel_nothing() -> None:
    """A calm TIMEOUT with its restart, and a collapsed TIMEOUT whose restart already ran and
    ended, recommend no cancel."""
    calm = judge(_timed_out(series=healthy_rl()), others=[_restart()]).report
    assert calm.verdict == "restarting" and calm.recommendation is None
    ended = _restart(JobState.TIMEOUT).model_copy(update={"end_time": NOW})
    over = judge(_timed_out(), others=[ended]).report
    assert over.recommendation is None or over.recommendation.action != "cancel_and_salvage"


def _with_restart(restart_steps: int) -> Any:
    """The collapsed TIMEOUT judged in a sweep that also read its RUNNING restart's log,
    ``restart_steps`` healthy steps resumed from the banked step."""
    from report.judge import judge_job

    timed_out = _timed_out()
    restart = facts(_restart(JobState.RUNNING),
                    points(healthy_rl(restart_steps), first_step=11) if restart_steps else ())
    return judge_job(timed_out, cluster_records=[timed_out.record, restart.record],
                     settings=ReportSettings(), now=NOW, sweep_jobs=[timed_out, restart]).report


def test_a_restart_logging_past_the_collapse_window_is_judged_by_its_own_row() -> None:
    """Review of this rule: the TIMEOUT row stays in the report for recent_hours, and its
    restart may have logged many healthy steps since (resumed from the save before the
    collapse). The collapse is then on none of the run's last 5 logged steps (they are the
    restart's): the old row no longer recommends cancelling a run that recovered; the
    restart's own row judges it. A restart with fewer steps than the window is still named."""
    recovered = _with_restart(8)
    assert recovered.recommendation is None or \
        recovered.recommendation.action != "cancel_and_salvage", recovered.recommendation
    early = _with_restart(2)
    assert early.recommendation is not None
    assert early.recommendation.action == "cancel_and_salvage"
    assert "4242" in early.recommendation.why
