"""A restart queued ``afterany:A:B`` is B's successor too once it started, whatever its name.

Replayed on the real SLURM 22.05 as jtuser: ``sft-h5ab`` 3258 (``--time=1``), ``sft-h5bb``
3259 (``--time=2``) and ``sft-h5ab`` 3260 queued ``-d afterany:3258:3259``, one workdir, the
log ``%x_%j.out``. While 3260 waited, both TIMEOUTs read a chain restart → 3260 (its
Dependency names both). Once 3259's end released it, SLURM cleared that Dependency: the sweep
without memory (the CLI) read 3259 'Walltime TIMEOUT; no successor queued', failed, diagnose,
because 3260 has another name and ``%x`` makes each name's log its own. SLURM's own times still
say it: 3260 was submitted before 3259 ended and became eligible only at that end. The records
are shaped as ``squeue --json -t all`` printed them.
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

W = "/home/jtuser/jt-tests/h5ab-a"
T0 = int((NOW - timedelta(minutes=10)).timestamp())


def _job(job_id: int, name: str, state: str, **fields: Any) -> JobFacts:
    raw: dict[str, Any] = {
        "job_id": job_id, "name": name, "user_name": "jtuser", "job_state": state,
        "state_reason": "TimeLimit" if state == "TIMEOUT" else "None", "submit_time": T0,
        "eligible_time": T0, "start_time": T0, "end_time": T0 + 60, "time_limit": 1,
        "current_working_directory": W, "standard_output": f"{W}/%x_%j.out",
        "dependency": "", "exit_code": 0, "nodes": "vm", "batch_host": "vm"}
    raw.update(fields)
    rec = record_from_squeue("local22", raw, NOW)
    assert rec is not None
    return JobFacts(record=rec)


A = _job(3258, "sft-h5ab", "TIMEOUT", end_time=T0 + 64)
B = _job(3259, "sft-h5bb", "TIMEOUT", time_limit=2, end_time=T0 + 124)
STARTED = _job(3260, "sft-h5ab", "RUNNING", time_limit=3, eligible_time=T0 + 124,
               start_time=T0 + 124, end_time=T0 + 304)


def _rows(*jobs: JobFacts) -> dict[str, JobReport]:
    report, _ = build_report([cluster("local22", list(jobs))], settings=ReportSettings(),
                             now=NOW)
    return {j.job_id: j for j in report.jobs}


def test_the_restart_released_by_the_other_named_timeout_continues_it() -> None:
    rows = _rows(A, B, STARTED)
    for job_id in ("3258", "3259"):
        row = rows[job_id]
        assert row.successor == "3260" and row.verdict == "restarting", (job_id, row.trend)


def test_a_job_of_another_name_released_otherwise_is_no_restart() -> None:
    """Eligible at its own submit (no dependency), or at another moment: no link by name."""
    for eligible in (T0 + 100, T0 + 400):
        other = _job(3261, "sft-h5cc", "RUNNING", submit_time=T0 + 100, eligible_time=eligible,
                     start_time=max(eligible, T0 + 130), end_time=T0 + 600)
        row = _rows(B, other)["3259"]
        assert row.successor is None and "no successor" in row.trend, (eligible, row.trend)


def test_an_eval_released_by_the_timeout_is_no_restart() -> None:
    """Another bucket's job queued afterany behind the run continues no run."""
    ev = _job(3262, "eval-h5bb", "RUNNING", eligible_time=T0 + 124, start_time=T0 + 124,
              end_time=T0 + 304)
    row = _rows(B, ev)["3259"]
    assert row.successor is None, row.trend


def test_a_release_another_end_explains_as_well_is_no_link() -> None:
    """Another job of the user ended with B and two jobs of other names were released then
    (a grid's cells hitting one walltime, each with its restart): which is whose is unknown,
    so B's TIMEOUT gets no successor of another name. One job released by both ends is
    their ``afterany:B:cell`` (tests/report/test_chain_multi_dependency.py)."""
    cell = _job(3263, "sft-h5dd", "TIMEOUT", time_limit=2, end_time=T0 + 123)
    second = _job(3264, "sft-h5ee", "RUNNING", time_limit=3, eligible_time=T0 + 124,
                  start_time=T0 + 124, end_time=T0 + 304)
    row = _rows(B, cell, STARTED, second)["3259"]
    assert row.successor is None, row.trend
