"""An array task's Mean is the run's, over the trials its row counts, not its own chunk's line.

Replayed under real sbatch jobs as jtuser (5385, datagen-dg-hangarr, ``--array=0-1``: each task
runs Harbor into its own chunk of the shared ``jobs/``; Harbor 0.26.0's format, its own
models): both tasks' rows counted the whole tree (Trials 6, avg_turns 8.33, exc% 16.7, Chunks
0/2) but read Mean 0.75 and 1.0: each took its own log's progress row (``4/40 Mean: 0.750``,
``2/8 Mean: 1.000``), one chunk's Mean beside the run's counts. The row only switched to the
run's Mean when the line counted fewer trials than the tree held; a line whose total is not
the tree's is one chunk's whatever its count.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

NOW = datetime.now(UTC)


def _tree_mean(jobs: Path) -> float:
    rewards = []
    for path in jobs.glob("*/*/result.json"):
        verifier = json.loads(path.read_text()).get("verifier_result")
        rewards.append(verifier["rewards"]["reward"] if verifier else 0.0)
    return sum(rewards) / len(rewards)


def test_an_array_tasks_mean_is_the_runs(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "chunk-0", {"pass": 3, "fail": 1, "inflight": 2}, total=40, seed=31,
               minutes_ago=10)
    own = MAKE.write(jobs / "chunk-1", {"pass": 2, "inflight": 1}, total=8, seed=32,
                     minutes_ago=10)
    line = MAKE.progress_line(own["done"], own["total"], own["mean"])
    assert "2/8 Mean: 1.000" in line
    start = NOW - timedelta(minutes=15)
    tree = trial_tree(collect_trials([str(jobs)]), started=start)
    assert tree is not None
    rec = record("datagen-dg-hangarr", job_id="5385_1", array_job_id="5385",
                 array_task_id="1", start_time=start, submit_time=start, elapsed_s=900)
    facts = JobFacts(record=rec, log=log(mtime=NOW), summary=parse_log(line + "\n"), trials=tree)
    row = judge(facts, now=NOW).report
    assert row.metrics["trials"] == 6
    assert row.metrics["mean_reward"] == pytest.approx(_tree_mean(jobs)), row.metrics


def test_a_single_chunks_line_is_harbors_mean(tmp_path: Path) -> None:
    """Near miss: one job dir, its line's total the tree's: Harbor's own Mean stands."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "chunk-0", {"pass": 3, "fail": 1, "inflight": 2}, total=40,
                     seed=33, minutes_ago=10)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    start = NOW - timedelta(minutes=15)
    tree = trial_tree(collect_trials([str(jobs)]), started=start)
    rec = record("datagen-dg-one", start_time=start, submit_time=start, elapsed_s=900)
    facts = JobFacts(record=rec, log=log(mtime=NOW), summary=parse_log(line + "\n"), trials=tree)
    row = judge(facts, now=NOW).report
    assert row.metrics["mean_reward"] == pytest.approx(out["mean"])
