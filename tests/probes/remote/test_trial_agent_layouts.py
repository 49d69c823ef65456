"""Harbor job dirs below ``jobs/<model>/`` and the turns of installed agents (claude-code,
openhands), counted by the collector as ``jobtables sweep`` reads them.

The trees are Harbor 0.26.0's own serialisation (``tests/fixtures/generators/
harbor_agent_trajectories.py``): ``harbor run -o jobs/<model>`` puts each job dir one level
below ``{workdir}/jobs`` (``Job.job_dir = jobs_dir / job_name``; Harbor's adapters ship
``jobs_dir: jobs/<bench>`` too), and an installed agent's turns are the ``agent`` steps of its
ATIF ``agent/trajectory.json``, never a field of result.json (only terminus-2 writes
``n_episodes``). Replayed under real sbatch jobs before the fix (107-109): the default root
``{workdir}/jobs`` counted no trial of either layout, and no datagen row had an avg_turns.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import summarize_trials
from probes.remote.job_dirs import GROUP_LISTINGS
from probes.remote.script import build_collector_script
from probes.remote.trial_roots import collect_trials
from probes.slurm.assemble import trial_tree

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"


def _results(jobs: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(jobs.glob("*/*/*/result.json"))]


def _harbor_turns(jobs: Path) -> list[int]:
    """Each finished trial's turns as Harbor counts them (rewardkit ``count_agent_turns``)."""
    turns = []
    for result in sorted(jobs.glob("*/*/*/result.json")):
        steps = json.loads((result.parent / "agent" / "trajectory.json").read_text())["steps"]
        turns.append(sum(1 for s in steps if s.get("source") == "agent"))
    return turns


def _tree(root: Path) -> Any:
    tree = trial_tree(collect_trials([str(root)]))
    assert tree is not None
    return tree


def test_an_eval_below_jobs_model_is_counted_with_claude_codes_turns() -> None:
    """``-o jobs/claude-sonnet-4-5``: 16 of 20 trials done, 4 in flight."""
    jobs = AGENTS / "eval" / "jobs"
    results = _results(jobs)
    tree = _tree(jobs)
    stats = summarize_trials(tree)
    assert (stats.trials, stats.trials_total) == (16, 20)
    passed = sum(r["verifier_result"]["rewards"]["reward"] > 0 for r in results)
    assert stats.pass_rate == pytest.approx(passed / 16)
    assert stats.top_exception == "AgentTimeoutError"
    turns = _harbor_turns(jobs)
    assert stats.avg_turns == pytest.approx(sum(turns) / len(turns))
    assert (tree.chunks_done, tree.chunks_total) == (0, 1)


def test_datagen_chunks_below_jobs_model_are_chunks_with_openhands_turns() -> None:
    """``-o jobs/qwen3-coder-30b --job-name chunk-NN``: two chunks done, one running."""
    jobs = AGENTS / "datagen" / "jobs"
    tree = _tree(jobs)
    stats = summarize_trials(tree)
    assert stats.trials == 26
    assert (tree.chunks_done, tree.chunks_total) == (2, 3)
    turns = _harbor_turns(jobs)
    assert stats.avg_turns == pytest.approx(sum(turns) / len(turns))
    assert stats.avg_turns > 1.5
    assert stats.exc_pct == pytest.approx(100 * 4 / 26)


def test_a_dead_engine_reads_one_turn_from_the_trajectories() -> None:
    """openhands on a dead engine: one agent step a trial, so avg_turns 1.0 (the realness gate)."""
    stats = summarize_trials(_tree(AGENTS / "dead" / "jobs"))
    assert stats.trials == 8
    assert stats.avg_turns == 1.0


def test_window_records_carry_the_trajectory_turns() -> None:
    """The recent-window records (the last-100 rules) read the same turns."""
    tree = _tree(AGENTS / "dead" / "jobs")
    assert [t.n_turns for t in tree.trials] == [1] * 8
    assert summarize_trials(tree, last_n=100).avg_turns == 1.0


def _copy_job(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)


def test_two_grouping_levels_count_and_a_third_does_not(tmp_path: Path) -> None:
    """``-o jobs/<model>/<bench>`` (two plain levels) is read; job dirs any deeper are not
    looked for (the search is bounded: no find on a parallel file system)."""
    job = next((AGENTS / "eval" / "jobs" / "claude-sonnet-4-5").iterdir())
    two = tmp_path / "two" / "jobs"
    _copy_job(job, two / "claude-sonnet-4-5" / "terminal-bench" / job.name)
    assert summarize_trials(_tree(two)).trials == 16
    three = tmp_path / "three" / "jobs"
    _copy_job(job, three / "a" / "b" / "c" / job.name)
    assert summarize_trials(_tree(three)).trials == 0


def test_job_dirs_at_one_and_two_levels_are_all_chunks(tmp_path: Path) -> None:
    """A jobs dir holding a job dir of its own beside a model's dir of job dirs counts both,
    each trial once, the chunk named by its path below the root (here the same job dir copied
    twice: the same chunk name, the same trial names)."""
    jobs = tmp_path / "jobs"
    chunk = AGENTS / "datagen" / "jobs" / "qwen3-coder-30b" / "chunk-00"
    _copy_job(chunk, jobs / chunk.name)
    _copy_job(chunk, jobs / "qwen3-coder-30b" / chunk.name)
    answer = collect_trials([str(jobs)])
    assert sorted(answer[str(jobs)]["jobs"]) == [str(jobs / "chunk-00"),
                                                 str(jobs / "qwen3-coder-30b" / "chunk-00")]
    tree = trial_tree(answer)
    assert tree is not None and (tree.chunks_done, tree.chunks_total) == (2, 2)
    assert summarize_trials(tree).trials == 20
    assert len(tree.trials) == 20  # trial names repeat across chunks: none is lost


