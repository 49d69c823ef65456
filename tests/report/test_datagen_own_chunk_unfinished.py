"""A COMPLETED datagen run whose own chunk never finished is an incomplete run, not a cleanup.

Replayed under a real sbatch job as jtuser (306, datagen-dg-crashchunk): a driver ran Harbor
once per chunk (0.26.0's on-disk format, its own models, a trial every 2 s); chunk-01's Harbor
died after 3 of its 8 trials (a traceback, exit 1, its job result.json never given a
``finished_at``), the driver went on to chunk-02 and exited 0. ``jobtables sweep`` read it
COMPLETED, ``cleanup-pending``, ``datagen-job-cleanup``: consolidating a dataset missing 5
trials and reaping the evidence. The rulebook routes completion to the cleanup routine; the
contract's ``incomplete-run`` is a COMPLETED run whose completion check shows fewer steps than
its total (``diagnose``, not cleanup), and a datagen run's completion check is its Chunks
(done/total). A chunk an earlier run abandoned (last written before this job started) is not
this run's to finish: that run's cleanup is still named (``test_harbor_abandoned_chunk``).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

NOW = datetime.now(UTC)
START = NOW - timedelta(minutes=30)


def _facts(jobs: Path) -> JobFacts:
    end = datetime.now(UTC)  # the job ended once its trees were written
    tree = trial_tree(collect_trials([str(jobs)]), started=START, ended=end)
    assert tree is not None
    rec = record("datagen-dg-crashchunk", state=JobState.COMPLETED, start_time=START,
                 end_time=end, submit_time=START - timedelta(minutes=1), elapsed_s=1740)
    return JobFacts(record=rec, log=log(mtime=end), summary=parse_log("all chunks done\n"),
                    trials=tree)


def _chunk(jobs: Path, name: str, *, finished: bool, seed: int) -> None:
    mix = {"pass": 4, "fail": 4} if finished else {"pass": 2, "fail": 1, "inflight": 2}
    MAKE.write(jobs / name, mix, total=8, seed=seed, minutes_ago=20, finished=finished)


def test_its_own_unfinished_chunk_makes_a_completed_run_incomplete(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _chunk(jobs, "chunk-00", finished=True, seed=1)
    _chunk(jobs, "chunk-01", finished=False, seed=2)  # Harbor died: no finished_at
    _chunk(jobs, "chunk-02", finished=True, seed=3)
    row = judge(_facts(jobs), now=datetime.now(UTC)).report
    assert row.metrics["chunks_done"] == 2 and row.metrics["chunks_total"] == 3
    assert "incomplete-run" in row.flags and "cleanup-pending" not in row.flags, row.flags
    assert row.verdict == "warning"
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert "datagen-job-cleanup" in row.recommendation.why
    assert "1 of 3 chunks" in row.trend, row.trend


def test_an_earlier_runs_abandoned_chunk_leaves_the_cleanup_named(tmp_path: Path) -> None:
    """Near miss: the unfinished chunk was last written hours before this job started."""
    jobs = tmp_path / "jobs"
    _chunk(jobs, "chunk-00", finished=False, seed=4)
    old = time.time() - 6 * 3600
    for path in [jobs / "chunk-00", *(jobs / "chunk-00").rglob("*")]:
        os.utime(path, (old, old), follow_symlinks=False)
    _chunk(jobs, "chunk-01", finished=True, seed=5)
    _chunk(jobs, "chunk-02", finished=True, seed=6)
    row = judge(_facts(jobs), now=datetime.now(UTC)).report
    assert "incomplete-run" not in row.flags, row.flags
    assert row.recommendation is not None and row.recommendation.action == "cleanup"
    assert "1 of 3 chunks never finished" in row.trend, row.trend
