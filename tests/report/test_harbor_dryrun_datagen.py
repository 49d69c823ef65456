"""Datagen rows over Harbor trees in Harbor's real on-disk format, found by an acceptance
dry-run (sbatch jobs on the real SLURM 22.05 cluster writing the trees and log lines, read only
through ``jobtables sweep --format json``).

The trees are written by ``tests/fixtures/harbor-dryrun/make_tree.py`` (Harbor's layout and
fields, from Harbor's own job.py / trial.py / metrics/mean.py), read by the real collector and
reducer on disk, the log by the real parser, and judged by the real judge.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record

_MAKE = Path(__file__).resolve().parents[1] / "fixtures" / "harbor-dryrun" / "make_tree.py"


def _make_tree() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harbor_dryrun_make_tree", _MAKE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _make_tree()


def _facts(jobs: Path, log_text: str, name: str, state: JobState = JobState.RUNNING,
           now: datetime | None = None) -> JobFacts:
    now = now or datetime.now(UTC)
    tree = trial_tree(collect_trials([str(jobs)]))
    assert tree is not None
    rec = record(name, state=state, start_time=now - timedelta(minutes=30),
                 submit_time=now - timedelta(minutes=31), elapsed_s=1800)
    return JobFacts(record=rec, log=log(mtime=now), summary=parse_log(log_text, mtime=now),
                    trials=tree)


def test_datagen_without_a_verifier_has_no_mean(tmp_path: Path) -> None:
    """Harbor with ``verifier.disable`` writes every ``verifier_result`` null, and its Mean
    metric counts a None reward as 0, so its progress line reads ``38/400 Mean: 0.000``.
    The row showed Mean 0.00 (dry-run: datagen-dry-noverif); the rulebook says mark — when
    there is no verifier."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-03__23-10-00", {"fail": 30, "timeout": 8, "inflight": 6},
                     total=400, turns=7, seed=7, verifier_disabled=True)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    assert "38/400 Mean: 0.000" in line  # what Harbor prints
    now = datetime.now(UTC)
    report = judge(_facts(jobs, f"engine up\n{line}\n", "datagen-tb-synth"), now=now).report
    assert report.bucket == "datagen"
    assert report.metrics.get("trials") == 38.0
    assert report.metrics.get("avg_turns") == 7.0
    assert "mean_reward" not in report.metrics, report.metrics


