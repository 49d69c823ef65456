"""Result.json counted over the whole run: exact, bounded by time, small on the wire.

Trials are real Harbor 0.26.0 result.json files (``tests/fixtures/harbor-0.26.0``), copied
with new names and finish times to make large job directories. The reference answer is the
per-record path (every trial reduced and summarised locally by ``probes.harbor``); the
collector's tallies must give the same statistics.
"""

from __future__ import annotations

import ast
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import TrialStats, build_trial_tree, summarize_trials
from probes.models import TrialTree
from probes.remote.guard import Guard
from probes.remote.harbor_reduce import reduce_trial
from probes.remote.trial_count import WINDOW
from probes.remote.trial_roots import collect_trials
from probes.slurm.assemble import trial_tree
from report.findings import Findings
from report.harbor_trials import count_bound_note
from tests.report.factories import facts, judge, record

JOBS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "jobs"
MIXED = JOBS / "2026-11-30__10-00-00"
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def _collected(root: Path, **bound: Any) -> TrialTree:
    tree = trial_tree(collect_trials([str(root)], **bound))
    assert tree is not None
    return tree


def _reference(job_dirs: list[Path], chunked: bool = False) -> TrialTree:
    """Every trial as a record (the pre-tally path): the answer the tallies must match."""
    trials: dict[str, dict[str, object]] = {}
    for job in job_dirs:
        for result in sorted(job.glob("*/result.json")):
            reduced = reduce_trial(result.read_bytes())
            if reduced is not None:
                prefix = f"{job.name}/" if chunked else ""
                trials[prefix + result.parent.name] = reduced
    return build_trial_tree(str(job_dirs[0]), trials)


def _same(a: TrialStats, b: TrialStats) -> None:
    skip = {"count_seconds", "trials_total"}
    left, right = a.model_dump(exclude=skip), b.model_dump(exclude=skip)
    for key in ("pass_rate", "mean_reward", "avg_turns", "exc_pct"):
        assert left.pop(key) == pytest.approx(right.pop(key)), key
    assert left == right


@pytest.mark.parametrize("job", sorted(p.name for p in JOBS.iterdir() if p.is_dir()))
def test_tally_matches_the_per_record_statistics(job: str) -> None:
    """On every real fixture job dir, the tallies and the records give the same stats."""
    _same(summarize_trials(_collected(JOBS / job)),
          summarize_trials(_reference([JOBS / job])))


def test_chunks_are_summed_and_the_window_is_global() -> None:
    """A jobs dir of chunks: tallies summed; the last-100 window spans every chunk."""
    tree = _collected(JOBS)
    chunks = sorted(p for p in JOBS.iterdir() if p.is_dir())
    reference = _reference(chunks, chunked=True)
    _same(summarize_trials(tree), summarize_trials(reference))
    assert [t.name for t in tree.trials] == [t.name for t in reference.trials][-WINDOW:]


def _big_job(tmp: Path, n: int) -> Path:
    """``n`` trials from the 32 real mixed-eval results, each finishing one second later."""
    templates = [json.loads(p.read_text()) for p in sorted(MIXED.glob("*/result.json"))]
    job = tmp / "big"
    job.mkdir()
    meta = json.loads((MIXED / "result.json").read_text())
    meta["n_total_trials"] = n
    (job / "result.json").write_text(json.dumps(meta))
    for i in range(n):
        data = dict(templates[i % len(templates)])
        data["trial_name"] = name = f"task-{i % 97:02d}__{i:06d}"
        data["finished_at"] = (T0 + timedelta(seconds=i)).isoformat()
        (job / name).mkdir()
        (job / name / "result.json").write_text(json.dumps(data))
    return job


def test_large_job_dir_is_counted_exactly_with_a_bounded_answer(tmp_path: Path) -> None:
    """3000 trials in one job dir: every one counted (no listing cap), the answer carries
    only the last-100 window as records, and the newest 100 by finish time are those."""
    n = 3000
    job = _big_job(tmp_path, n)
    raw = collect_trials([str(job)])
    tree = trial_tree(raw)
    assert tree is not None and tree.counts is not None and tree.counts.complete
    _same(summarize_trials(tree), summarize_trials(_reference([job])))
    assert summarize_trials(tree).trials == n
    assert len(tree.trials) == WINDOW
    assert {t.name.rsplit("__", 1)[1] for t in tree.trials} == {
        f"{i:06d}" for i in range(n - WINDOW, n)}
    assert len(json.dumps(raw)) < 80_000  # 100 records and a tally, not 3000 records


def test_time_bound_stops_the_count_and_says_so(tmp_path: Path) -> None:
    """With the bound forced low (a fake clock: one tick per look), the count stops early,
    is marked incomplete, and the Trend says how many were counted and in how long."""
    job = _big_job(tmp_path, 300)
    ticks = iter(range(1_000_000))
    tree = _collected(job, budget_s=50.0, clock=lambda: float(next(ticks)))
    stats = summarize_trials(tree)
    assert tree.counts is not None and not tree.counts.complete
    assert 0 < stats.trials < 300 and not stats.count_complete
    rec = record("eval-qwen-swebench", state="RUNNING")
    report = judge(facts(rec, trials=tree), now=T0 + timedelta(minutes=20)).report
    assert f"≥{stats.trials} trials counted in" in report.trend


def test_count_leaves_the_request_time_for_later_jobs(tmp_path: Path) -> None:
    """Inside a request with 2 s left, one trial set may spend at most half of it, whatever
    its own budget (fake clock for the count; the request deadline is the guard's)."""
    job = _big_job(tmp_path, 50)
    ticks = iter(range(1_000_000))
    guard = Guard(os.geteuid(), 5.0, until=time.monotonic() + 2.0)
    raw = collect_trials([str(job)], guard, budget_s=1000.0, clock=lambda: float(next(ticks)))
    tree = trial_tree(raw)
    assert tree is not None and tree.counts is not None and not tree.counts.complete


def test_complete_count_has_no_bound_note() -> None:
    """A count that finished within its bound adds no note."""
    f = Findings()
    count_bound_note(f, summarize_trials(_collected(MIXED)))
    assert f.trends == []


def test_shipped_tree_modules_rebind_no_other_modules_names() -> None:
    """tree.py, the modules split from it and trial_count.py are joined into one script with
    the other shipped modules: no top-level name of theirs may rebind another's (``Json`` is
    the same alias everywhere)."""
    def names(name: str) -> set[str]:
        body = ast.parse((Path(collect_trials.__code__.co_filename).parent / name)
                         .read_text()).body
        found: set[str] = set()
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return found - {"Json"}

    others = ("guard.py", "harbor_reduce.py", "stdio_pattern.py", "completion.py",
              "job_files.py", "queue_listing.py", "queue_document.py", "collector.py")
    mines = ("checkpoint_steps.py", "logged_paths.py", "tree.py", "trial_roots.py",
             "trial_count.py")
    for mine in mines:
        for other in (*others, *(set(mines) - {mine})):
            assert names(mine) & names(other) == set(), (mine, other)
