"""Evals launched one after another from one directory share Harbor's default ``jobs/``
(``jobs_dir`` = ``jobs``, ``job_name`` = the launch time), so the trial root a job reads holds
the Harbor job dirs of earlier runs beside its own. Found replaying two evals on the real
SLURM (the second ``afterany`` the first, the same workdir): the running eval's row read
``15/52`` (the finished eval's 12/12 added to its own 3/40), and before its own job dir
existed ``12/12`` and ZOMBIE, recommending cancel_and_salvage of a healthy job.

A Harbor job dir whose last write (its job result.json, rewritten at every trial start and
end, and each trial's result.json) is before this job started cannot be this job's.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import job_facts
from probes.slurm.early import EarlyFolds, folder
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

_LOG = ("2026-12-04 00:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _start(minutes_ago: float) -> datetime:
    """A start time as SLURM gives it: whole seconds."""
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).replace(microsecond=0)


def _age(job_dir: Path, minutes: float, at: datetime | None = None) -> None:
    """Every file of an earlier run's job dir last written ``minutes`` ago (or ``at``)."""
    stamp = (at or datetime.now(UTC) - timedelta(minutes=minutes)).timestamp()
    for path in [job_dir, *job_dir.rglob("*")]:
        os.utime(path, (stamp, stamp))


def _row(jobs: Path, started_min_ago: float, name: str = "eval-qwen3-x-tbench",
         state: JobState = JobState.RUNNING):
    now = datetime.now(UTC)
    rec = record(name, state=state, start_time=_start(started_min_ago),
                 submit_time=now - timedelta(minutes=started_min_ago + 1),
                 elapsed_s=int(started_min_ago * 60))
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now),
                                     "summary": parse_log(_LOG, mtime=now)})
    return judge(facts, now=now).report


@pytest.mark.parametrize("chained", [False, True])
def test_an_earlier_eval_in_the_same_jobs_dir_is_not_counted(tmp_path: Path,
                                                             chained: bool) -> None:
    """Yesterday's eval, or the one this job ran ``afterany`` (its last write within the
    second SLURM started this job in: the start is whole seconds)."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-03__09-00-00", {"pass": 9, "fail": 3}, seed=1, finished=True,
               minutes_ago=200)
    _age(jobs / "2026-12-03__09-00-00", 90,
         at=_start(25) + timedelta(seconds=0.6) if chained else None)
    # Its config.json was written when that run started (Harbor writes it as a run starts or
    # resumes), not in the second it ended.
    _age(jobs / "2026-12-03__09-00-00" / "config.json", 90)
    MAKE.write(jobs / "2026-12-04__10-00-00", {"pass": 1, "fail": 2, "inflight": 8}, total=40,
               seed=2, minutes_ago=20)
    report = _row(jobs, started_min_ago=25)
    assert report.metrics.get("trials") == 3.0, report.metrics
    assert report.metrics.get("trials_total") == 40.0, report.metrics
    assert "zombie" not in report.flags


def test_before_its_own_job_dir_exists_an_earlier_eval_is_no_zombie(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-03__09-00-00", {"pass": 9, "fail": 3}, seed=1, finished=True,
               minutes_ago=200)
    _age(jobs / "2026-12-03__09-00-00", 90)
    report = _row(jobs, started_min_ago=1)
    assert "zombie" not in report.flags, report.trend
    assert report.recommendation is None or report.recommendation.action != "cancel_and_salvage"
    assert not report.metrics.get("trials"), report.metrics


def test_its_own_resumed_job_dir_and_its_chunks_are_kept(tmp_path: Path) -> None:
    """A job dir written before the job started but written again since (Harbor's resume
    reuses it) is the job's; so are several chunks it writes."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "chunk-000", {"pass": 5, "fail": 5}, seed=3, finished=True,
               minutes_ago=30)
    MAKE.write(jobs / "chunk-001", {"pass": 2, "fail": 2, "inflight": 4}, total=12, seed=4,
               minutes_ago=10)
    _age(jobs / "chunk-001", 300)
    os.utime(jobs / "chunk-001" / "result.json")  # rewritten just now: resumed
    report = _row(jobs, started_min_ago=40)
    assert report.metrics.get("trials") == 14.0, report.metrics
    assert report.metrics.get("trials_total") == 22.0, report.metrics


