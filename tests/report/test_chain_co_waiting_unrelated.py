"""Rule 4 (a job that waited on the TIMEOUT together with others) takes no job of another run.

A lone ``rl-`` TIMEOUT with no restart, in a workdir where another run's catch-all task (an
upload of that run's checkpoint) waits on that run: SLURM's record of the upload
(``afterany:B(unfulfilled)``, or cleared and pending for room once B ended) is the same as
an AND list's restart once A's element was met, so only the job's kind tells them apart. The
upload is no restart of the lone run: it reads failed, not 'normal chain restart'. Records
shaped as ``squeue --json`` prints them (tests/report/test_chain_multi_dependency.py).
"""

from __future__ import annotations

from probes.models import JobState
from report.models import JobReport
from tests.report.test_chain_multi_dependency import A_END, B_END, _job, _rows

LONE = _job(305, "rl-lone", "TIMEOUT")
OTHER_RUNNING = _job(306, "rl-other", "RUNNING", end_time=B_END)
OTHER_DONE = _job(306, "rl-other", "COMPLETED", end_time=B_END)


def _failed(rows: dict[str, JobReport], job_id: str = "305") -> None:
    row = rows[job_id]
    assert row.successor is None and "chain-restart" not in row.flags, row.trend
    assert row.verdict == "failed", (row.verdict, row.trend)


def test_an_upload_waiting_on_another_run_continues_no_lone_timeout() -> None:
    upload = _job(307, "upload-rl-other", "PENDING", dependency="afterany:306(unfulfilled)")
    _failed(_rows(LONE, OTHER_RUNNING, upload))


def test_an_upload_released_by_another_run_and_pending_for_room_continues_none() -> None:
    released = _job(307, "upload-rl-other", "RUNNING", eligible_time=B_END + 1)
    pending = released.model_copy(update={"record": released.record.model_copy(
        update={"state": JobState.PENDING, "reason": "Priority", "start_time": None,
                "end_time": None})})
    _failed(_rows(LONE, OTHER_DONE, pending))


def test_an_eval_waiting_on_another_run_continues_no_lone_timeout() -> None:
    """Another bucket's job was no candidate before either (the judge's ``continues``)."""
    evaluation = _job(307, "eval-rl-other", "PENDING", dependency="afterany:306(unfulfilled)")
    _failed(_rows(LONE, OTHER_RUNNING, evaluation))


def test_a_restart_of_the_lone_run_s_bucket_still_continues_both() -> None:
    """The AND list's restart of the run's own bucket is still linked (2ddb9fe)."""
    resume = _job(307, "rl-resume", "PENDING", dependency="afterany:306(unfulfilled)")
    row = _rows(LONE, OTHER_RUNNING, resume)["305"]
    assert row.successor == "307" and row.verdict == "restarting", row.trend
    assert A_END < B_END


def test_a_next_stage_waiting_afterok_on_another_run_continues_no_lone_timeout() -> None:
    """Of the same bucket but waiting ``afterok`` on the other run: an AND list's restart of
    a TIMEOUT (``-d afterany:A:B``) waits ``afterany`` on B too; ``afterok:A:B`` would have
    left it ``DependencyNeverSatisfied`` at A's TIMEOUT, not pending on B."""
    stage = _job(307, "rl-other-stage2", "PENDING", dependency="afterok:306(unfulfilled)")
    _failed(_rows(LONE, OTHER_RUNNING, stage))
