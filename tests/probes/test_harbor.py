"""Harbor result.json reduction, trial trees and trial statistics.

Real fixtures: ``tests/fixtures/harbor-0.26.0/jobs/`` were serialised by Harbor 0.26.0's own
pydantic models (``generators/harbor_results.py``): a mixed eval run (10-00-00), a
"dead engine" datagen run (14-00-00) and an instant-fail eval (16-00-00). Samples marked
HAND-WRITTEN below are rebuilt from research/formats.md §4.2-§4.3 for forms the fixtures do
not cover (the old ``5921cc40`` stats names, reward.json dicts, multi-step trials).
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import probes.remote.harbor_reduce
from probes.harbor import build_trial_tree, summarize_trials, trial_from_reduced
from probes.models import TrialTree
from probes.remote.collector import collect_trials
from probes.remote.harbor_reduce import reduce_job, reduce_trial
from probes.slurm.assemble import trial_tree

JOBS = Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "jobs"
MIXED = JOBS / "2026-11-30__10-00-00"
DEAD_ENGINE = JOBS / "2026-11-30__14-00-00"
INSTANT_FAIL = JOBS / "2026-11-30__16-00-00"


def read_trial_tree(root: Path, **bound: Any) -> TrialTree:
    """The tree production builds: the collector lists and reduces, assembly merges roots."""
    tree = trial_tree(collect_trials([str(root)], **bound))
    return tree if tree is not None else TrialTree(root=str(root), exists=False)


def _trial(job: Path, name: str) -> dict[str, object] | None:
    return reduce_trial((job / name / "result.json").read_bytes())


def test_reduce_trial_scored_fixture() -> None:
    """A scored trial reduces to its reward, turns, output tokens and ISO times."""
    assert _trial(MIXED, "crack-7z-hash__LL53Qp2") == {
        "reward": 1.0,
        "exception_type": None,
        "n_turns": 8,
        "n_output_tokens": 3534,
        "started_at": "2026-11-30T10:14:01.048350Z",
        "finished_at": "2026-11-30T10:17:22.270585Z",
        "agent_started_at": "2026-11-30T10:14:29.011254Z",
        "agent_finished_at": "2026-11-30T10:16:47.625525Z",
    }


def test_reduce_trial_unscored_exception_fixture() -> None:
    """A trial whose environment never started has an exception and no reward or turns."""
    reduced = _trial(MIXED, "polyglot-rust-c__DhNb5cU")
    assert reduced is not None
    assert reduced["exception_type"] == "EnvironmentStartTimeoutError"
    assert (reduced["reward"], reduced["n_turns"], reduced["n_output_tokens"]) == (None, None, None)


def test_reduce_trial_passthrough_exception_is_still_scored() -> None:
    """An AgentTimeoutError trial keeps its verifier reward (a passthrough exception)."""
    reduced = _trial(MIXED, "count-dataset-tokens__8u2qsYs")
    assert reduced is not None
    assert (reduced["exception_type"], reduced["reward"]) == ("AgentTimeoutError", 0.0)


def test_reduced_reward_matches_reward_txt_for_every_fixture_trial() -> None:
    """For every fixture trial the reduced reward equals the verifier's reward.txt."""
    checked = 0
    for result in JOBS.glob("*/*/result.json"):
        reward_txt = result.parent / "verifier" / "reward.txt"
        expected = float(reward_txt.read_text()) if reward_txt.exists() else None
        reduced = reduce_trial(result.read_bytes())
        assert reduced is not None and reduced["reward"] == expected, result
        checked += 1
    assert checked == 72


def test_reduce_job_fixture() -> None:
    """The job result gives totals, new-form stats and Harbor's own Mean."""
    reduced = reduce_job((MIXED / "result.json").read_text())
    assert reduced is not None
    assert reduced["n_total_trials"] == 32
    assert (reduced["n_completed"], reduced["n_errored"], reduced["n_running"]) == (32, 10, 0)
    assert reduced["finished_at"] == "2026-11-30T10:31:02.120354"
    assert reduced["mean"] == pytest.approx(11 / 30)
    assert reduced["eval_means"] == {"terminus-2__Qwen3-8B__terminal-bench": pytest.approx(11 / 30)}


