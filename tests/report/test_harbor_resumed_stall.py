"""A resumed eval (or a chain successor that queued) inherits a trial tree whose result.json
files predate the job: their age is the previous attempt's, not this job's silence.

Shape from an acceptance dry-run: 40 real Harbor result.json (``tests/fixtures/harbor-0.26.0``)
on disk with 2.5 h old mtimes, read by the real collector; the job RUNNING for 3.5 min with a
vLLM log of fresh ``POST ... 200 OK`` lines. It was judged ``STALL: no new result.json for
2h33m`` (rulebook: "confirm the RIGHT log and a CURRENT window").
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, TrialTree
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import NOW, judge, log, record

REAL = (Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "jobs"
        / "2026-11-30__10-00-00" / "crack-7z-hash__LL53Qp2" / "result.json")

_VLLM = ('(APIServer pid=1) INFO:     10.0.3.7:54321 - "POST /v1/chat/completions HTTP/1.1" '
         '200 OK\n'
         '(APIServer pid=1) INFO 11-30 15:58:12 [loggers.py:123] Engine 000: Avg prompt '
         'throughput: 1234.5 tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 8 '
         'reqs, Waiting: 0 reqs, GPU KV cache usage: 34.5%, Prefix cache hit rate: 56.7%\n')


def _tree(tmp: Path, n: int, age_min: float) -> TrialTree:
    job = tmp / "jobs" / "2026-11-30__13-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    stamp = (NOW - timedelta(minutes=age_min)).timestamp()
    for i in range(n):
        d = job / f"crack-7z-hash__r{i:04d}"
        d.mkdir()
        (d / "result.json").write_text(REAL.read_text())
        os.utime(d / "result.json", (stamp, stamp))
    raw = collect_trials([str(tmp / "jobs")])
    tree = trial_tree(raw)
    assert tree is not None and len(tree.trials) == n
    return tree


def _job(name: str, tree: TrialTree, started_min: float, log_text: str) -> JobFacts:
    s = parse_log(log_text)
    return JobFacts(
        record=record(name, state=JobState.RUNNING,
                      start_time=NOW - timedelta(minutes=started_min),
                      elapsed_s=int(started_min * 60)),
        log=log(text=log_text, mtime=NOW), summary=s.model_copy(update={"line_count": 100}),
        trials=tree)


@pytest.mark.parametrize("name", ["eval-qwen-tb-resumed", "datagen-swe-resumed"])
def test_resumed_job_is_not_stalled_by_its_predecessors_files(tmp_path: Path,
                                                              name: str) -> None:
    """40 result.json 2.5 h old, the job 3.5 min in, engine serving: not a stall."""
    tree = _tree(tmp_path, 40, age_min=153)
    assert tree.newest_result_at is not None
    assert NOW - tree.newest_result_at > timedelta(hours=2)
    report = judge(_job(name, tree, 3.5, _VLLM * 20)).report
    assert "stall" not in report.flags, report.trend
    assert report.verdict == "healthy", report.trend


@pytest.mark.parametrize("name", ["eval-qwen-tb-resumed", "datagen-swe-resumed"])
def test_resumed_job_silent_since_its_own_start_is_a_stall(tmp_path: Path, name: str) -> None:
    """Files 5 h old, the job 2.5 h in with nothing new and a log silent as long: past both
    windows, a stall timed from the job's start (2h30m), not from the old files (5h)."""
    tree = _tree(tmp_path, 40, age_min=300)
    text = _VLLM * 20
    job = _job(name, tree, 150, text)
    job = job.model_copy(update={"log": log(text=text, mtime=NOW - timedelta(minutes=149))})
    report = judge(job).report
    assert "stall" in report.flags and report.verdict == "stalled"
    assert "2h30m" in report.trend and "5h" not in report.trend, report.trend
