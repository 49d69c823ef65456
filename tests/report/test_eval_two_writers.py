"""More result.json files than the job's total while Harbor has not finished is no "all done".

Replayed under real sbatch jobs (3046, eval-dg-twowriters, an array of 2 whose tasks share one
Harbor job name, so both write ``jobs/<same>``; Harbor 0.26.0's format, its own models): with
one task done and the other mid-run, ``jobtables sweep`` read both tasks Trials 12/8, Trend
"all 8 trials done; finishing", and once the grace passed it would read ``zombie``,
``cancel_and_salvage``: a cancel for a run whose trials are still in flight, or hung (the
rulebook's stall, to diagnose, not a zombie to cancel). A Harbor job's ``n_total_trials`` counts
every trial it runs (each attempt included) and a retried attempt's dir is removed, so more
result.json files than the total are not one run's: only Harbor's own word that the job ended
(its job result.json's ``finished_at``) says every trial is done.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from report.models import JobReport
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

NOW = datetime.now(UTC)


def _row(jobs: Path, *, second_finished: bool) -> JobReport:
    job = jobs / "2026-12-05__18-30-00"
    MAKE.write(job, {"pass": 4, "fail": 4}, total=8, seed=1, minutes_ago=60, finished=True)
    second = {"pass": 4, "fail": 4} if second_finished else {"pass": 2, "fail": 2, "inflight": 4}
    MAKE.write(job, second, total=8, seed=2, minutes_ago=60, finished=second_finished)
    old = time.time() - 30 * 60  # nothing written for half an hour
    for path in [job, *job.rglob("*")]:
        os.utime(path, (old, old), follow_symlinks=False)
    start = NOW - timedelta(minutes=70)
    tree = trial_tree(collect_trials([str(jobs)]), started=start)
    assert tree is not None
    rec = record("eval-dg-twowriters", start_time=start, submit_time=start, elapsed_s=4200)
    facts = JobFacts(record=rec, log=log(mtime=NOW - timedelta(minutes=30)),
                     summary=parse_log("running\n"), trials=tree)
    return judge(facts, now=NOW).report


def test_more_results_than_the_total_while_harbor_runs_is_not_all_done(tmp_path: Path) -> None:
    row = _row(tmp_path / "jobs", second_finished=False)
    assert (row.metrics["trials"], row.metrics["trials_total"]) == (12, 8)
    assert "zombie" not in row.flags, row.trend
    assert "all 8 trials done" not in row.trend
    assert "12 result.json for 8 trials" in row.trend, row.trend
    assert row.recommendation is None or row.recommendation.action != "cancel_and_salvage"


def test_once_harbor_finished_the_same_tree_is_a_zombie(tmp_path: Path) -> None:
    """Near miss: both writers finished (Harbor's finished_at), silent past the grace."""
    row = _row(tmp_path / "jobs", second_finished=True)
    assert "zombie" in row.flags, row.trend
