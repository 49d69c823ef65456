"""Catch-all: a FAILED job's note and diagnose quote the log's error, not only ``exit 1``.

Found by an acceptance dry-run (real sbatch jobs as jtuser, read through ``jobtables sweep``
--format json): a docker image build that died on BuildKit's ``ERROR: failed to solve: process
"/bin/sh -c pip install flash-attn..." did not complete successfully: exit code: 1`` read Note
``FAILED exit 1 → diagnose`` and diagnose ``dated agent_logs/ entry: FAILED exit 1``; a GPU-CI
run with a failing test read diagnose ``FAILED exit 1``, naming no test. Neither line is a
traceback, OOM or signal, so no fault was found and the exit code was all that was said
(rulebook, Catch-all: "the one signal that matters"; cross-cutting: "Genuine FAILED ->
diagnose"). The log lines are those the replay jobs printed.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobReport
from tests.report.factories import judge, log, record

BUILD = (
    "#1 [internal] load build definition from Dockerfile\n#1 DONE 0.0s\n"
    "#7 [4/6] RUN pip install flash-attn==2.7.4 --no-build-isolation\n"
    "#7 12.31 error: subprocess-exited-with-error\n"
    '#7 ERROR: process "/bin/sh -c pip install flash-attn==2.7.4 --no-build-isolation" did not'
    " complete successfully: exit code: 1\n------\n"
    'ERROR: failed to solve: process "/bin/sh -c pip install flash-attn==2.7.4'
    ' --no-build-isolation" did not complete successfully: exit code: 1\n')
CI = (
    "collected 3 items\n"
    "tests/gpu/test_weight_sync.py .F.                                        [100%]\n"
    "=================================== FAILURES ===================================\n"
    "E       AssertionError: weights differ after sync: max abs diff 0.0312\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/gpu/test_weight_sync.py::test_nccl_weight_sync - AssertionError: weights"
    " differ after sync: max abs diff 0.0312\n"
    "========================= 1 failed, 2 passed in 9.44s ==========================\n")


def _failed(name: str, text: str) -> JobReport:
    facts = JobFacts(record=record(name, state=JobState.FAILED, exit_code=1),
                     log=log(text=text), summary=parse_log(text))
    report = judge(facts).report
    assert report.bucket == "other" and report.verdict == "failed"
    return report


def test_a_failed_image_build_quotes_its_error() -> None:
    report = _failed("docker-build-skyrl", BUILD)
    assert "failed to solve" in report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "failed to solve" in report.recommendation.why
    assert "exit 1" in report.recommendation.why


def test_a_failed_gpu_ci_names_the_failing_test() -> None:
    report = _failed("gpu-ci-pr-1234", CI)
    assert report.trend == "1 failed, 2 passed"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "test_weight_sync.py::test_nccl_weight_sync" in report.recommendation.why
