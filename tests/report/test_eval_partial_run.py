"""Eval: a COMPLETED Harbor eval with trials never run is a partial run, not a finished one.

Replayed on the real SLURM (sbatch, read through ``jobtables job ID --format json``):
``eval-partial-gpqa`` ended COMPLETED (its wrapper script exited 0) with 60 trial result.json
files of the Harbor job's ``n_total_trials`` 100 and the progress line ``60/100 Mean: 0.333``.
The row read verdict ``done``, Trend "Completed", and ``cleanup`` (``eval-agentic-cleanup``:
reap the trial tree): the pass-rate of 60 trials presented as the benchmark's score and its
evidence sent for deletion. As the contract's ``incomplete-run`` does for a trainer short of its
total, the run is ``incomplete-run``, verdict ``warning``, ``diagnose`` (resume or rerun the
missing trials before the cleanup), and the Trend says how many trials never ran.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from probes.models import JobState
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _report(tmp_path: Path, mix: dict[str, int], total: int):  # type: ignore[no-untyped-def]
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__14-30-00", mix, total=total, seed=8, finished=True)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    now = datetime.now(UTC)
    facts = _facts(jobs, f"{line}\n", "eval-partial-gpqa", state=JobState.COMPLETED, now=now)
    return judge(facts, now=now).report


def test_a_completed_eval_short_of_its_trials_is_incomplete(tmp_path: Path) -> None:
    report = _report(tmp_path, {"pass": 20, "fail": 30, "timeout": 10}, total=100)
    assert report.metrics.get("trials") == 60.0 and report.metrics.get("trials_total") == 100.0
    assert "incomplete-run" in report.flags, (report.flags, report.trend)
    assert report.verdict == "warning"
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose", report.recommendation
    assert "eval-agentic-cleanup" in report.recommendation.why
    assert "40 of 100 trials" in report.trend, report.trend


def test_a_completed_eval_with_every_trial_is_cleaned_up(tmp_path: Path) -> None:
    report = _report(tmp_path, {"pass": 20, "fail": 30, "timeout": 10}, total=60)
    assert "incomplete-run" not in report.flags
    assert report.verdict == "done"
    assert report.recommendation is not None and report.recommendation.action == "cleanup"


def test_a_run_of_several_job_dirs_is_left_to_the_chunk_rule(tmp_path: Path) -> None:
    """Several Harbor job dirs under the trial root (chunks, or an earlier attempt's dir beside
    this one's) are the chunk rule's to tally ("N of M chunks never finished"): a sum of their
    totals is no one run's total."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__12-00-00", {"pass": 10, "fail": 20}, total=100, seed=1)
    out = MAKE.write(jobs / "2026-12-04__14-30-00", {"pass": 40, "fail": 60}, total=100, seed=2,
                     finished=True)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    now = datetime.now(UTC)
    facts = _facts(jobs, f"{line}\n", "eval-partial-gpqa", state=JobState.COMPLETED, now=now)
    report = judge(facts, now=now).report
    assert "incomplete-run" not in report.flags, (report.flags, report.trend)
    assert "chunks never finished" in report.trend, report.trend
