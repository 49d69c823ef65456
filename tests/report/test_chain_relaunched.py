"""A TIMEOUT whose restart was cancelled and the run then relaunched by hand continues in it.

Replayed on the real SLURM 22.05 as jtuser: ``sft-h5rl`` 2997 (``--time=1``) with its restart
2998 queued ``afterany:2997``; 2997 timed out, 2998 started at its end and was ``scancel``led;
more than 5 minutes later the user relaunched the run by hand, same name, workdir and
``--output`` (3010). 2997 read 'Walltime TIMEOUT; restart 2998 cancelled: chain stopped',
verdict failed, a diagnose to resubmit, while the run went on in 3010: the fallback takes only
a job queued within SUBMIT_SLACK of the TIMEOUT's end (queued by the chain), and a relaunch
after a cancel comes later by nature. A live job of the run queued after the cancel is now the
successor. The records are shaped as ``squeue --json -t all`` prints them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from probes.models import JobFacts
from probes.slurm.parse import record_from_squeue
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster

W = "/home/jtuser/jt-tests/h5rl-a"
T0 = int((NOW - timedelta(minutes=30)).timestamp())


def _job(job_id: int, state: str, *, name: str = "sft-h5rl", workdir: str = W,
         **fields: Any) -> JobFacts:
    raw: dict[str, Any] = {
        "job_id": job_id, "name": name, "user_name": "jtuser", "job_state": state,
        "state_reason": "None", "submit_time": T0, "eligible_time": T0, "start_time": T0 + 1,
        "end_time": T0 + 84, "time_limit": 1, "current_working_directory": workdir,
        "standard_output": f"{workdir}/{name}_%j.out", "dependency": "", "exit_code": 0,
        "nodes": "vm", "batch_host": "vm"}
    raw.update(fields)
    rec = record_from_squeue("local22", raw, NOW)
    assert rec is not None
    return JobFacts(record=rec)


TIMEOUT = _job(2997, "TIMEOUT", state_reason="TimeLimit")
CANCELLED = _job(2998, "CANCELLED", eligible_time=T0 + 84, start_time=T0 + 85,
                 end_time=T0 + 120)


def _later(job_id: int = 3010, minutes: int = 12, state: str = "RUNNING",
           **fields: Any) -> JobFacts:
    at = T0 + 120 + minutes * 60
    base: dict[str, Any] = {"submit_time": at, "eligible_time": at, "start_time": at + 1,
                            "end_time": at + 61, "time_limit": 1}
    if state == "PENDING":
        base.update(start_time=0, end_time=0, nodes="", batch_host="", state_reason="Priority")
    return _job(job_id, state, **{**base, **fields})


def _row(*jobs: JobFacts) -> JobReport:
    report, _ = build_report([cluster("local22", [TIMEOUT, *jobs])],
                             settings=ReportSettings(), now=NOW)
    return next(j for j in report.jobs if j.job_id == "2997")


def test_a_run_relaunched_by_hand_after_the_cancel_continues_it() -> None:
    for state in ("RUNNING", "PENDING"):
        row = _row(CANCELLED, _later(state=state))
        assert row.successor == "3010" and "chain-restart" in row.flags, (state, row.trend)
        assert row.verdict == "restarting" and "3010" in row.trend


def test_a_relaunch_needs_the_same_run() -> None:
    """Another workdir or another name: no relaunch of this run, the chain stopped."""
    for other in (_later(workdir="/home/jtuser/jt-tests/other"),
                  _later(name="sft-other")):
        row = _row(CANCELLED, other)
        assert row.successor is None and "cancelled" in row.trend, row.trend


def test_without_a_cancelled_restart_a_late_launch_is_still_no_restart() -> None:
    """The fallback's bound stands where no restart was cancelled (a TIMEOUT left alone)."""
    row = _row(_later())
    assert row.successor is None and "no successor" in row.trend, row.trend


def test_a_late_relaunch_is_a_new_run() -> None:
    """Queued past RELAUNCH_WINDOW after the cancel (days, or just over the hour): a new run,
    the chain stopped; within it (59 minutes) still the run going on."""
    for minutes in (61, 3 * 24 * 60):
        for state in ("RUNNING", "PENDING"):
            row = _row(CANCELLED, _later(minutes=minutes, state=state))
            assert row.successor is None and "chain-restart" not in row.flags, (minutes, state)
            assert row.verdict == "failed" and "cancelled" in row.trend, row.trend
    row = _row(CANCELLED, _later(minutes=59))
    assert row.successor == "3010" and row.verdict == "restarting", row.trend
