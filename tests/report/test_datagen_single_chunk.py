"""A datagen run of one Harbor job dir is a run of one chunk: Chunks reads 0/1, then 1/1.

The rulebook's Datagen table gives every run a Chunks cell (done/total); the chunk count came
only from a root holding several job dirs, so the commonest run, one ``harbor run`` writing one
job dir, read Chunks ``—`` however far along it was, and a finished one read as unknown rather
than done. A Harbor job dir is a chunk, finished when Harbor writes its job result.json's
``finished_at``; SkyRL's flat trials dir (no job dir, no job result) has no chunks to count.
Chunks submitted as separate jobs, each with its own job dir, count as one run's chunks in the
group row (not the worst member's 0/1).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from probes.models import JobState
from report.grouping import group_report
from report.render import render_text
from tests.report.factories import judge, report_of
from tests.report.test_grouping_chunks import chunk
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _row(jobs: Path, state: JobState = JobState.RUNNING) -> dict[str, object]:
    report = judge(_facts(jobs, "engine up\n", "datagen-swe-synth", state=state),
                   now=datetime.now(UTC)).report
    assert report.bucket == "datagen"
    return {"chunks": (report.metrics.get("chunks_done"), report.metrics.get("chunks_total")),
            "trend": report.trend, "trials": report.metrics.get("trials")}


def test_a_running_single_job_dir_is_chunk_0_of_1(tmp_path: Path) -> None:
    MAKE.write(tmp_path / "jobs" / "2026-12-04__22-00-00", {"pass": 20, "inflight": 6},
               total=200, seed=3)
    row = _row(tmp_path / "jobs")
    assert row["chunks"] == (0.0, 1.0)
    assert row["trials"] == 20.0
    assert "chunk" not in str(row["trend"])  # "1 chunk to go" says nothing a single dir adds


def test_a_finished_single_job_dir_is_chunk_1_of_1(tmp_path: Path) -> None:
    MAKE.write(tmp_path / "jobs" / "2026-12-04__22-00-00", {"pass": 20}, total=20, seed=3,
               finished=True)
    assert _row(tmp_path / "jobs", JobState.COMPLETED)["chunks"] == (1.0, 1.0)


def test_the_job_dir_given_as_the_root_is_one_chunk(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "2026-12-04__22-00-00"
    MAKE.write(job, {"pass": 5, "inflight": 2}, total=50, seed=4)
    assert _row(job)["chunks"] == (0.0, 1.0)


def test_a_flat_trials_dir_has_no_chunks(tmp_path: Path) -> None:
    job = tmp_path / "made"
    MAKE.write(job, {"pass": 4, "fail": 2}, total=6, seed=6)
    flat = tmp_path / "trials"
    flat.mkdir()
    for trial in sorted(p for p in job.iterdir() if p.is_dir()):
        trial.rename(flat / trial.name)
    row = _row(flat)
    assert row["chunks"] == (None, None) and row["trials"] == 6.0


def test_separate_chunk_jobs_of_one_dir_each_count_in_the_group_row() -> None:
    one = {"chunks_done": 0, "chunks_total": 1, "trials": 40}
    done = {"chunks_done": 1, "chunks_total": 1, "trials": 50}
    jobs = [chunk(0, state=JobState.COMPLETED, verdict="done", metrics=done),
            chunk(1, state=JobState.COMPLETED, verdict="done", metrics=done),
            chunk(2, metrics=one), chunk(3, metrics=one), chunk(4, metrics=one)]
    grouped, details = group_report(report_of(*jobs), {})
    [row] = grouped.jobs
    assert (row.metrics["chunks_done"], row.metrics["chunks_total"]) == (2.0, 5.0)
    assert "2/5 done" in render_text(grouped, details, width=100)


def test_a_running_job_whose_chunks_are_all_done_is_not_generating(tmp_path: Path) -> None:
    """Harbor wrote its job result.json's ``finished_at`` but the job still runs (its terminal
    upload, or a hang after it): replayed by real sbatch jobs (121, 122), the row read
    ``1/1 done`` beside 'Generating', which it no longer is."""
    MAKE.write(tmp_path / "jobs" / "2026-12-04__22-00-00", {"pass": 20}, total=20, seed=3,
               finished=True)
    row = _row(tmp_path / "jobs")
    assert row["chunks"] == (1.0, 1.0)
    assert "Generating" not in str(row["trend"])
    assert "done" in str(row["trend"]) and "still running" in str(row["trend"])
