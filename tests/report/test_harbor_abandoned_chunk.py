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

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from probes.models import JobFacts, JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _spanned(facts: JobFacts, jobs: Path) -> JobFacts:
    """The tree as a sweep reads it: with the job's start, so the job dirs it can have written
    are told from an earlier run's (``TrialTree.own_run``)."""
    tree = trial_tree(collect_trials([str(jobs)]), started=facts.record.start_time)
    return facts.model_copy(update={"trials": tree})


def _tree(jobs: Path) -> None:
    MAKE.write(jobs / "chunk-000", {"pass": 5, "fail": 10, "inflight": 8}, total=40, seed=70,
               minutes_ago=2000, mtime_ago_min=1900)  # killed long ago, never finished
    old = time.time() - 1900 * 60  # every file of it, its job result.json and config too
    for path in [jobs / "chunk-000", *(jobs / "chunk-000").rglob("*")]:
        os.utime(path, (old, old), follow_symlinks=False)
    for i in (1, 2, 3):
        MAKE.write(jobs / f"chunk-{i:03d}", {"pass": 12, "fail": 20, "timeout": 8}, total=40,
                   seed=70 + i, finished=True)


def test_an_abandoned_chunk_leaves_the_cleanup_named(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _tree(jobs)
    facts = _facts(jobs, "chunk 3 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    report = judge(_spanned(facts, jobs), now=datetime.now(UTC)).report
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


def test_a_pending_task_of_the_run_holds_back_a_finished_tree(tmp_path: Path) -> None:
    """Found replaying on the real SLURM: a datagen ``--array=0-5%2`` whose tasks each write
    one chunk into the shared ``{workdir}/jobs``; tasks 0 and 1 COMPLETED (both chunks
    finished), tasks 2-5 still PENDING. Each completed task read ``cleanup-pending`` and
    ``datagen-job-cleanup: trial tree still on disk at .../jobs``: reaping the tree the rest of
    the run is about to write, before its traces are consolidated. Every chunk on disk being
    finished says nothing about the tasks that have not started yet."""
    jobs = tmp_path / "jobs"
    for i in (0, 1):
        MAKE.write(jobs / f"chunk_{i}", {"pass": 6, "fail": 4, "timeout": 2}, total=12,
                   seed=80 + i, finished=True)
    facts = _facts(jobs, "chunk 0 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    done = facts.record.model_copy(update={"job_id": "900_0", "array_job_id": "900",
                                           "array_task_id": "0"})
    facts = facts.model_copy(update={"record": done})
    pending = done.model_copy(update={"job_id": "900_[2-5%2]", "state": JobState.PENDING,
                                      "array_task_id": "[2-5%2]", "start_time": None,
                                      "elapsed_s": 0})
    report = judge(facts, others=[pending], now=datetime.now(UTC)).report
    assert "cleanup-pending" not in report.flags, report.recommendation
    assert report.recommendation is not None and report.recommendation.action == "none"
    assert "datagen-job-cleanup once the whole run is done" in report.recommendation.why


def test_another_run_live_in_the_same_workdir_holds_nothing_back(tmp_path: Path) -> None:
    """Review of bf3a357: a finished datagen run (every chunk done, no task of it live) beside
    the same user's RL training and SFT, submitted from the same directory (a repo root:
    the usual sbatch habit) and running for days. Those write no chunk of this run: its
    cleanup is named now, not held back for as long as the user has anything running there."""
    jobs = tmp_path / "jobs"
    for i in (0, 1):
        MAKE.write(jobs / f"chunk_{i}", {"pass": 6, "fail": 4, "timeout": 2}, total=12,
                   seed=90 + i, finished=True)
    facts = _facts(jobs, "chunk 1 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    others = [facts.record.model_copy(update={"job_id": job_id, "name": name,
                                              "state": JobState.RUNNING, "end_time": None})
              for job_id, name in (("950", "rl-qwen-grpo"), ("951", "sft-llama-8b"))]
    report = judge(facts, others=others, now=datetime.now(UTC)).report
    assert report.recommendation is not None and report.recommendation.action == "cleanup", \
        report.recommendation
    assert "cleanup-pending" in report.flags
