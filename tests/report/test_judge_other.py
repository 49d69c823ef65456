"""Catch-all rows carry the one signal that matters: pytest's tally, what an upload pushed.

The GPU-CI logs are REAL pytest 9.2.0 output (tests/fixtures/pytest-9.2.0); the upload lines are
the tools' printed forms (see tests/probes/logs/test_outcome.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.render import render_text
from tests.report.factories import NOW, judge, log, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _job(name: str, state: JobState, text: str, **rec: object) -> JobFacts:
    return JobFacts(record=record(name, state=state, **rec), log=log(text=text),
                    summary=parse_log(text))


@pytest.mark.parametrize(
    ("fixture", "state", "trend", "action"),
    [
        ("gpu_ci_passed.out", JobState.COMPLETED, "2 passed", None),
        ("gpu_ci_failed.out", JobState.FAILED, "1 failed, 1 passed", "diagnose"),
        ("gpu_ci_passed.out", JobState.RUNNING, "2 passed", None),
    ],
)
def test_gpu_ci_reads_pytest_tally(
    fixture: str, state: JobState, trend: str, action: str | None
) -> None:
    """A GPU-CI job's note is pytest's summary, never the bare state word."""
    text = (FIXTURES / "pytest-9.2.0" / fixture).read_text()
    job = judge(_job("gpu-ci-nightly", state, text, exit_code=0 if action is None else 1)).report
    assert job.bucket == "other" and job.trend == trend
    assert (job.recommendation.action if job.recommendation else None) == action


@pytest.mark.parametrize(
    ("name", "state", "line", "trend"),
    [
        ("rl-upload-qwen7b", JobState.RUNNING,
         "upload: ckpt/model.safetensors to s3://team-rl/qwen7b/model.safetensors",
         "pushing → s3://team-rl/qwen7b/model.safetensors"),
        ("datagen-consolidate-swe", JobState.COMPLETED, "pushing 6,977 rows -> org/swe-traces",
         "pushed 6,977 rows → org/swe-traces"),
        ("push-model-hf", JobState.COMPLETED,
         "https://huggingface.co/org/qwen7b-grpo/commit/3f2a9c1d",
         "pushed → huggingface.co/org/qwen7b-grpo"),
        ("rl-upload-qwen7b", JobState.COMPLETED, "done.", "Completed"),  # near-miss: no target
    ],
)
def test_upload_reads_what_was_pushed(name: str, state: JobState, line: str, trend: str) -> None:
    """An upload's note names the pushed target (and its count), live or finished."""
    job = judge(_job(name, state, f"starting\n{line}\n")).report
    assert job.bucket == "other" and job.trend == trend


def test_failed_upload_keeps_its_diagnosis() -> None:
    """A real failure's diagnosis outranks the last push line."""
    text = "upload: a to s3://b/c\nTraceback (most recent call last):\nOSError: disk quota\n"
    job = judge(_job("rl-upload-x", JobState.FAILED, text, exit_code=1)).report
    assert job.trend.startswith("traceback") and job.verdict == "failed"


def test_catch_all_table_shows_the_tally() -> None:
    """The Catch-all table's Note column reads "2 passed" for the completed CI job."""
    from report.judge import build_report
    from report.settings import ReportSettings
    from tests.report.factories import cluster

    text = (FIXTURES / "pytest-9.2.0/gpu_ci_passed.out").read_text()
    job = _job("gpu-ci", JobState.COMPLETED, text)
    report, details = build_report([cluster("alpha", [job])], settings=ReportSettings(), now=NOW)
    rendered = render_text(report, details, width=100)
    row = next(line for line in rendered.splitlines() if "gpu-ci" in line)
    assert "2 passed" in row and "Completed" not in row


def test_a_pending_job_with_a_naive_expected_start_reads_it_as_utc() -> None:
    """A replayed or hand-written record may carry a zone-less time: read as UTC, never a
    TypeError that fails the whole sweep's judging (it compared naive with aware)."""
    from datetime import UTC, datetime

    from probes.models import JobState, SchedulerRecord
    from report.findings import pending_note

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    ahead = SchedulerRecord(cluster="a", job_id="1", name="x", user="u",
                            state=JobState.PENDING, reason="Resources",
                            start_time=datetime(2026, 12, 1, 14, 30))
    assert pending_note(ahead, now) == "Pending (Resources), expected start 12-01 14:30Z"
    behind = ahead.model_copy(update={"start_time": datetime(2026, 12, 1, 9, 0)})
    assert pending_note(behind, now) == "Pending (Resources)"
    aware = ahead.model_copy(update={"start_time": datetime(2026, 12, 1, 15, 30,
                                                            tzinfo=UTC).astimezone()})
    assert pending_note(aware, now) == "Pending (Resources), expected start 12-01 15:30Z"
