"""Change detection between sweeps, as a table: previous snapshot + current row -> the change."""

from __future__ import annotations

import pytest

from probes.models import JobState
from report.changes import Snapshot, change_of, diff, merged_lines, snapshots
from tests.report.factories import report_job, report_of

R, P = JobState.RUNNING, JobState.PENDING


def snap(state: JobState, verdict: str = "healthy", **extra: bool) -> Snapshot:
    return Snapshot(state=state, verdict=verdict, **extra)


@pytest.mark.parametrize(("prev", "state", "verdict", "flags", "kind"), [
    (None, R, "healthy", [], "started"),                       # first seen while running
    (None, P, "buffering", [], None),                          # first seen pending: quiet
    (snap(P, "buffering"), R, "buffering", [], "started"),
    (snap(R), R, "healthy", [], None),                         # nothing changed
    (snap(R), JobState.COMPLETED, "done", [], "finished"),
    (snap(R), JobState.FAILED, "failed", [], "failed"),
    (snap(R), JobState.OUT_OF_MEMORY, "failed", [], "failed"),
    (snap(R), JobState.CANCELLED, "done", [], "cancelled"),
    (snap(R), JobState.TIMEOUT, "restarting", ["chain-restart"], "restarted"),
    (snap(R), JobState.TIMEOUT, "failed", [], "failed"),       # near miss: no successor
    (snap(R), R, "collapse", ["collapse"], "collapsed"),
    (snap(R, "collapse"), R, "collapse", ["collapse"], None),  # still collapsed: quiet
    (snap(R), R, "stalled", ["stall"], "stalled"),
    (snap(R), R, "healthy", ["zombie"], "stalled"),
    (snap(R, "stalled", stalled=True), R, "healthy", [], "recovered"),
    (snap(R, "warning"), R, "healthy", [], None),  # a warning's end: the parent's, not news
    (snap(R), R, "warning", [], "warning"),                    # a warning begins: news
    (None, R, "warning", [], "warning"),                       # first seen warning
    (snap(P, "buffering"), R, "warning", [], "warning"),       # started with a warning
    (snap(R, "warning"), R, "warning", [], None),              # still warning: quiet
    (snap(R, "unknown"), R, "warning", [], "warning"),         # kept quiet by bot.repeats
    (snap(R, "collapse"), R, "warning", [], None),             # the collapse's own window
    (snap(R, "stalled", stalled=True), R, "warning", [], None),  # the told stall's episode
    (snap(JobState.FAILED, "failed"), JobState.FAILED, "failed", [], None),  # told once
    # a Kubernetes Job restarting a failed attempt under its backoffLimit: live, not terminal
    (snap(R), R, "restarting", [], "restarted"),               # restarted in place
    (snap(R), P, "restarting", [], "restarted"),               # its retry pod pending
    (snap(R, "warning"), R, "restarting", [], "restarted"),
    (None, R, "restarting", [], "restarted"),                  # first seen restarting
    (snap(R, "restarting"), R, "restarting", [], None),        # still restarting: quiet
    (snap(P, "restarting"), R, "restarting", [], None),
    # a live row judged failed (Kubernetes: running but 0 pods, a recurring crash loop):
    # terminal per the rulebook though the scheduler's state is still live
    (snap(R), R, "failed", ["silent-wedge"], "failed"),
    (snap(R, "restarting"), R, "failed", ["recurring-failure"], "failed"),
    (None, R, "failed", ["silent-wedge"], "failed"),
    (snap(R, "failed"), R, "failed", ["silent-wedge"], None),  # told once
    (snap(R, "failed"), JobState.FAILED, "failed", [], None),  # the same end, now terminal
    # running, then pending again (Kueue preempted and suspended it, SLURM requeued it)
    (snap(R), P, "buffering", ["buffer-filling"], "restarted"),
    (snap(P), P, "buffering", ["buffer-filling"], None),
])
def test_change_table(prev: Snapshot | None, state: JobState, verdict: str, flags: list[str],
                      kind: str | None) -> None:
    """Each transition gives the one change the thread and the DMs report (or none)."""
    job = report_job("rl-x", state=state, verdict=verdict, flags=flags, successor="42")
    found = change_of(prev, job)
    assert (found.kind if found else None) == kind


def test_a_live_restart_says_how_the_attempt_ended() -> None:
    """The restart's line quotes the row's Trend (count against the limit, how it ended)."""
    job = report_job("rl-x", state=R, verdict="restarting",
                     trend="Retry 1 of backoffLimit 6: OOMKilled, exit 137; retry pending")
    found = change_of(snap(R), job)
    assert found is not None and found.why == (
        "Retry 1 of backoffLimit 6: OOMKilled, exit 137; retry pending")


def test_a_job_pending_again_says_why() -> None:
    """A running job suspended again (Kueue's preemption) says its pending reason."""
    job = report_job("rl-x", state=P, verdict="buffering", trend="Pending (Suspended)")
    found = change_of(snap(R), job)
    assert found is not None and (found.kind, found.why) == ("restarted", "Pending (Suspended)")