def test_a_job_folded_before_its_record_reads_its_own_job_dirs(tmp_path: Path) -> None:
    """A running job's line that comes before squeue's document is folded against a stand-in
    holding only its id (``probes.slurm.early``), which has no start time; the sweep's record
    put in its place must give the fold against that record (seen live: the sweep read the
    earlier eval's trials while ``jobtables job`` did not)."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-03__09-00-00", {"pass": 9, "fail": 3}, seed=1, finished=True,
               minutes_ago=200)
    _age(jobs / "2026-12-03__09-00-00", 90)
    MAKE.write(jobs / "2026-12-04__10-00-00", {"pass": 1, "fail": 2, "inflight": 8}, total=40,
               seed=2, minutes_ago=20)
    entry = {"trials": collect_trials([str(jobs)])}
    rec = record("eval-qwen3-x-tbench", state=JobState.RUNNING, start_time=_start(25))
    fold = folder(None, aliases={}, benign_patterns=())
    early = EarlyFolds(fold, cluster=rec.cluster, now=datetime.now(UTC))
    early.before_head(rec.job_id, entry)
    taken = early.take(rec, entry)
    assert taken is not None
    assert taken[0] == fold(rec, entry)[0]
    own = taken[0].trials.own_run if taken[0].trials is not None else None
    assert own is not None and own.counts is not None
    assert own.counts.trials == 3


def test_a_later_eval_in_the_same_jobs_dir_is_not_the_finished_ones(tmp_path: Path) -> None:
    """The eval that finished is judged on its own job dir: the next eval's, launched after
    it ended (Harbor writes a run's config.json as it starts), is not one of its chunks (seen
    live: 'Completed; 1 of 2 chunks not finished', cleanup held back)."""
    jobs = tmp_path / "jobs"
    own = jobs / "2026-12-04__09-00-00"
    MAKE.write(own, {"pass": 9, "fail": 3}, seed=1, finished=True, minutes_ago=60)
    _age(own, 30)
    MAKE.write(jobs / "2026-12-04__09-45-00", {"pass": 1, "fail": 2, "inflight": 8}, total=40,
               seed=2, minutes_ago=10)
    now = datetime.now(UTC)
    rec = record("eval-llama-x-tbench", state=JobState.COMPLETED, start_time=_start(60),
                 end_time=(now - timedelta(minutes=29)).replace(microsecond=0),
                 elapsed_s=1860, exit_code=0)
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now), "summary": parse_log(_LOG, mtime=now)})
    report = judge(facts, now=now).report
    assert report.metrics.get("trials") == 12.0, report.metrics
    assert report.metrics.get("trials_total") == 12.0, report.metrics
    assert report.recommendation is not None
    assert report.recommendation.action == "cleanup", report.recommendation
    assert "eval-agentic-cleanup" in report.recommendation.why


@pytest.mark.parametrize("name", ["datagen-swe-v2-chunk-2", "eval-qwen3-x-tbench"])
def test_a_run_of_chunks_or_an_array_task_keeps_the_whole_tree(tmp_path: Path,
                                                               name: str) -> None:
    """Chunks of one datagen run, or an array's tasks, are one run written at other times:
    the chunks finished before this one started are still the run's (Chunks 2/3 done)."""
    jobs = tmp_path / "jobs"
    for n in (0, 1):
        MAKE.write(jobs / f"chunk-00{n}", {"pass": 5, "fail": 5}, seed=n, finished=True,
                   minutes_ago=120)
        _age(jobs / f"chunk-00{n}", 60)
    MAKE.write(jobs / "chunk-002", {"pass": 2, "fail": 2, "inflight": 6}, total=10, seed=5,
               minutes_ago=20)
    now = datetime.now(UTC)
    array = {} if name.startswith("datagen") else {"array_job_id": "900", "array_task_id": "2"}
    rec = record(name, state=JobState.RUNNING, start_time=_start(25), **array)
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now), "summary": parse_log(_LOG, mtime=now)})
    report = judge(facts, now=now).report
    assert report.metrics.get("trials") == 24.0, report.metrics
    if name.startswith("datagen"):
        assert report.metrics.get("chunks_done") == 2.0
        assert report.metrics.get("chunks_total") == 3.0
