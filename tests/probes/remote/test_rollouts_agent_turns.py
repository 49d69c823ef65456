"""The deep probe's trial sample reads an installed agent's turns from its ATIF trajectory, as
the counts do (2e9d9bf): claude-code leaves result.json's ``metadata`` null, so the probe's
reasons said ``— turns`` of a trial whose trajectory holds them."""

from __future__ import annotations

import json
from pathlib import Path

from probes.remote.rollouts import collect_rollouts

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"


def test_sampled_trials_carry_the_trajectory_turns() -> None:
    job = next((AGENTS / "eval" / "jobs" / "claude-sonnet-4-5").iterdir())
    answer = collect_rollouts({"trial_roots": [str(job)], "max_trials": 64})
    sampled = answer["trials"]["sampled"]
    finished = {n: t for n, t in sampled.items() if t.get("finished_at")}
    assert len(finished) == 16
    for name, trial in finished.items():
        steps = json.loads((job / name / "agent" / "trajectory.json").read_text())["steps"]
        assert trial["n_turns"] == sum(1 for s in steps if s["source"] == "agent"), name


def test_terminus_turns_in_the_result_stand() -> None:
    """Near miss: a result that counts its turns (terminus-2's n_episodes) is read as before."""
    job = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "jobs" / \
        "2026-11-30__14-00-00"
    answer = collect_rollouts({"trial_roots": [str(job)], "max_trials": 64})
    assert {t["n_turns"] for t in answer["trials"]["sampled"].values()} == {1}


def test_the_probe_samples_job_dirs_below_jobs_model() -> None:
    """``harbor run -o jobs/<model>``: the probe samples the trials the row counts (2e9d9bf),
    not 'no rollouts were found' beside a row of 26 trials."""
    root = AGENTS / "datagen" / "jobs"
    answer = collect_rollouts({"trial_roots": [str(root)], "max_trials": 64})
    got = answer["trials"]
    assert got["listed"] == 28  # 26 ended, 2 in flight (chunk-02)
    assert len([t for t in got["sampled"].values() if t.get("finished_at")]) == 26
    assert got["unfinished"] == 2


def test_the_probe_looks_no_deeper_than_the_counts(tmp_path: Path) -> None:
    """Near miss: job dirs three plain levels down are no more the probe's than the row's."""
    import shutil

    job = next((AGENTS / "eval" / "jobs" / "claude-sonnet-4-5").iterdir())
    shutil.copytree(job, tmp_path / "jobs" / "a" / "b" / "c" / job.name)
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")], "max_trials": 64})
    assert answer["trials"]["listed"] == 0
