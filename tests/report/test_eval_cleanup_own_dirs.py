"""A finished eval's cleanup names its own Harbor job dir, never the jobs/ dir it shares.

Evals launched one after another from one directory share Harbor's default ``jobs/`` (one job
dir per launch). The judge reads an eval's own run there (``TrialTree.own_run``), but its
``cleanup`` named the whole root: 'eval-agentic-cleanup: trial tree still on disk at .../jobs'
for an eval whose own dir is one of two, so following it reaps the other eval's trials (the
rulebook's cleanup removes "the artifact's on-disk trial tree", this run's).
"""

from __future__ import annotations

from pathlib import Path

from probes.models import JobState
from tests.report.test_harbor_dryrun_datagen import MAKE
from tests.report.test_harbor_shared_root import _age, _row


def test_a_completed_eval_in_a_shared_jobs_dir_names_its_own_dir(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    other = jobs / "2026-12-03__09-00-00"
    MAKE.write(other, {"pass": 9, "fail": 3}, seed=1, finished=True, minutes_ago=200)
    _age(other, 180)
    own = jobs / "2026-12-04__10-00-00"
    MAKE.write(own, {"pass": 5, "fail": 7}, seed=2, finished=True, minutes_ago=20)
    report = _row(jobs, started_min_ago=25, state=JobState.COMPLETED)
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    why = report.recommendation.why
    assert str(own) in why, why
    assert f"at {jobs} " not in why and str(other) not in why


def test_an_eval_alone_in_its_jobs_dir_names_the_root(tmp_path: Path) -> None:
    """Near-miss: the root holds this eval's run alone, so the root is its tree."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__10-00-00", {"pass": 5, "fail": 7}, seed=2, finished=True,
               minutes_ago=20)
    report = _row(jobs, started_min_ago=25, state=JobState.COMPLETED)
    assert report.recommendation is not None
    assert f"trial tree still on disk at {jobs} " in report.recommendation.why
