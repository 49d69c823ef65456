"""The hung-chunk rule judges only chunks this job can have written (review of 4421bd8).

``stalest_chunk`` is the oldest unfinished chunk anywhere under the shared ``jobs/``. A dir
abandoned before this job started (a killed earlier run, finished_at never written) made a
healthy task whose own log was quiet (Python's stdout is block-buffered into a file) read
"HUNG", its age clamped to the job's start. Its results predate the job: not its chunk.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.models import JobFacts
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _quiet_task(jobs: Path, now: datetime) -> JobFacts:
    """A task started 4 h ago whose own log last grew 3 h ago."""
    job = _facts(jobs, "chunk started\n", "datagen-tb-synth", now=now)
    assert job.log is not None
    return job.model_copy(update={
        "record": job.record.model_copy(update={"start_time": now - timedelta(hours=4)}),
        "log": job.log.model_copy(update={"mtime": now - timedelta(hours=3)})})


def test_a_chunk_abandoned_before_the_job_started_is_not_its_hung_chunk(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-02__10-00-00", {"pass": 5, "fail": 10, "inflight": 8}, total=100,
               seed=60, minutes_ago=2000, mtime_ago_min=1900)
    MAKE.write(jobs / "2026-12-03__20-00-00", {"pass": 20, "fail": 30, "inflight": 8},
               total=100, seed=61)  # this task's own chunk, writing now
    now = datetime.now(UTC)
    report = judge(_quiet_task(jobs, now), now=now).report
    assert "stall" not in report.flags and report.verdict == "healthy", report.trend


def test_its_own_chunk_hung_is_still_found_and_the_ages_are_each_their_own(
        tmp_path: Path) -> None:
    """Near-miss: the chunk went quiet after the job started (3 h of 4): HUNG, naming it, with
    the chunk's age and the log's, each as measured."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "chunk-000", {"pass": 5, "fail": 10, "inflight": 8}, total=100,
               seed=62, minutes_ago=240, mtime_ago_min=200)
    MAKE.write(jobs / "chunk-001", {"pass": 20, "fail": 30, "inflight": 8}, total=100, seed=63)
    now = datetime.now(UTC)
    report = judge(_quiet_task(jobs, now), now=now).report
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert "chunk-000" in report.trend
    assert report.recommendation is not None
    why = report.recommendation.why
    assert "3h20m" in why and "3h00m" in why, why
