"""An eval array's task started in a workdir whose ``jobs/`` holds an older eval reads no
trials of that eval. Array tasks keep the whole tree (an earlier wave's job dirs are the
run's, ``test_harbor_shared_root``), but a tree last written before the array was even
submitted is no wave of it: a task 3 minutes in, its own Harbor job dir not yet made, read
yesterday's finished eval as its own, 'ZOMBIE: all 12 trials done, still RUNNING', and
recommended cancel_and_salvage of a healthy eval (the non-array case was fixed in f8ec9dc).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import job_facts
from report.settings import ReportSettings, Thresholds
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE
from tests.report.test_harbor_shared_root import _LOG, _age, _start


def _task(jobs: Path, submitted_min_ago: float, settings: ReportSettings | None = None):
    now = datetime.now(UTC)
    rec = record("eval-qwen3-x-tbench", job_id="960_0", state=JobState.RUNNING,
                 start_time=_start(3), submit_time=now - timedelta(minutes=submitted_min_ago),
                 elapsed_s=180, array_job_id="960", array_task_id="0")
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now), "summary": parse_log(_LOG, mtime=now)})
    return judge(facts, now=now, settings=settings).report


def test_an_older_eval_in_the_jobs_dir_is_no_zombie_of_a_new_array(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-03__09-00-00", {"pass": 9, "fail": 3}, seed=1, finished=True,
               minutes_ago=200)
    _age(jobs / "2026-12-03__09-00-00", 180)
    report = _task(jobs, submitted_min_ago=4)
    assert "zombie" not in report.flags, report.trend
    assert report.recommendation is None or report.recommendation.action != "cancel_and_salvage"
    assert report.metrics.get("trials", 0.0) == 0.0, report.metrics


def test_an_array_submitted_before_the_tree_was_written_keeps_it(tmp_path: Path) -> None:
    """Near-miss: the same tree written after the array's submission (an earlier wave of its
    own, finished before this task started) is still the run's: all done, ZOMBIE."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__06-00-00", {"pass": 9, "fail": 3}, seed=1, finished=True,
               minutes_ago=200)
    _age(jobs / "2026-12-05__06-00-00", 180)
    # no zombie grace (3 min after the start): which tree is the run's is the point here
    report = _task(jobs, submitted_min_ago=240,
                   settings=ReportSettings(thresholds=Thresholds(zombie_grace_minutes=0)))
    assert "zombie" in report.flags, report.trend


def test_a_finished_array_task_cleans_up_its_own_dirs_not_the_shared_root(
        tmp_path: Path) -> None:
    """The task's cleanup named the whole ``jobs/`` (yesterday's eval in it too): it names the
    job dirs its own run can have written, as a single eval's does (c49d44b)."""
    jobs = tmp_path / "jobs"
    old = jobs / "2026-12-03__09-00-00"
    MAKE.write(old, {"pass": 9, "fail": 3}, seed=1, finished=True, minutes_ago=200)
    _age(old, 180)
    own = jobs / "2026-12-05__08-40-00"
    MAKE.write(own, {"pass": 5, "fail": 7}, seed=2, finished=True, minutes_ago=20)
    _age(own, 10)
    now = datetime.now(UTC)
    rec = record("eval-qwen3-x-tbench", job_id="970_1", state=JobState.COMPLETED,
                 start_time=_start(30), end_time=now - timedelta(minutes=1),
                 submit_time=now - timedelta(minutes=60), elapsed_s=1740,
                 array_job_id="970", array_task_id="1")
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now), "summary": parse_log(_LOG, mtime=now)})
    report = judge(facts, now=now).report
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    why = report.recommendation.why
    assert str(own) in why and str(old) not in why and f"at {jobs} " not in why, why
