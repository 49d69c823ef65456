"""A chunk that never finished, with nothing left to finish it, does not hold the run's
cleanup back for ever (review of 96c5ae5).

Harbor writes a job dir's ``finished_at`` only when it ends: a chunk killed at walltime (the
rulebook's "a TIMEOUT strands the traces"), by a crash or a SIGKILL never gets one. Every later
COMPLETED task of the run then read "1 of 4 chunks not finished", recommendation ``none``,
sweep after sweep: datagen-job-cleanup was never named and the tree (the top inode-leak
source) stayed. The cleanup waits only while another live job of the run (the same user and
workdir, or name) can still write it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from probes.models import JobState
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _tree(jobs: Path) -> None:
    MAKE.write(jobs / "chunk-000", {"pass": 5, "fail": 10, "inflight": 8}, total=40, seed=70,
               minutes_ago=2000, mtime_ago_min=1900)  # killed long ago, never finished
    for i in (1, 2, 3):
        MAKE.write(jobs / f"chunk-{i:03d}", {"pass": 12, "fail": 20, "timeout": 8}, total=40,
                   seed=70 + i, finished=True)


def test_an_abandoned_chunk_leaves_the_cleanup_named(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _tree(jobs)
    facts = _facts(jobs, "chunk 3 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    report = judge(facts, now=datetime.now(UTC)).report
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    assert report.recommendation.why.startswith("datagen-job-cleanup"), report.recommendation
    assert "cleanup-pending" in report.flags
    assert "1 of 4 chunks never finished" in report.trend, report.trend


def test_a_live_task_of_the_run_still_holds_it_back(tmp_path: Path) -> None:
    """Near-miss: another task of the array is running in the same workdir: it may still
    finish that chunk, so no cleanup yet."""
    jobs = tmp_path / "jobs"
    _tree(jobs)
    facts = _facts(jobs, "chunk 3 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    live = facts.record.model_copy(update={"job_id": "101", "state": JobState.RUNNING,
                                           "name": "datagen-tb-synth-chunk0"})
    report = judge(facts, others=[live], now=datetime.now(UTC)).report
    assert report.recommendation is not None and report.recommendation.action == "none"
    assert "cleanup-pending" not in report.flags