# HAND-WRITTEN from formats.md §4.3: the old stats form of Harbor commit 5921cc40, mid-run.
OLD_JOB: dict[str, object] = {
    "id": "0c6f6f54-1d5e-4a64-9a3e-5f4f1c0b2a11",
    "started_at": "2026-02-04T13:05:22.123456",
    "finished_at": None,
    "n_total_trials": 300,
    "stats": {
        "n_trials": 142,
        "n_errors": 31,
        "evals": {
            "terminus-2__terminal-bench": {
                "n_trials": 142,
                "n_errors": 31,
                "metrics": [{"mean": 0.21}],
            }
        },
    },
    "trial_results": [],
}


def test_reduce_job_old_stats_form() -> None:
    """Old stat names (n_trials, n_errors) map onto the same keys; no finish yet."""
    reduced = reduce_job(json.dumps(OLD_JOB))
    assert reduced is not None
    assert (reduced["n_total_trials"], reduced["n_completed"], reduced["n_errored"]) == (
        300,
        142,
        31,
    )
    assert (reduced["finished_at"], reduced["n_running"]) == (None, None)
    assert reduced["mean"] == 0.21


# HAND-WRITTEN from formats.md §4.2: minimal trial results for forms the fixtures lack.
@pytest.mark.parametrize(
    ("trial", "field", "expected"),
    [
        ({"verifier_result": {"rewards": {"score": 0.5, "tests": 3}}}, "reward", 0.5),
        ({"verifier_result": {"rewards": {"reward": 1, "score": 0.5}}}, "reward", 1.0),
        ({"verifier_result": {"rewards": {"reward": True}}}, "reward", None),
        ({"verifier_result": None}, "reward", None),
        ({"verifier_result": {"rewards": None}}, "reward", None),
        (
            {
                "step_results": [
                    {"verifier_result": {"rewards": {"reward": 0.0}}},
                    {"verifier_result": {"rewards": {"reward": 1.0}}},
                ]
            },
            "reward",
            1.0,
        ),
        ({"agent_result": {"metadata": {"n_turns": 9}}}, "n_turns", 9),
        ({"agent_result": {"metadata": {"num_turns": 4.0}}}, "n_turns", 4),
        ({"agent_result": {"turns": 3, "metadata": None}}, "n_turns", 3),
        ({"agent_result": {"metadata": {"n_episodes": -1}}}, "n_turns", None),
        # Harbor's dspy-rlm agent (DspyRlmAgent._populate_context): one REPL iteration a turn
        ({"agent_info": {"name": "dspy-rlm"},
          "agent_result": {"n_output_tokens": 812, "metadata": {"rlm_trajectory_steps": 7}}},
         "n_turns", 7),
        ({"agent_result": {"n_output_tokens": "12"}}, "n_output_tokens", None),
        ({"exception_info": {"exception_type": ""}}, "exception_type", None),
        ({"started_at": 12345}, "started_at", None),
        ({"verifier_result": {"rewards": {"reward": 10**400}}}, "reward", None),
        ({"agent_result": {"n_output_tokens": 10**400}}, "n_output_tokens", None),
    ],
)
def test_reduce_trial_field_forms(trial: dict[str, object], field: str, expected: object) -> None:
    """Each field is read from every form Harbor has written, and wrong types become None."""
    reduced = reduce_trial(json.dumps(trial))
    assert reduced is not None
    assert reduced[field] == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "{",
        '{"verifier_result": {"rewards": {"reward": 1.0}',
        "[]",
        "null",
        b"\xff\xfe\x00garbage",
        "[" * 100_000,
    ],
)
def test_malformed_results_reduce_to_none(raw: str | bytes) -> None:
    """Malformed, truncated, non-object or absurdly nested JSON reduces to None."""
    assert reduce_trial(raw) is None
    assert reduce_job(raw) is None


def test_nan_reward_is_no_reward() -> None:
    """A NaN reward (json accepts it) is treated as no reward, not a poisoned mean."""
    reduced = reduce_trial('{"verifier_result": {"rewards": {"reward": NaN}}}')
    assert reduced is not None and reduced["reward"] is None