def test_a_silent_wedge_says_why() -> None:
    """A running job with no pods left fails with its Trend, not its live state's name."""
    job = report_job("rl-x", state=R, verdict="failed", flags=["silent-wedge"],
                     trend="silent wedge: running but 0 pods")
    found = change_of(snap(R), job)
    assert found is not None and found.why == "silent wedge: running but 0 pods"


@pytest.mark.parametrize(("before", "now", "state", "verdict", "kind"), [
    (0, 1, R, "healthy", "restarted"),      # failed and restarted between two sweeps
    (1, 3, R, "healthy", "restarted"),
    (0, 1, P, "buffering", "restarted"),    # requeued (SLURM), or its retry pending
    (1, 1, R, "healthy", None),             # no new restart
    (None, 2, R, "healthy", None),          # no count kept before (an older snapshot)
    (2, 0, R, "healthy", None),             # a new pod's counts start again
    (0, 1, R, "collapse", "collapsed"),     # a collapse says more
])
def test_a_restart_between_sweeps(before: int | None, now: int, state: JobState, verdict: str,
                                  kind: str | None) -> None:
    """A job that restarted since the last sweep and runs (or waits) again is told."""
    job = report_job("rl-x", state=state, verdict=verdict, trend="Loss descending")
    found = change_of(Snapshot(state=R, verdict="healthy", restarts=before), job,
                      restarts=now)
    assert (found.kind if found else None) == kind
    if kind == "restarted":
        n = now - (before or 0)
        assert found is not None and found.why.startswith(
            f"{n} restart{'s' if n > 1 else ''} since the last sweep")


def test_array_tasks_that_changed_alike_share_one_line() -> None:
    """480 tasks that started are one line with a count and the first ids."""
    before = report_of(*[report_job("arr", job_id=f"9_{i}", state=P, verdict="buffering")
                         for i in range(480)])
    after = report_of(*[report_job("arr", job_id=f"9_{i}", state=R) for i in range(480)])
    changes = diff(snapshots(before), after)
    assert len(changes) == 480
    assert merged_lines(changes) == [
        "• started: arr ×480 (alpha:9_0, alpha:9_1, alpha:9_2 +477 more) — running"]


def test_a_cancelled_pending_array_counts_its_unsplit_tasks_once_each() -> None:
    """Real SLURM 22.05 after 'scancel' of an --array=0-9%2 job: tasks 4075_0 and 4075_1 (each
    its own record) and the unsplit remainder under the array's own id 4075 (array_task_string
    '2-9%2', 8 tasks). The line counts 10 tasks, not 3 records, and names the remainder by the
    tasks it stands for, after the split-off tasks, not as a bare id among them."""
    before = report_of(
        report_job("datagen-arr", bucket="datagen", job_id="4075_0"),
        report_job("datagen-arr", bucket="datagen", job_id="4075_1"),
        report_job("datagen-arr", bucket="datagen", job_id="4075", state=P, verdict="buffering"))
    C = JobState.CANCELLED
    after = report_of(*[report_job("datagen-arr", bucket="datagen", job_id=i, state=C,
                                   verdict="done") for i in ("4075", "4075_0", "4075_1")])
    changes = diff(snapshots(before), after, pending_tasks={("alpha", "4075"): 8})
    assert merged_lines(changes) == [
        "• cancelled: datagen-arr ×10 (alpha:4075_0, alpha:4075_1, alpha:4075 [8 tasks])"
        " — cancelled"]


def test_a_timeout_told_while_completing_is_not_told_again() -> None:
    """A chain restart caught while SLURM ends the run at its walltime (COMPLETING, TimeLimit:
    read as the TIMEOUT under way since dbf7fc2) is told then, once: the sweep that finds it
    TIMEOUT says nothing more. Found by review of dbf7fc2 (two 'restarted' lines)."""
    ending = report_job("sft-c1", state=JobState.COMPLETING, verdict="restarting",
                        flags=["chain-restart"], successor="2711",
                        trend="Walltime TIMEOUT (ending); normal chain restart → 2711")
    first = change_of(snap(R), ending)
    assert first is not None and first.kind == "restarted"
    ended = report_job("sft-c1", state=JobState.TIMEOUT, verdict="restarting",
                       flags=["chain-restart"], successor="2711",
                       trend="Walltime TIMEOUT; normal chain restart → 2711")
    assert change_of(snapshots(report_of(ending))[("alpha", ending.job_id)], ended) is None


def test_a_live_failure_then_preempted_is_told_once() -> None:
    """A row judged failed while live (told then, as failed) that SLURM then ends PREEMPTED
    says nothing more, as any terminal failed state after it. Found by review of 5ad37a8
    (its PREEMPTED branch came before that guard: two 'failed' lines and two DMs)."""
    ended = report_job("rl-x", state=JobState.PREEMPTED, verdict="failed", trend="Preempted")
    assert change_of(snap(R, "failed"), ended) is None
    assert change_of(snap(R), ended) is not None  # a healthy run preempted is told