def test_datagen_with_a_verifier_keeps_harbors_mean(tmp_path: Path) -> None:
    """The same run verified: the Mean is Harbor's own line, 0.000 included."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-03__23-10-00", {"fail": 30, "timeout": 8, "inflight": 6},
                     total=400, turns=7, seed=7)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    report = judge(_facts(jobs, f"{line}\n", "datagen-tb-synth"), now=datetime.now(UTC)).report
    assert report.metrics.get("mean_reward") == 0.0


def _chunks(jobs: Path, finished: int, total: int = 4) -> None:
    for i in range(total):
        done = i < finished
        MAKE.write(jobs / f"chunk-{i:03d}",
                   {"pass": 12, "fail": 20, "timeout": 8} if done
                   else {"pass": 5, "fail": 10, "timeout": 5, "inflight": 8},
                   total=40, turns=5, seed=30 + i, finished=done)


def test_a_finished_chunk_of_a_running_run_is_not_cleaned_up(tmp_path: Path) -> None:
    """A SLURM array (sbatch --array=0-3), one Harbor job dir per task under the shared
    {workdir}/jobs: tasks 0 and 1 COMPLETED while 2 and 3 still ran. Each completed task read
    'datagen-job-cleanup: trial tree still on disk at .../jobs', cleanup-pending (dry-run:
    datagen-dry-array), i.e. remove the tree the running chunks are writing. The run is done
    only when every chunk is: until then no cleanup, and the row says why."""
    jobs = tmp_path / "jobs"
    _chunks(jobs, finished=2)
    facts = _facts(jobs, "chunk 0 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    running = [facts.record.model_copy(update={"job_id": f"100_{t}", "state": JobState.RUNNING})
               for t in (2, 3)]  # the array's tasks still writing the shared tree
    report = judge(facts, others=running, now=datetime.now(UTC)).report
    assert report.metrics.get("chunks_done") == 2.0 and report.metrics.get("chunks_total") == 4.0
    assert "cleanup-pending" not in report.flags, report.flags
    rec = report.recommendation
    assert rec is None or rec.action != "cleanup", rec
    assert "2 of 4 chunks" in report.trend, report.trend


def test_a_run_whose_chunks_all_finished_is_cleaned_up(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _chunks(jobs, finished=4)
    facts = _facts(jobs, "chunk 3 done\n", "datagen-tb-synth", state=JobState.COMPLETED)
    report = judge(facts, now=datetime.now(UTC)).report
    assert "cleanup-pending" in report.flags
    assert report.recommendation is not None and report.recommendation.action == "cleanup"
    assert report.recommendation.why.startswith("datagen-job-cleanup")


def test_a_multi_chunk_runs_mean_is_the_whole_runs(tmp_path: Path) -> None:
    """One datagen job running Harbor once per chunk (4 job dirs under jobs/, each printing
    its own '<done>/<total> Mean: X' line). The row counted Trials over every chunk (108) but
    took Mean from the last line, the newest chunk's 8 trials (0.25 where the run's is 0.31;
    dry-run: datagen-dry-chunks). Trials and Mean speak for the same run."""
    jobs = tmp_path / "jobs"
    mixes = [({"pass": 14, "fail": 17, "timeout": 9}, True),
             ({"pass": 12, "fail": 19, "timeout": 9}, True),
             ({"pass": 6, "fail": 10, "timeout": 4, "inflight": 8}, False),
             ({"pass": 2, "fail": 4, "timeout": 2, "inflight": 12}, False)]
    lines = []
    for i, (mix, done) in enumerate(mixes):
        out = MAKE.write(jobs / f"chunk-{i:03d}", mix, total=40, turns=5, seed=i + 1,
                         finished=done)
        lines.append(MAKE.progress_line(out["done"], out["total"], out["mean"]))
    assert lines[-1].startswith("⠋  8/40 Mean: 0.250")
    report = judge(_facts(jobs, "\n".join(lines) + "\n", "datagen-tb-synth"),
                   now=datetime.now(UTC)).report
    assert report.metrics.get("trials") == 108.0
    assert report.metrics.get("chunks_done") == 2.0
    mean = report.metrics.get("mean_reward")
    assert isinstance(mean, float) and abs(mean - 34 / 108) < 1e-9, mean


def test_a_single_harbor_jobs_mean_is_harbors_line(tmp_path: Path) -> None:
    """One Harbor job dir: its own line is the run's Mean (Harbor's arithmetic, as printed)."""
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-03__23-00-00", {"pass": 6, "fail": 10, "inflight": 4},
                     total=40, seed=3)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"]).replace("0.375", "0.380")
    report = judge(_facts(jobs, line + "\n", "datagen-tb-synth"), now=datetime.now(UTC)).report
    assert report.metrics.get("mean_reward") == 0.38


def test_a_hung_chunk_of_an_array_is_found_beside_a_live_one(tmp_path: Path) -> None:
    """sbatch --array=0-1, one Harbor job dir per task under the shared jobs/: task 0's chunk
    stopped returning trials 3 hours ago and its log went silent; task 1 keeps writing
    result.json. Task 0 read healthy, '2 chunks to go' (dry-run: datagen-dry-arrhung): the
    hung-chunk rule timed the newest result.json of the whole tree, task 1's. A chunk not
    finished whose own newest result.json is older than the window, under a job whose log is
    silent as long, is the hung chunk."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "chunk-000", {"pass": 5, "fail": 10, "inflight": 8}, total=100,
               seed=50, minutes_ago=240, mtime_ago_min=180)
    MAKE.write(jobs / "chunk-001", {"pass": 20, "fail": 30, "inflight": 8}, total=100, seed=51)
    now = datetime.now(UTC)
    silent = _facts(jobs, "chunk 0 started\n", "datagen-tb-synth", now=now)
    silent = silent.model_copy(update={
        "record": silent.record.model_copy(update={"start_time": now - timedelta(hours=4)}),
        "log": silent.log.model_copy(update={"mtime": now - timedelta(hours=3)})})
    report = judge(silent, now=now).report
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert "chunk-000" in report.trend, report.trend
    # The live task: its log is fresh, so it is not the hung one.
    live = _facts(jobs, "chunk 1 writing\n", "datagen-tb-synth", now=now)
    report = judge(live, now=now).report
    assert "stall" not in report.flags and report.verdict == "healthy", report.trend