def test_reducer_module_is_shippable() -> None:
    """The reducer imports only the standard library and has no __future__ import."""
    source = inspect.getsource(probes.remote.harbor_reduce)
    imported = {
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    } | {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {"json", "math", "re", "datetime"}
    namespace: dict[str, object] = {}
    exec(compile(source, "harbor_reduce", "exec"), namespace)  # as the collector runs it
    assert callable(namespace["reduce_trial"])


def test_trial_from_reduced_parses_times() -> None:
    """Reduced times become zone-aware datetimes; naive ones are taken as UTC."""
    trial = trial_from_reduced(
        "t",
        {
            "started_at": "2026-11-30T10:00:00",
            "finished_at": "2026-11-30T10:00:05Z",
            "reward": float("inf"),
            "n_turns": 2.5,
            "exception_type": 7,
        },
    )
    assert trial.started_at == datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    assert trial.finished_at == datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC)
    assert (trial.reward, trial.n_turns, trial.exception_type) == (None, None, None)


def test_build_trial_tree_orders_and_dates() -> None:
    """Trials come oldest first (unfinished first); newest_result_at prefers file mtimes."""
    trials = {
        "b": {"finished_at": "2026-11-30T10:05:00Z"},
        "a": {"finished_at": "2026-11-30T10:01:00Z"},
        "c": {},
    }
    tree = build_trial_tree("/r", trials, job={"n_total_trials": 10})
    assert [t.name for t in tree.trials] == ["c", "a", "b"]
    assert tree.trials_total == 10
    assert tree.newest_result_at == datetime(2026, 11, 30, 10, 5, tzinfo=UTC)
    with_mtime = build_trial_tree("/r", {"a": {"mtime": 1_800_000_000.0}})
    assert with_mtime.newest_result_at == datetime.fromtimestamp(1_800_000_000, tz=UTC)


def test_read_trial_tree_single_job_dir() -> None:
    """A Harbor job dir reads into one tree with every trial and the job's total: one chunk."""
    tree = read_trial_tree(MIXED)
    assert (len(tree.trials), tree.trials_total, tree.chunks_total) == (32, 32, 1)
    finished = [t.finished_at for t in tree.trials]
    assert finished == sorted(f for f in finished if f is not None)
    assert tree.newest_result_at is not None


def test_collector_sends_result_mtimes(tmp_path: Path) -> None:
    """The stall rule reads result.json file times: the collector sends them, newest wins."""
    job = tmp_path / "job"
    shutil.copytree(MIXED, job)
    stamp = 1_800_000_000
    for i, result in enumerate(sorted(job.glob("*/result.json"))):
        os.utime(result, (stamp - 3600 + i, stamp - 3600 + i))
    newest = sorted(job.glob("*/result.json"))[-1]
    os.utime(newest, (stamp, stamp))
    tree = read_trial_tree(job)
    assert tree.newest_result_at == datetime.fromtimestamp(stamp, tz=UTC)
    assert all(t.finished_at is None or t.finished_at < tree.newest_result_at
               for t in tree.trials)


def test_read_trial_tree_jobs_dir_is_chunks() -> None:
    """A jobs_dir of several job dirs is one chunked run; finished job dirs are done chunks."""
    tree = read_trial_tree(JOBS)
    assert (tree.chunks_done, tree.chunks_total) == (3, 3)
    assert (len(tree.trials), tree.trials_total) == (72, 72)


def test_read_trial_tree_unfinished_chunk(tmp_path: Path) -> None:
    """A chunk whose job result has no finish time is not done."""
    jobs = tmp_path / "jobs"
    shutil.copytree(JOBS, jobs)
    result = jobs / DEAD_ENGINE.name / "result.json"
    data = json.loads(result.read_text())
    data["finished_at"] = None
    result.write_text(json.dumps(data))
    (jobs / "stray-file.txt").write_text("not a job")
    (jobs / "not-a-job-dir").mkdir()
    tree = read_trial_tree(jobs)
    assert (tree.chunks_done, tree.chunks_total) == (2, 3)


