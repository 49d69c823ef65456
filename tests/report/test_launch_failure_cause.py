"""A job SLURM could not launch names the cause the collector found: its StdOut's directory.

Found on the real SLURM 22.05 (job 35, ``sbatch -o W/nosuch/dir/%j.out``): the row read
'FAILED by signal 53 (JobLaunchFailure)' and diagnose quoted the same, no cause. With the
collector's finding on the missing log the Trend and the diagnose name the absent directory; a
running job whose StdOut directory vanished says it in its 'No log found'.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

WHY = "StdOut dir /w/nosuch does not exist (sbatch does not create it)"


def test_a_launch_failure_names_the_absent_directory() -> None:
    """Trend and diagnose say it failed at launch and why, not 'by signal 53'."""
    rec = record("rl-a4", "35", JobState.FAILED, reason="JobLaunchFailure", exit_code=0,
                 exit_signal=53, elapsed_s=0, nodes="vm")
    report = judge(JobFacts(record=rec, log=log(status="missing", path=None, error=WHY))).report
    assert report.trend.startswith(f"FAILED at launch (JobLaunchFailure): {WHY[:10]}")
    assert report.recommendation is not None and WHY in report.recommendation.why


def test_a_running_job_says_why_no_log_is_found() -> None:
    """The missing-log Trend carries the collector's reason."""
    rec = record("rl-a4", "36", JobState.RUNNING, elapsed_s=60, nodes="vm")
    report = judge(JobFacts(record=rec, log=log(status="missing", path=None, error=WHY))).report
    assert "log-missing" in report.flags and "does not exist" in report.trend, report.trend


def test_an_ordinary_failure_with_a_missing_log_reads_as_before() -> None:
    """Near miss: exit 1, log missing with no reason: 'FAILED exit 1'."""
    rec = record("rl-x", "37", JobState.FAILED, exit_code=1, elapsed_s=30, nodes="vm")
    report = judge(JobFacts(record=rec, log=log(status="missing", path=None))).report
    assert report.trend == "FAILED exit 1"
