"""A job SLURM could not launch says so: its diagnosis carries the scheduler's reason.

Replayed on the real SLURM: a job whose StdOut directory did not exist ended FAILED with
``Reason=JobLaunchFailure ExitCode=0:53`` and read ``FAILED by signal 53``, no signal the job
ever got. A reason that only restates the exit (``NonZeroExitCode``, ``RaisedSignal:...``) is
left out, so ordinary failures read as before.
"""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record


def _failed(reason: str | None, exit_code: int, exit_signal: int | None) -> JobFacts:
    rec = record("sft-nolog", "34", JobState.FAILED, reason=reason, exit_code=exit_code,
                 exit_signal=exit_signal, elapsed_s=0, nodes="vm")
    return JobFacts(record=rec, log=log(status="missing", path=None))


def test_a_launch_failure_names_its_reason() -> None:
    """Trend and diagnose name JobLaunchFailure next to the meaningless signal 53."""
    report = judge(_failed("JobLaunchFailure", 0, 53)).report
    assert report.trend.startswith("FAILED by signal 53 (JobLaunchFailure)")
    assert report.recommendation is not None
    assert "(JobLaunchFailure)" in report.recommendation.why


@pytest.mark.parametrize(("reason", "code", "signal", "trend"), [
    ("NonZeroExitCode", 3, None, "FAILED exit 3"),
    ("RaisedSignal:9_Killed", 0, 9, "FAILED by signal 9"),
    (None, 1, None, "FAILED exit 1"),
])
def test_a_reason_restating_the_exit_is_left_out(reason: str | None, code: int,
                                                 signal: int | None, trend: str) -> None:
    """Ordinary failures keep their short diagnosis."""
    assert judge(_failed(reason, code, signal)).report.trend == trend
