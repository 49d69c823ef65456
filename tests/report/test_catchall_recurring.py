"""Catch-all: two failed attempts of one job recur only when they failed the same way.

Found by replaying on the real SLURM: ``gpu-ci-kernels`` failed first with
``/venv/bin/python: No module named pytest`` (exit 1), and its resubmission ran pytest and
failed one test (``1 failed, 3 passed``, exit 1). Neither log holds a traceback, OOM or signal,
so both signatures were ``exit1 / failed`` and the second read ``RECURRING as in <first>:
FAILED exit 1`` (recurring-failure, "not transient, do not just resubmit") with pytest's tally
gone from the Note. The rulebook's recurring rule is about *identical* failures; the failing
line the catch-all Note already quotes tells these two apart. The log lines are those the
replay jobs printed.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, log, record

NO_PYTEST = "== GPU CI on vm ==\n/tmp/sfth/venv/bin/python: No module named pytest\n"
ONE_FAILED = (
    "collected 4 items\n\n"
    "ci/test_kernels.py::test_rmsnorm_matches_reference PASSED                [ 25%]\n"
    "ci/test_kernels.py::test_flash_attn_bf16_parity FAILED                   [ 75%]\n\n"
    "=================================== FAILURES ===================================\n"
    "E       AssertionError: bf16 parity outside tolerance\n\n"
    "ci/test_kernels.py:9: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED ci/test_kernels.py::test_flash_attn_bf16_parity - AssertionError: bf16...\n"
    "========================= 1 failed, 3 passed in 2.05s ==========================\n")


def _attempt(job_id: str, text: str, minutes_ago: int) -> JobFacts:
    rec = record("gpu-ci-kernels", job_id, JobState.FAILED, exit_code=1, elapsed_s=4,
                 submit_time=NOW - timedelta(minutes=minutes_ago),
                 start_time=NOW - timedelta(minutes=minutes_ago))
    return JobFacts(record=rec, log=log(text=text), summary=parse_log(text))


def _second(first: str, second: str) -> JobReport:
    report, _ = build_report(
        [cluster("alpha", [_attempt("1713", first, 20), _attempt("1974", second, 5)])],
        settings=ReportSettings(), now=NOW)
    (job,) = [j for j in report.jobs if j.job_id == "1974"]
    return job


def test_a_different_failing_line_is_no_recurrence() -> None:
    job = _second(NO_PYTEST, ONE_FAILED)
    assert "recurring-failure" not in job.flags
    assert job.trend == "1 failed, 3 passed"


def test_the_same_failing_test_twice_recurs_and_names_it() -> None:
    job = _second(ONE_FAILED, ONE_FAILED)
    assert "recurring-failure" in job.flags
    assert job.recommendation is not None
    assert "test_kernels.py::test_flash_attn_bf16_parity" in job.recommendation.why
