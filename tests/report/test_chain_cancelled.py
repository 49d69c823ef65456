"""A TIMEOUT whose restart was cancelled is no normal chain restart.

Replayed on the real SLURM 22.05: ``sft-stq-c1`` 7 (``--time=1``) with its restart 8 queued
``afterany:7`` at launch; 7 timed out, 8 started at 7's end, and 8 was then ``scancel``led.
7 read 'Walltime TIMEOUT; normal chain restart → 8 (ended)', ``chain-restart``, verdict
``restarting``: the chain had stopped and nothing said so. ``sft-stq-c2`` 9 with its restart 10
cancelled while still pending read 'no successor queued', though one was queued and cancelled.
The records below are those jobs as ``squeue --json -t all`` printed them (times shifted).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from probes.models import JobFacts
from probes.slurm.parse import record_from_squeue
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, log

WORKDIR = "/home/jobtables/jt-tests/st-h7q"
T0 = int((NOW - timedelta(minutes=8)).timestamp())
STEPS = "".join(f"{{'loss': 1.{9 - i}, 'grad_norm': 0.8{i}, 'learning_rate': 2e-05, "
                f"'epoch': 0.0{i}}}\n" for i in range(1, 7))


def _job(job_id: int, state: str, *, name: str = "sft-stq-c1", **fields: Any) -> JobFacts:
    raw: dict[str, Any] = {
        "job_id": job_id, "name": name, "user_name": "jobtables", "job_state": state,
        "state_reason": "None", "submit_time": T0, "eligible_time": T0, "start_time": T0,
        "end_time": T0 + 19, "time_limit": 1, "current_working_directory": WORKDIR,
        "standard_output": f"{WORKDIR}/{name}_%j.out", "dependency": "", "exit_code": 15,
        "nodes": "vm", "batch_host": "vm",
    }
    raw.update(fields)
    rec = record_from_squeue("local22", raw, NOW)
    assert rec is not None
    text = "" if not rec.nodes else "***** Running training *****\n" + STEPS
    return JobFacts(record=rec, log=None if not rec.nodes else log(
        text=text, path=f"{WORKDIR}/{name}_{job_id}.out"))


def _timeout(job_id: int = 7, name: str = "sft-stq-c1") -> JobFacts:
    return _job(job_id, "TIMEOUT", name=name, state_reason="TimeLimit")


def _ran(job_id: int, state: str, **fields: Any) -> JobFacts:
    """The restart, started at the TIMEOUT's end (SLURM cleared its met dependency)."""
    return _job(job_id, state, eligible_time=T0 + 19, start_time=T0 + 19, end_time=T0 + 47,
                time_limit=5, **fields)


def _rows(*jobs: JobFacts) -> dict[str, JobReport]:
    report, _ = build_report([cluster("local22", list(jobs))], settings=ReportSettings(),
                             now=NOW)
    return {j.job_id: j for j in report.jobs}


def test_a_restart_cancelled_after_it_ran_stops_the_chain() -> None:
    """7's restart 8 ran and was cancelled: no chain-restart, the trend says 8 was cancelled."""
    row = _rows(_timeout(), _ran(8, "CANCELLED"))["7"]
    assert "chain-restart" not in row.flags and row.successor is None
    assert row.verdict == "failed"
    assert "8" in row.trend and "cancelled" in row.trend.lower()
    assert "normal" not in row.trend.lower()
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert "8" in row.recommendation.why and "cancelled" in row.recommendation.why


def test_a_restart_cancelled_while_pending_is_named() -> None:
    """9's restart 10 (afterany:9) was cancelled before 9 ended: 'no successor queued' hid it."""
    pending = _job(10, "CANCELLED", name="sft-stq-c2", state_reason="Dependency",
                   eligible_time=0, start_time=T0 + 3, end_time=T0 + 3, time_limit=5,
                   dependency="afterany:9(unfulfilled)", exit_code=0, nodes="", batch_host="")
    row = _rows(_timeout(9, "sft-stq-c2"), pending)["9"]
    assert row.successor is None and row.verdict == "failed"
    assert "10" in row.trend and "cancelled" in row.trend.lower()
    assert row.recommendation is not None and "before it started" in row.recommendation.why


def test_a_live_restart_queued_after_the_cancelled_one_is_the_successor() -> None:
    """The user cancelled the queued restart and queued another: the chain goes on."""
    cancelled = _job(10, "CANCELLED", state_reason="Dependency", eligible_time=0,
                     start_time=T0 + 3, end_time=T0 + 3, dependency="afterany:7(unfulfilled)",
                     exit_code=0, nodes="", batch_host="")
    live = _job(11, "PENDING", state_reason="Priority", submit_time=T0 + 5, start_time=0,
                end_time=0, eligible_time=T0 + 19, dependency="", nodes="", batch_host="")
    row = _rows(_timeout(), cancelled, live)["7"]
    assert "chain-restart" in row.flags and row.successor == "11"


def test_an_ended_restart_names_its_own_state() -> None:
    """'(ended)' said nothing of how: the restart's state is named. (One that failed stopped
    the chain: tests/report/test_chain_successor_failed.py.)"""
    for state, word in (("COMPLETED", "completed"), ("TIMEOUT", "timeout")):
        row = _rows(_timeout(), _ran(8, state))["7"]
        assert "chain-restart" in row.flags and row.successor == "8", state
        assert row.trend.endswith(f"→ 8 ({word})"), row.trend
