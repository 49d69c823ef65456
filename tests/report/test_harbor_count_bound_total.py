"""A trial count cut short by its time bound is a floor; Harbor's own count is not.

Found replaying on the real SLURM: an eval of 40 000 trials in one Harbor job dir, every trial
done and the job still RUNNING, read through ``jobtables sweep`` and ``jobtables job``. The
collector's count stopped at its time bound (``≥21562 trials counted in 4s (time bound)``) and
the Trials cell read ``21562/40000``: no zombie, though Harbor's own job result.json (rewritten
at every trial's end) said ``n_completed_trials: 40000``. Harbor's count stands for the run's
result.json count when ours was cut short; a count that finished is ours.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.models import JobFacts, JobState, TrialTree
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record, summary
from tests.report.test_harbor_dryrun_datagen import MAKE


def _tree(jobs: Path, *, bounded: bool, budget: float = 8.0) -> TrialTree:
    ticks = iter(range(100_000))  # a fake clock: one second a look
    bound = {"budget_s": budget, "clock": lambda: float(next(ticks))} if bounded else {}
    tree = trial_tree(collect_trials([str(jobs)], **bound))
    assert tree is not None
    return tree


def _facts(tree: TrialTree, name: str) -> JobFacts:
    now = datetime.now(UTC)
    rec = record(name, state=JobState.RUNNING, start_time=now - timedelta(minutes=30),
                 elapsed_s=1800)
    return JobFacts(record=rec, log=log(mtime=now), summary=summary(last_timestamp=now),
                    trials=tree)


def test_a_cut_short_count_of_a_finished_eval_reads_harbors_count(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__06-00-00", {"pass": 10, "fail": 14}, total=24, seed=3)
    tree = _tree(jobs, bounded=True)
    assert tree.counts is not None and not tree.counts.complete
    report = judge(_facts(tree, "eval-qwen3-x-tbench"), now=datetime.now(UTC)).report
    assert report.metrics["trials"] == 24.0, report.metrics
    assert "zombie" in report.flags, report.trend
    assert "time bound" in report.trend or "ZOMBIE" in report.trend


def test_a_cut_short_count_of_a_datagen_run_reads_harbors_count(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    for i in (0, 1):
        MAKE.write(jobs / f"chunk_{i}", {"pass": 6, "fail": 6, "inflight": 4}, total=16,
                   seed=20 + i)
    tree = _tree(jobs, bounded=True, budget=24.0)  # cut short inside the second chunk
    assert tree.counts is not None and not tree.counts.complete
    report = judge(_facts(tree, "datagen-tb-synth"), now=datetime.now(UTC)).report
    assert report.metrics["trials"] == 24.0, report.metrics
    assert "time bound" in report.trend


def test_a_finished_count_is_ours(tmp_path: Path) -> None:
    """Near-miss: the count finished; a job result.json that says otherwise (stale, or another
    attempt's) does not overrule the result.json files counted."""
    job = tmp_path / "jobs" / "2026-12-05__06-00-00"
    MAKE.write(job, {"pass": 4, "fail": 4, "inflight": 4}, total=24, seed=4)
    body = json.loads((job / "result.json").read_text())
    body["stats"]["n_completed_trials"] = 24
    (job / "result.json").write_text(json.dumps(body))
    report = judge(_facts(_tree(tmp_path / "jobs", bounded=False), "eval-qwen3-x-tbench"),
                   now=datetime.now(UTC)).report
    assert report.metrics["trials"] == 8.0, report.metrics
    assert "zombie" not in report.flags
