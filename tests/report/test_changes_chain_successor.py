"""A chain restart's successor starting in the same sweep is its restart line, not a line more.

Found by a day of the lab on the real SLURM (quiet-day dry run: rl-ppo-llama8b-chain 2414 ran
into its --time and TIMEOUT, its afterany successor 2415 started at once): the sweep's change
reply said it twice, '• restarted: rl-ppo-llama8b-chain (local:2414) — chain restart → 2415'
and '• started: rl-ppo-llama8b-chain (local:2415) — running'; six chain restarts of the day
were twelve lines. The restart line already names the successor, and a chain restart is
the normal case (rulebook): one line.
"""

from __future__ import annotations

from probes.models import JobState
from report.changes import diff, merged_lines, snapshots
from tests.report.factories import report_job, report_of


def _chain(ended: JobState, successor: JobState) -> tuple[list, list]:
    run = dict(name="rl-ppo-llama8b-chain", job_id="2414")
    nxt = dict(name="rl-ppo-llama8b-chain", job_id="2415")
    before = [report_job(**run, state=JobState.RUNNING, step=9),
              report_job(**nxt, state=JobState.PENDING, verdict="buffering")]
    after = [report_job(**run, state=ended, verdict="restarting", flags=["chain-restart"],
                        successor="2415", trend="Walltime TIMEOUT; normal chain restart → 2415"),
             report_job(**nxt, state=successor, step=10)]
    return before, after


def test_a_successor_started_with_its_restart_is_one_line() -> None:
    """TIMEOUT and the successor running, both since the last sweep: the restart line only."""
    before, after = _chain(JobState.TIMEOUT, JobState.RUNNING)
    changes = diff(snapshots(report_of(*before)), report_of(*after))
    assert [(c.kind, c.job_id) for c in changes] == [("restarted", "2414")]
    assert merged_lines(changes) == [
        "• restarted: rl-ppo-llama8b-chain (alpha:2414) — chain restart → 2415"]


def test_a_successor_started_while_the_run_was_ending_is_one_line() -> None:
    """The restart caught while SLURM ends the run (COMPLETING) and its successor already up."""
    before, after = _chain(JobState.COMPLETING, JobState.RUNNING)
    changes = diff(snapshots(report_of(*before)), report_of(*after))
    assert [(c.kind, c.job_id) for c in changes] == [("restarted", "2414")]


def test_a_successor_starting_a_sweep_later_is_told_started() -> None:
    """The restart told while the successor still waited: its start later is news of its own."""
    before, after = _chain(JobState.TIMEOUT, JobState.PENDING)
    told = diff(snapshots(report_of(*before)), report_of(*after))
    assert [(c.kind, c.job_id) for c in told] == [("restarted", "2414")]
    later = [after[0], after[1].model_copy(update={"state": JobState.RUNNING})]
    changes = diff(snapshots(report_of(*after)), report_of(*later))
    assert [(c.kind, c.job_id) for c in changes] == [("started", "2415")]
