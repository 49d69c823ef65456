"""Catch-all: a COMPLETED job's note names its one signal, not just "Completed".

Found by an acceptance dry-run (real sbatch jobs as jtuser, read through ``jobtables sweep``):
a smoke test ending ``SMOKE TEST PASSED: fp8-kv``, an nccl-tests measurement ending ``# Avg bus
bandwidth    : 158.295``, a grid probe ending ``grid done: 2/3 configs fit; best bs=64`` and a
docker image build all read Note ``Completed``, which the State column already says (rulebook,
Catch-all: "a human note: what it is, the one signal that matters"; its own example for a
COMPLETED gpu-ci row is ``2 passed``). The log lines are those the replay jobs printed.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

SMOKE = ("[smoke] fp8 kv-cache: engine up, 4 prompts\n"
         "[smoke] generated 4/4 completions, mean 212 tokens\n"
         "SMOKE TEST PASSED: fp8-kv\n")
NCCL = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5\n"
        "  8589934592    2147483648     float     sum      -1    95012   90.41  158.22      0\n"
        "# Out of bounds values : 0 OK\n"
        "# Avg bus bandwidth    : 158.295\n")
GRID = ("probe lr=1e-6 bs=32: max_mem 61.2GB step_time 4.1s OK\n"
        "probe lr=1e-6 bs=128: CUDA out of memory -> skipped\n"
        "grid done: 2/3 configs fit; best bs=64 (7.9s/step)\n")
UPLOAD = ("Start hashing 17 files.\nFinished hashing 17 files.\n"
          "https://huggingface.co/org/qwen3-8b-grpo-step300/tree/main/\n")
CI = "============================== 2 passed in 6.01s ===============================\n"


def _row(name: str, text: str, state: JobState = JobState.COMPLETED) -> tuple[str, str]:
    facts = JobFacts(record=record(name, state=state, exit_code=0), log=log(text=text),
                     summary=parse_log(text))
    report = judge(facts).report
    assert report.bucket == "other"
    return report.verdict, report.trend


@pytest.mark.parametrize(("name", "text", "note"), [
    ("smoke-test-fp8-kv", SMOKE, "SMOKE TEST PASSED: fp8-kv"),
    ("measure-nccl-bw", NCCL, "Avg bus bandwidth : 158.295"),
    ("grid-probe-bs", GRID, "grid done: 2/3 configs fit"),
])
def test_a_completed_catch_all_job_notes_its_closing_line(name: str, text: str,
                                                          note: str) -> None:
    verdict, trend = _row(name, text)
    assert verdict == "done"
    assert note in trend
    assert trend != "Completed"


@pytest.mark.parametrize(("name", "text", "note"), [
    ("rl-upload-qwen", UPLOAD, "pushed → huggingface.co/org/qwen3-8b-grpo-step300"),
    ("gpu-ci-nightly", CI, "2 passed"),
])
def test_what_already_named_the_signal_stays(name: str, text: str, note: str) -> None:
    assert _row(name, text)[1] == note


def test_a_completed_job_with_no_log_line_still_says_completed() -> None:
    assert _row("smoke-test-empty", "")[1] == "Completed"
