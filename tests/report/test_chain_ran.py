"""A chain's earlier links stay restarts once the chain has moved past them.

Replayed on the real SLURM 22.05 as jtuser: three ``--time=1`` attempts of one verl run
chained ``afterany`` at launch (3130 -> 3131 -> 3132, one name and workdir). While 3132 ran,
3130 read 'normal chain restart -> 3132'; once 3132 ended too (SLURM keeps ended jobs for
MinJobAge, sacct for ``recent_hours``), 3130 and 3131 read 'Walltime TIMEOUT; no successor
queued', failed, diagnose, and 3131/3132 'RECURRING as in ...': the successor rules looked at
live jobs only, and SLURM clears a started job's Dependency. A restart that already ran (it
started once its predecessor had ended) is still the successor.
"""

from __future__ import annotations

from datetime import timedelta

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, log, record

LAUNCH = NOW - timedelta(minutes=9)
ENDS = [NOW - timedelta(minutes=8), NOW - timedelta(minutes=6), NOW - timedelta(minutes=4)]
STEPS = "".join(f"step:{i} - actor/entropy:0.4{i} - critic/score/mean:0.4{i}\n"
                for i in range(1, 7))


def _attempt(job_id: str, start: timedelta, end: timedelta, state: JobState = JobState.TIMEOUT,
             name: str = "rl-ch3") -> JobFacts:
    rec = record(name, job_id, state, submit_time=LAUNCH, start_time=NOW - start,
                 end_time=NOW - end, elapsed_s=60, workdir="/w/ch3")
    return JobFacts(record=rec, log=log(text=STEPS))


def _rows(*jobs: JobFacts) -> dict[str, JobReport]:
    report, _ = build_report([cluster("alpha", list(jobs))], settings=ReportSettings(), now=NOW)
    return {j.job_id: j for j in report.jobs}


def _chain(last: JobState = JobState.TIMEOUT) -> dict[str, JobReport]:
    m = timedelta(minutes=1)
    return _rows(_attempt("3130", 9 * m, 8 * m), _attempt("3131", 8 * m, 6 * m),
                 _attempt("3132", 6 * m, 4 * m, last))


def test_earlier_links_of_an_ended_chain_are_restarts_naming_the_next_link() -> None:
    rows = _chain()
    for job_id, successor in (("3130", "3131"), ("3131", "3132")):
        row = rows[job_id]
        assert row.verdict == "restarting" and "chain-restart" in row.flags
        assert row.successor == successor and f"→ {successor}" in row.trend
        assert "recurring-failure" not in row.flags
    last = rows["3132"]  # the last link: nothing ran after it
    assert last.verdict == "failed" and last.successor is None
    assert "recurring-failure" not in last.flags


def test_a_chain_that_finished_leaves_no_failed_link() -> None:
    rows = _chain(JobState.COMPLETED)
    assert rows["3130"].successor == "3131" and rows["3131"].successor == "3132"
    assert all(rows[j].verdict == "restarting" for j in ("3130", "3131"))


def test_a_same_name_job_that_ran_beside_it_is_no_successor() -> None:
    """Started before the TIMEOUT ended (a second seed under one name): not its restart."""
    m = timedelta(minutes=1)
    rows = _rows(_attempt("3130", 9 * m, 8 * m), _attempt("3133", 9 * m, 5 * m))
    assert rows["3130"].successor is None and rows["3130"].verdict == "failed"


def _cancelled_pending(job_id: str, cancelled: timedelta, reason: str) -> JobFacts:
    """A dependant cancelled while it was still pending, as ``squeue --json -t all`` (22.05,
    seen on the real SLURM) prints it: CANCELLED with a start time, the cancel's, equal to its
    end, no node, its pending reason kept. It never ran."""
    from probes.slurm.parse import record_from_squeue

    at = int((NOW - cancelled).timestamp())
    rec = record_from_squeue("alpha", {
        "job_id": int(job_id), "name": "rl-ch3", "user_name": "alice",
        "job_state": "CANCELLED", "state_reason": reason, "nodes": "", "batch_host": "",
        "submit_time": int(LAUNCH.timestamp()), "eligible_time": 0, "start_time": at,
        "end_time": at, "time_limit": 1, "current_working_directory": "/w/ch3",
        "standard_output": f"/w/ch3/slurm-{job_id}.out",
        "dependency": "", "exit_code": 0}, NOW)
    assert rec is not None and rec.start_time == rec.end_time
    return JobFacts(record=rec)


def _cancelled_pending_sacct(job_id: str, cancelled: timedelta) -> JobFacts:
    """The same dependant as ``sacct --json`` gives it (recent_hours): its node list is
    slurmdbd's 'None assigned'."""
    from probes.slurm.parse import record_from_squeue

    at = int((NOW - cancelled).timestamp())
    rec = record_from_squeue("alpha", {
        "job_id": int(job_id), "name": "rl-ch3", "user": "alice", "nodes": "None assigned",
        "state": {"current": "CANCELLED", "reason": "DependencyNeverSatisfied"},
        "time": {"submission": int(LAUNCH.timestamp()), "eligible": 0, "start": at,
                 "end": at, "limit": 1},
        "working_directory": "/w/ch3", "stdout_expanded": f"/w/ch3/slurm-{job_id}.out"}, NOW)
    assert rec is not None and rec.start_time == rec.end_time and rec.nodes == "None assigned"
    return JobFacts(record=rec)


def test_a_dependant_cancelled_before_it_started_is_no_successor() -> None:
    """The TIMEOUT's successor was cancelled while pending once the TIMEOUT had ended (left
    DependencyNeverSatisfied behind an afterok, or given up in the queue): SLURM stamps its
    start with the cancel time, after the TIMEOUT's end, yet it never ran. Nothing continued
    the run: no successor, failed (it read 'normal chain restart -> 3131 (ended)')."""
    m = timedelta(minutes=1)
    for dependant in (_cancelled_pending("3131", 5 * m, "DependencyNeverSatisfied"),
                      _cancelled_pending("3131", 5 * m, "Priority"),
                      _cancelled_pending_sacct("3131", 5 * m)):
        rows = _rows(_attempt("3130", 9 * m, 8 * m), dependant)
        assert rows["3130"].successor is None, dependant.record
        assert rows["3130"].verdict == "failed", dependant.record
