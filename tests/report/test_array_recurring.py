"""Tasks of one array (or components of one hetjob) are no attempts of each other.

Replayed on the real SLURM as jtuser: ``sbatch --array=0-1 --time=1`` (a verl run per task, no
successor queued) TIMEOUT in both tasks; ``jobtables sweep`` read task 1 'RECURRING as in
1821_0: TIMEOUT by signal 15 (TimeLimit)', recurring-failure, diagnose '... not transient, do
not just resubmit', and ``jobtables job 1821_1`` did not. CONTRACT §6: ``recurring-failure`` is
the same failure on consecutive *attempts*; parallel tasks running side by side are not, while a
restart array's task (another array id) still is.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, log, record

OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")


def _task(job_id: str, state: JobState, text: str, minutes_ago: int = 30,
          throttle: str | None = None) -> JobFacts:
    base, _, task = job_id.partition("_")
    labels = {"array_throttle": throttle} if throttle is not None else {}
    rec = record("rl-grid", job_id, state, array_job_id=base, array_task_id=task, labels=labels,
                 exit_code=1 if text else 0, elapsed_s=60,
                 submit_time=NOW - timedelta(minutes=minutes_ago),
                 start_time=NOW - timedelta(minutes=minutes_ago - 1),
                 end_time=NOW - timedelta(minutes=minutes_ago - 2))
    body = text or "step:1 - actor/entropy:0.4\n"
    return JobFacts(record=rec, log=log(text=body), summary=parse_log(body))


def _rows(*jobs: JobFacts) -> dict[str, JobReport]:
    report, _ = build_report([cluster("alpha", list(jobs))], settings=ReportSettings(), now=NOW)
    return {j.job_id: j for j in report.jobs}


def test_timeout_siblings_of_one_array_do_not_recur() -> None:
    rows = _rows(_task("1821_0", JobState.TIMEOUT, ""), _task("1821_1", JobState.TIMEOUT, ""))
    for job_id in ("1821_0", "1821_1"):
        assert "recurring-failure" not in rows[job_id].flags
        assert rows[job_id].verdict == "failed"


def test_failed_siblings_of_one_array_do_not_recur() -> None:
    rows = _rows(_task("1821_0", JobState.FAILED, OOM), _task("1821_1", JobState.FAILED, OOM))
    assert "recurring-failure" not in rows["1821_1"].flags


def test_a_restart_arrays_task_failing_alike_still_recurs() -> None:
    """The next array of the run (another id, submitted later) is a new attempt."""
    rows = _rows(_task("1821_0", JobState.FAILED, OOM, minutes_ago=60),
                 _task("1830_0", JobState.FAILED, OOM, minutes_ago=20))
    assert "recurring-failure" in rows["1830_0"].flags


def test_a_throttled_arrays_next_task_failing_alike_still_recurs() -> None:
    """``--array=0-9%1`` runs its tasks one after another, each resuming the last: a task that
    fails as the one before it (which ended before it started) is a consecutive attempt, not a
    sibling beside it (review of b9c0d43)."""
    rows = _rows(_task("1821_0", JobState.FAILED, OOM, minutes_ago=60, throttle="1"),
                 _task("1821_1", JobState.FAILED, OOM, minutes_ago=20, throttle="1"))
    assert "recurring-failure" in rows["1821_1"].flags
    assert "recurring-failure" not in rows["1821_0"].flags


def test_a_grid_run_in_waves_has_no_attempts_among_its_tasks() -> None:
    """``--array=0-5%2`` (or unthrottled, a few at a time): task 2 starts when task 0 ends, by
    the throttle, a cell of its own. Replayed on the real SLURM as jtuser (-t 1, every task
    TIMEOUT): 'RECURRING as in 1056_1: TIMEOUT by signal 15', recurring-failure, 'same failure
    as attempt 1056_1 ... do not just resubmit' for each later wave's cell. Only a %1 array's
    tasks are attempts of one another (report.chain reads it so too)."""
    for throttle in ("2", "0", None):
        for state, text in ((JobState.TIMEOUT, ""), (JobState.FAILED, OOM)):
            rows = _rows(_task("1056_0", state, text, minutes_ago=60, throttle=throttle),
                         _task("1056_2", state, text, minutes_ago=20, throttle=throttle))
            assert "recurring-failure" not in rows["1056_2"].flags, (throttle, state)
            assert "RECURRING" not in rows["1056_2"].trend
