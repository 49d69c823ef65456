"""A catch-all job's closing signal: pytest's tally (REAL pytest 9.2.0 output) and upload targets.

The upload lines are the printed forms of the tools' own output, rebuilt from their source:
``aws s3 cp`` (awscli's ``upload: <src> to <dst>``), ``huggingface-cli upload`` (prints the
commit URL it made), ``git push`` (``To <remote>``) and the ``pushing N rows -> <dataset>`` line
consolidate scripts print (seed §Catch-all example).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.outcome import read_outcome
from probes.logs.parse import parse_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "summary"),
    [("pytest-9.2.0/gpu_ci_passed.out", "2 passed"),
     ("pytest-9.2.0/gpu_ci_failed.out", "1 failed, 1 passed")],
)
def test_pytest_summary_from_real_output(fixture: str, summary: str) -> None:
    """pytest's closing line gives the tally without its duration."""
    outcome = parse_log((FIXTURES / fixture).read_bytes()).outcome
    assert outcome is not None and outcome.pytest_summary == summary


@pytest.mark.parametrize(
    ("line", "summary"),
    [
        ("===== 3 passed, 1 skipped, 2 warnings in 10.02s (0:00:10) =====",
         "3 passed, 1 skipped, 2 warnings"),
        ("============================ no tests ran in 0.01s =============================",
         "no tests ran"),
        ("=== 1 error in 0.20s ===", "1 error"),
        ("===== test session starts =====", None),  # near-miss: the header
        ("== 2 passed ==extra", None),
    ],
)
def test_pytest_summary_lines(line: str, summary: str | None) -> None:
    """Only pytest's closing tally counts."""
    outcome = read_outcome([line])
    assert (outcome.pytest_summary if outcome else None) == summary


@pytest.mark.parametrize(
    ("line", "pushed"),
    [
        ("pushing 6,977 rows -> org/swe-traces-v3", "6,977 rows → org/swe-traces-v3"),
        ("upload: ckpt/global_step_80/model.safetensors to s3://team-rl/run-a/model.safetensors",
         "s3://team-rl/run-a/model.safetensors"),
        ("https://huggingface.co/org/qwen7b-grpo-step80/commit/3f2a9c1d",
         "huggingface.co/org/qwen7b-grpo-step80"),
        ("Uploading shards to gs://bucket/exports/run-a", "gs://bucket/exports/run-a"),
        ("To https://github.com/org/results.git", "https://github.com/org/results.git"),
        ("Pushing model to the hub: org/qwen7b-sft", "org/qwen7b-sft"),
        ("Saving checkpoint to /scratch/x", None),  # near-miss: a local save is not a push
    ],
)
def test_upload_targets(line: str, pushed: str | None) -> None:
    """An upload's note is what was pushed, with its count when the line has one."""
    outcome = read_outcome(["starting", line, ""])
    assert (outcome.pushed if outcome else None) == pushed


def test_last_upload_wins() -> None:
    """Reading from the end, the latest target is the one reported."""
    outcome = read_outcome(["upload: a to s3://b/first", "upload: c to s3://b/second"])
    assert outcome is not None and outcome.pushed == "s3://b/second"
