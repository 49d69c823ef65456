"""A job in state DEADLINE is read as SLURM's ``--deadline`` end wherever its state is read.

Only squeue's reason ``DeadLine`` said it: a record whose state says DEADLINE with another
reason (sacct's ``state: {current: ["DEADLINE"], reason: "None"}``, a ``job_state`` list
printed with no reason, ``squeue -o``'s ``%T`` with ``%r`` None, scontrol's
``JobState=DEADLINE`` beside a record squeue gave another reason) read 'Walltime TIMEOUT; no
successor queued' and, with a restart queued ``afterany``, 'normal chain restart'. The real
job: ``sbatch --time=3 --deadline=now+70`` (991 on SLURM 22.05), ended unstarted, as squeue and
scontrol printed it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.slurm.parse import record_from_squeue
from probes.slurm.plain import parse_squeue_plain
from probes.slurm.scontrol import merge_scontrol, parse_scontrol_line
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster

AT = int((NOW - timedelta(minutes=2)).timestamp())
W = "/home/jobtables/jt-tests/chains-exp"


def _json(**fields: Any) -> SchedulerRecord:
    raw: dict[str, Any] = {
        "job_id": 991, "name": "dl-run", "user_name": "jobtables", "submit_time": AT,
        "eligible_time": AT, "start_time": AT, "end_time": AT, "time_limit": 3, "nodes": "",
        "current_working_directory": W, "standard_output": f"{W}/slurm-%j.out"}
    raw.update(fields)
    rec = record_from_squeue("local22", raw, NOW)
    assert rec is not None
    return rec


def _plain(reason: str) -> SchedulerRecord:
    at = NOW.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    line = (f"991|jobtables|DEADLINE|{reason}|{at}|{at}|{at}|3:00|(null)|0:00|dl-run|{W}|"
            f"{W}/s.sh")
    (rec,) = parse_squeue_plain(line, cluster="local22", now=NOW)
    return rec


def _scontrol(record: SchedulerRecord) -> SchedulerRecord:
    fields = parse_scontrol_line(
        "JobId=991 JobName=dl-run JobState=DEADLINE Reason=DeadLine Dependency=(null) "
        "RunTime=00:00:00 TimeLimit=00:03:00 Deadline=2026-12-05T00:33:34 NodeList= "
        f"WorkDir={W} StdOut={W}/slurm-991.out")
    return merge_scontrol(record, fields)


def _waiting() -> JobFacts:
    rec = _json(job_id=992, name="dl-run-r2", job_state="PENDING", state_reason="Dependency",
                start_time=0, end_time=0, eligible_time=0,
                dependency="afterany:991(unfulfilled)")
    return JobFacts(record=rec)


def _row(record: SchedulerRecord, *others: JobFacts) -> JobReport:
    report, _ = build_report([cluster("local22", [JobFacts(record=record), *others])],
                             settings=ReportSettings(), now=NOW)
    return next(j for j in report.jobs if j.job_id == "991")


CASES: dict[str, Callable[[], SchedulerRecord]] = {
    "sacct state block": lambda: _json(state={"current": ["DEADLINE"], "reason": "None"}),
    "job_state list, no reason": lambda: _json(job_state=["DEADLINE"], state_reason=""),
    "job_state string, reason None": lambda: _json(job_state="DEADLINE", state_reason="None"),
    "squeue -o, reason None": lambda: _plain("None"),
    "scontrol beside another reason": lambda: _scontrol(
        _json(job_state="TIMEOUT", state_reason="TimeLimit")),
}


def test_every_reading_of_the_deadline_state_is_a_deadline_end() -> None:
    for case, build in CASES.items():
        record = build()
        assert record.state is JobState.TIMEOUT, case
        row = _row(record)
        assert row.verdict == "failed" and "DEADLINE" in row.trend, (case, row.trend)
        assert "walltime" not in row.trend.lower(), (case, row.trend)
        assert row.recommendation is not None and "--deadline" in row.recommendation.why


def test_a_deadline_end_is_no_chain_restart_wherever_read() -> None:
    for case, build in CASES.items():
        row = _row(build(), _waiting())
        assert row.successor is None and "chain-restart" not in row.flags, (case, row.trend)
        assert row.verdict == "failed", (case, row.trend)


def test_squeue_s_own_reading_is_unchanged() -> None:
    """As the real cluster printed it (reason DeadLine) and a walltime TIMEOUT stays one."""
    assert _plain("DeadLine").reason == "DeadLine"
    assert _json(job_state="DEADLINE", state_reason="DeadLine").reason == "DeadLine"
    walltime = _json(job_state="TIMEOUT", state_reason="TimeLimit")
    assert walltime.reason == "TimeLimit"
    assert _row(walltime, _waiting()).successor == "992"