def test_a_flat_trials_dir_below_jobs_is_no_dir_of_chunks(tmp_path: Path) -> None:
    """A model's dir holding trial dirs directly (each with config.json and result.json, as a
    job dir has) is not taken for a dir of 10 job dirs of no trials."""
    jobs = tmp_path / "jobs"
    chunk = AGENTS / "datagen" / "jobs" / "qwen3-coder-30b" / "chunk-00"
    flat = jobs / "qwen3-coder-30b"
    for trial in (p for p in chunk.iterdir() if p.is_dir()):
        shutil.copytree(trial, flat / trial.name)
    answer = collect_trials([str(jobs)])
    assert answer[str(jobs)]["jobs"] == {}


def test_a_linked_model_dir_is_not_followed(tmp_path: Path) -> None:
    """Nothing below a root follows a link: ``jobs/<model>`` linked elsewhere is not read."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    os.symlink(AGENTS / "eval" / "jobs" / "claude-sonnet-4-5", jobs / "claude-sonnet-4-5")
    assert collect_trials([str(jobs)])[str(jobs)]["jobs"] == {}


def test_a_trajectory_that_is_no_atif_document_gives_no_turns(tmp_path: Path) -> None:
    """A trajectory cut off mid-write, or absent, leaves that trial's turns unknown, not 0."""
    src = AGENTS / "dead" / "jobs"
    jobs = tmp_path / "jobs"
    shutil.copytree(src, jobs)
    trials = sorted(p.parent for p in jobs.glob("*/*/*/result.json"))
    (trials[0] / "agent" / "trajectory.json").write_text('{"steps": [{"source": "agent"')
    (trials[1] / "agent" / "trajectory.json").unlink()
    tree = _tree(jobs)
    assert sorted(t.n_turns is None for t in tree.trials) == [False] * 6 + [True] * 2
    assert summarize_trials(tree).avg_turns == 1.0


def test_shipped_collector_under_python_37_reads_both(tmp_path: Path) -> None:
    """The shipped script (stdlib only, Python 3.7) finds the nested job dirs and the turns,
    a multi-step trial's from each step's trajectory."""
    root, steps = AGENTS / "datagen" / "jobs", AGENTS / "multistep" / "jobs"
    req = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
           "jobs": [{"id": "4242", "stdout": None, "workdir": str(tmp_path), "offset": 0,
                     "checkpoint_roots": [], "trial_roots": [str(root), str(steps)]}]}
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(req),
                         capture_output=True, text=True, check=True, timeout=120)
    answer = json.loads(run.stdout)["jobs"]["4242"]["trials"]
    (multi,) = answer[str(steps)]["jobs"].values()
    assert (multi["tally"]["turns_n"], multi["tally"]["turns_sum"]) == (6, 20)
    jobs = answer[str(root)]["jobs"]
    assert len(jobs) == 3
    tallies = [j["tally"] for j in jobs.values()]
    assert sum(t["trials"] for t in tallies) == 26
    assert sum(t["turns_n"] for t in tallies) == 26
    assert sum(t["turns_sum"] for t in tallies) == sum(_harbor_turns(root))


def test_multi_step_trials_read_each_steps_trajectory() -> None:
    """A task with steps (harbor.trial.multi_step): each step's trajectory lies in
    ``steps/<step>/agent/``; turns are summed over the steps and counted per agent run, one a
    step, as for terminus-2's step results (a dead engine's 1 + 1 reads 1.0, not 2)."""
    tree = _tree(AGENTS / "multistep" / "jobs")
    assert sorted((t.n_turns, t.agent_runs) for t in tree.trials) == [(2, 2), (8, 2), (10, 2)]
    stats = summarize_trials(tree)
    assert stats.trials == 3
    assert stats.avg_turns == pytest.approx(20 / 6)


def test_the_newest_model_dirs_are_looked_through_first(tmp_path: Path) -> None:
    """A jobs dir of past evals' model dirs, more than GROUP_LISTINGS of them: the bound falls
    on the oldest (a model dir's mtime moves when Harbor makes a job dir in it), never on the
    run writing now, whatever its name sorts as."""
    jobs = tmp_path / "jobs"
    old = time.time() - 7 * 86400
    for i in range(GROUP_LISTINGS + 6):
        past = jobs / f"m{i:03d}" / "2026-11-01__10-00-00"
        past.mkdir(parents=True)
        (past / "config.json").write_text("{}")
        os.utime(past.parent, (old + i, old + i))
    job = next((AGENTS / "eval" / "jobs" / "claude-sonnet-4-5").iterdir())
    _copy_job(job, jobs / "zz-claude-sonnet-4-5" / job.name)
    found = collect_trials([str(jobs)])[str(jobs)]["jobs"]
    assert str(jobs / "zz-claude-sonnet-4-5" / job.name) in found
    assert len(found) == GROUP_LISTINGS