def test_read_trial_tree_bounded_by_time_and_missing(tmp_path: Path) -> None:
    """Counting stops when its time bound is spent (a fake clock: one second a look) and
    says so; a missing root is reported as not existing."""
    ticks = iter(range(10_000))
    tree = read_trial_tree(MIXED, budget_s=6.0, clock=lambda: float(next(ticks)))
    stats = summarize_trials(tree)
    assert tree.counts is not None and not tree.counts.complete
    assert 0 < stats.trials < 32 and not stats.count_complete
    assert summarize_trials(read_trial_tree(MIXED)).count_complete
    missing = read_trial_tree(tmp_path / "nope")
    assert (missing.exists, missing.trials) == (False, ())


def test_read_trial_tree_skips_truncated_result(tmp_path: Path) -> None:
    """A result.json caught mid-write (truncated) is skipped, not an error."""
    job = tmp_path / "job"
    shutil.copytree(INSTANT_FAIL, job)
    victim = next(job.glob("*/result.json"))
    victim.write_bytes(victim.read_bytes()[:200])
    assert len(read_trial_tree(job).trials) == 15


def test_summarize_mixed_eval() -> None:
    """The mixed eval run: mean over scored trials, as Harbor 0.26 computes Mean; pass rate over
    every completed trial (the 2 whose environment never started did not pass)."""
    stats = summarize_trials(read_trial_tree(MIXED))
    assert (stats.trials, stats.trials_total, stats.completed) == (32, 32, 32)
    assert stats.pass_rate == pytest.approx(11 / 32)
    assert stats.mean_reward == pytest.approx(11 / 30)  # Harbor's own Mean in result.json
    assert stats.exc_pct == pytest.approx(31.25)
    assert stats.exceptions == {
        "AgentTimeoutError": 4,
        "ContextLengthExceededError": 4,
        "EnvironmentStartTimeoutError": 2,
    }
    assert stats.top_exception == "AgentTimeoutError"
    assert stats.instant_fail == 0
    assert stats.avg_turns is not None and stats.avg_turns > 1.5


def test_summarize_dead_engine_datagen() -> None:
    """The dead-engine run shows avg_turns of exactly 1.0; its agents ran in zero time with no
    output tokens after tens of seconds of real setup, so every one is an instant failure on
    the agent's execution phase (the trial-level times alone would hide them)."""
    stats = summarize_trials(read_trial_tree(DEAD_ENGINE))
    assert stats.avg_turns == 1.0
    assert (stats.mean_reward, stats.instant_fail) == (0.0, stats.trials)
    assert stats.trials == 24
    tree = read_trial_tree(DEAD_ENGINE)
    assert all(t.finished_at and t.started_at and (t.finished_at - t.started_at).total_seconds()
               > 10 for t in tree.trials)


def test_summarize_instant_fail_eval() -> None:
    """Trials finishing the instant they start with no output tokens are instant failures."""
    stats = summarize_trials(read_trial_tree(INSTANT_FAIL))
    assert (stats.trials, stats.instant_fail) == (16, 16)


def test_summarize_last_n_window() -> None:
    """last_n keeps the most recently finished trials."""
    tree = read_trial_tree(MIXED)
    stats = summarize_trials(tree, last_n=3)
    assert stats.trials == 3
    assert summarize_trials(tree, last_n=0).trials == 0


def test_summarize_without_verifier_has_no_reward() -> None:
    """Datagen with no verifier: mean and pass rate are unknown, never zero."""
    tree = build_trial_tree(
        "/r",
        {f"t{i}": {"n_turns": 5, "finished_at": "2026-11-30T10:00:00Z"} for i in range(4)},
    )
    stats = summarize_trials(tree)
    assert (stats.mean_reward, stats.pass_rate, stats.avg_turns) == (None, None, 5.0)
    assert (stats.exc_pct, stats.top_exception) == (0.0, None)


def test_summarize_empty_tree() -> None:
    """An empty tree has no statistics at all."""
    stats = summarize_trials(TrialTree(root="/r"))
    assert (stats.trials, stats.pass_rate, stats.exc_pct, stats.avg_turns) == (0, None, None, None)
