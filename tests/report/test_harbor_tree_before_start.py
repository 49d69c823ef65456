"""An eval whose only Harbor job dir was last written before the job's start second, while
its own log counts the trials done.

Replayed on the real SLURM (sbatch as jtuser: the script writes a Harbor job dir in Harbor's
format within its first second, prints Harbor's row, sleeps): 40 trials done of 40 read
``trials 0``, buffer-filling, "Starting; no result.json yet" instead of ZOMBIE; a finished
20-trial eval read "COMPLETED with 20 of 20 trials never run" (incomplete-run, diagnose)
instead of its cleanup. The own-run filter (a job dir last written before the start is an
earlier run's) left nothing: a tree written within the start's second, or laid out with older
times, is this run's when the log's ``<done>/<total>`` row counts its trials. A relaunch whose
own job dir is not written yet (``0/40 Running trials...``) still reads none of the old one.
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
from tests.report.test_harbor_shared_root import _age, _start


def _row(jobs: Path, text: str, state: JobState = JobState.RUNNING, started_min_ago: float = 3,
         settings: ReportSettings | None = None):
    now = datetime.now(UTC)
    rec = record("eval-qwen3-x-tbench", state=state, start_time=_start(started_min_ago),
                 submit_time=now - timedelta(minutes=started_min_ago + 1),
                 end_time=now if state is not JobState.RUNNING else None,
                 elapsed_s=int(started_min_ago * 60))
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now),
                                     "summary": parse_log(text, mtime=now)})
    return judge(facts, now=now, settings=settings).report


def test_a_tree_laid_out_before_the_start_is_the_runs_when_its_log_counts_it(
        tmp_path: Path) -> None:
    """40 of 40 done, the job still RUNNING: ZOMBIE, over the 40 result.json."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__21-00-00", {"pass": 20, "fail": 20}, total=40, seed=3)
    _age(jobs / "2026-12-04__21-00-00", 10)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    # no zombie grace (3 min after the start): which tree is the run's is the point here
    no_grace = ReportSettings(thresholds=Thresholds(zombie_grace_minutes=0))
    report = _row(jobs, f"harbor run\n{line}\n", settings=no_grace)
    assert report.metrics.get("trials") == 40.0, report.metrics
    assert report.metrics.get("pass_rate") == 0.5
    assert "zombie" in report.flags, (report.flags, report.trend)


def test_a_finished_eval_written_in_its_first_second_is_cleaned_up(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__21-00-00", {"pass": 10, "fail": 10}, total=20, seed=7,
                     finished=True)
    _age(jobs / "2026-12-04__21-00-00", 0, at=_start(1) + timedelta(seconds=0.4))
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    report = _row(jobs, f"harbor run\n{line}\n", state=JobState.COMPLETED, started_min_ago=1)
    assert report.metrics.get("trials") == 20.0, report.metrics
    assert "incomplete-run" not in report.flags, (report.flags, report.trend)
    assert "cleanup-pending" in report.flags, (report.flags, report.trend)


def test_a_relaunch_before_its_own_job_dir_reads_none_of_the_old_one(tmp_path: Path) -> None:
    """The old run's 40/40 beside a new launch whose row still reads ``0/40``: no zombie."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__09-00-00", {"pass": 20, "fail": 20}, total=40, seed=3,
               finished=True)
    _age(jobs / "2026-12-04__09-00-00", 120)
    line = MAKE.progress_line(0, 40, None)
    report = _row(jobs, f"harbor run\n{line}\n")
    assert not report.metrics.get("trials"), report.metrics
    assert "zombie" not in report.flags


def test_without_a_row_an_old_tree_is_not_counted(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__09-00-00", {"pass": 20, "fail": 20}, total=40, seed=3,
               finished=True)
    _age(jobs / "2026-12-04__09-00-00", 120)
    report = _row(jobs, "harbor run\n")
    assert not report.metrics.get("trials"), report.metrics
    assert "zombie" not in report.flags


def test_a_tree_copied_in_the_first_second_is_the_runs_without_a_row(tmp_path: Path) -> None:
    """An eval whose first command lays its Harbor tree out (``cp -r`` at the start: every
    file, config.json too, written within the start's second) and whose log prints no Harbor
    row: its job dir was created since the start, so it is this run's (24 trials, not
    "Starting; no result.json yet"). Replayed on the real SLURM as jtuser: ``cp -r
    harbor-0.26.0/jobs ./jobs; sleep`` read trials 0, buffer-filling."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-11-30__10-00-00", {"pass": 12, "fail": 12}, total=24, seed=5,
               finished=True)
    _age(jobs / "2026-11-30__10-00-00", 0, at=_start(2) + timedelta(seconds=0.4))
    report = _row(jobs, "eval running\n", started_min_ago=2)
    assert report.metrics.get("trials") == 24.0, report.metrics
    assert report.metrics.get("pass_rate") == 0.5, report.metrics
    assert "buffer-filling" not in report.flags, (report.flags, report.trend)


def test_a_finished_eval_its_log_vouches_for_keeps_its_cleanup_pending(tmp_path: Path) -> None:
    """Review of de586b9: the tree laid out before the start (older times) that the log counts
    (40/40) is the run's; COMPLETED, its cleanup names the tree and flags cleanup-pending. The
    eval cleanup took the own-run tree (empty: no job dir written since the start) whenever
    one was cut, meant for array tasks, and read a bare 'eval-agentic-cleanup' with no flag:
    the trial tree left on disk, the top inode-leak source, went unflagged."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__21-00-00", {"pass": 20, "fail": 20}, total=40, seed=3,
                     finished=True)
    _age(jobs / "2026-12-04__21-00-00", 10)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    report = _row(jobs, f"harbor run\n{line}\n", state=JobState.COMPLETED)
    assert report.metrics.get("trials") == 40.0, report.metrics
    assert "cleanup-pending" in report.flags, (report.flags, report.recommendation)
    assert report.recommendation is not None and str(jobs) in report.recommendation.why
