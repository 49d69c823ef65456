"""A restart queued on several jobs continues each of them, as SLURM shows it after each end.

Records shaped as ``squeue --json -t all`` printed them on the real SLURM 22.05 (jobs 305-312,
``tests/probes/slurm/test_e2e_multi_dependency.py`` runs the same live): ``-d afterany:A:B``
reads ``afterany:B(unfulfilled)`` once A ended (SLURM deletes a met element of an AND list),
``(null)`` once B ended, eligible at B's end; ``afterany:A?afterany:B`` is cleared at A's end.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from probes.models import JobFacts, JobState
from probes.slurm.parse import record_from_squeue
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster

W = "/home/jobtables/jt-tests/chains-exp/s1"
T0 = int((NOW - timedelta(minutes=30)).timestamp())
A_END, B_END = T0 + 102, T0 + 132


def _job(job_id: int, name: str, state: str, *, workdir: str = W, **fields: Any) -> JobFacts:
    raw: dict[str, Any] = {
        "job_id": job_id, "name": name, "user_name": "jobtables", "job_state": state,
        "state_reason": "TimeLimit" if state == "TIMEOUT" else "None", "submit_time": T0,
        "eligible_time": T0, "start_time": T0 + 6, "end_time": A_END, "time_limit": 1,
        "current_working_directory": workdir, "standard_output": f"{workdir}/slurm-%j.out",
        "dependency": "", "exit_code": 0, "nodes": "vm", "batch_host": "vm"}
    raw.update(fields)
    if state == "PENDING":
        raw.update(eligible_time=0, start_time=0, end_time=0, nodes="", batch_host="",
                   state_reason="Dependency")
    rec = record_from_squeue("local22", raw, NOW)
    assert rec is not None
    return JobFacts(record=rec)


A = _job(305, "trainA", "TIMEOUT")
B_RUNNING = _job(306, "prepB", "RUNNING", end_time=B_END)
B = _job(306, "prepB", "TIMEOUT", end_time=B_END)
C_WAITING = _job(307, "resumeC", "PENDING", dependency="afterany:306(unfulfilled)")
C_RELEASED = _job(307, "resumeC", "RUNNING", eligible_time=B_END + 1, start_time=B_END + 1,
                  end_time=B_END + 61)


def _rows(*jobs: JobFacts) -> dict[str, JobReport]:
    report, _ = build_report([cluster("local22", list(jobs))], settings=ReportSettings(),
                             now=NOW)
    return {j.job_id: j for j in report.jobs}


def _continued(row: JobReport, successor: str) -> None:
    assert row.successor == successor and "chain-restart" in row.flags, (row.job_id, row.trend)
    assert row.verdict == "restarting", row.trend


def test_and_list_while_the_successor_still_waits_on_the_other() -> None:
    _continued(_rows(A, B_RUNNING, C_WAITING)["305"], "307")


def test_and_list_once_the_last_end_released_the_successor() -> None:
    rows = _rows(A, B, C_RELEASED)
    _continued(rows["305"], "307")
    _continued(rows["306"], "307")


def test_and_list_released_but_still_pending_for_room() -> None:
    """Released at B's end (eligible, Dependency cleared) and pending on Priority still."""
    c = _job(307, "resumeC", "RUNNING", eligible_time=B_END + 1)
    waiting = c.model_copy(update={"record": c.record.model_copy(
        update={"state": JobState.PENDING, "reason": "Priority", "start_time": None,
                "end_time": None})})
    rows = _rows(A, B, waiting)
    _continued(rows["305"], "307")
    _continued(rows["306"], "307")


def test_and_list_whose_predecessors_ended_in_the_same_second() -> None:
    """Both at one end (one walltime, one start): neither end alone explains the release."""
    b = _job(306, "prepB", "TIMEOUT")
    c = _job(307, "resumeC", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
             end_time=A_END + 61)
    rows = _rows(A, b, c)
    _continued(rows["305"], "307")
    _continued(rows["306"], "307")


def test_or_list_released_by_the_first_end_continues_the_later_one() -> None:
    d = _job(310, "orD", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
             end_time=A_END + 61)
    rows = _rows(A, B, d)
    _continued(rows["305"], "310")
    _continued(rows["306"], "310")
    ended = _job(310, "orD", "TIMEOUT", eligible_time=A_END + 1, start_time=A_END + 1,
                 end_time=B_END + 20)
    _continued(_rows(A, B, ended)["306"], "310")


def test_another_end_while_it_waited_leaves_it_unknown() -> None:
    """A second job of the workdir ended while the successor waited: SLURM's record says
    nothing of which one it waited on; neither is continued."""
    lone = _job(304, "loneX", "TIMEOUT")
    rows = _rows(lone, A, B_RUNNING, C_WAITING)
    for job_id in ("304", "305"):
        assert rows[job_id].successor is None and rows[job_id].verdict == "failed"


def test_another_run_s_restart_and_an_unseen_holder_are_none() -> None:
    """A restart named as the run it waits on is that run's; a holder not in view says
    nothing; another workdir is no candidate."""
    own = _job(307, "prepB-r2", "PENDING", dependency="afterany:306(unfulfilled)")
    unseen = _job(307, "resumeC", "PENDING", dependency="afterany:999(unfulfilled)")
    elsewhere = _job(307, "resumeC", "PENDING", dependency="afterany:306(unfulfilled)",
                     workdir="/home/jobtables/jt-tests/elsewhere")
    for case in ((A, B_RUNNING, own), (A, B_RUNNING, unseen), (A, B_RUNNING, elsewhere)):
        row = _rows(*case)["305"]
        assert row.successor is None and row.verdict == "failed", row.trend
