"""A trial count cut short by its time bound is a floor; Harbor's own count is not.

Found replaying on the real SLURM: an eval of 40 000 trials in one Harbor job dir, every trial
done and the job still RUNNING, read through ``jobtables sweep`` and ``jobtables job``. The
collector's count stopped at its time bound (``≥21562 trials counted in 4s (time bound)``) and
the Trials cell read ``21562/40000``: no zombie, though Harbor's own job result.json (rewritten
at every trial's end) said ``n_completed_trials: 40000``. Harbor's count stands for the run's
result.json count when ours was cut short; a count that finished is ours. A count cut short
also called no stall at all (its newest result.json unknown), so an eval too large to count
within the bound could hang unflagged; Harbor's job result.json, rewritten as each trial starts
and ends, times the silence then.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.models import JobFacts, JobState, TrialTree
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from report.settings import ReportSettings, Thresholds
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
    # no zombie grace: which count is read is the point here (tests/report/test_zombie_grace.py)
    no_grace = ReportSettings(thresholds=Thresholds(zombie_grace_minutes=0))
    report = judge(_facts(tree, "eval-qwen3-x-tbench"), now=datetime.now(UTC),
                   settings=no_grace).report
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


def _age(job: Path, minutes: float, *, job_result: float) -> None:
    """Every trial result.json written ``minutes`` ago; the job result.json ``job_result``."""
    now = datetime.now(UTC)
    for path in job.glob("*/result.json"):
        stamp = (now - timedelta(minutes=minutes)).timestamp()
        os.utime(path, (stamp, stamp))
    stamp = (now - timedelta(minutes=job_result)).timestamp()
    os.utime(job / "result.json", (stamp, stamp))


@pytest.mark.parametrize(("job_result", "stalled"), [(90, True), (5, False)])
def test_a_cut_short_count_still_sees_a_stall(tmp_path: Path, job_result: float,
                                              stalled: bool) -> None:
    """A count cut short may have missed the newest result.json, so it called no stall at all:
    an eval too large to count within the bound could hang for ever unflagged. Harbor rewrites
    its job result.json as every trial starts and ends: when that is older than the stall
    window too, no trial started or ended since, whatever the count missed."""
    job = tmp_path / "jobs" / "2026-12-05__04-00-00"
    MAKE.write(job, {"pass": 6, "fail": 10, "inflight": 8}, total=60, seed=5,
               minutes_ago=110)
    _age(job, 90, job_result=job_result)
    now = datetime.now(UTC)
    rec = record("eval-qwen3-x-tbench", state=JobState.RUNNING,
                  start_time=now - timedelta(minutes=120), elapsed_s=7200)
    facts = JobFacts(record=rec, log=log(mtime=now), summary=summary(last_timestamp=now),
                     trials=_tree(tmp_path / "jobs", bounded=True))
    report = judge(facts, now=now).report
    assert ("stall" in report.flags) is stalled, report.trend
    if stalled:
        assert "STALL" in report.trend and "1h30m" in report.trend, report.trend


@pytest.mark.parametrize(("job_result", "hung"), [(150, True), (5, False)])
def test_a_cut_short_count_of_a_datagen_run_still_sees_a_hung_chunk(
        tmp_path: Path, job_result: float, hung: bool) -> None:
    job = tmp_path / "jobs" / "chunk_000"
    MAKE.write(job, {"pass": 6, "fail": 10, "inflight": 8}, total=60, seed=6,
               minutes_ago=170)
    _age(job, 150, job_result=job_result)
    now = datetime.now(UTC)
    rec = record("datagen-tb-synth", state=JobState.RUNNING,
                 start_time=now - timedelta(minutes=180), elapsed_s=10800)
    quiet = now - timedelta(minutes=150)
    facts = JobFacts(record=rec, log=log(mtime=quiet), summary=summary(last_timestamp=quiet),
                     trials=_tree(tmp_path / "jobs", bounded=True))
    report = judge(facts, now=now).report
    assert ("stall" in report.flags) is hung, report.trend
