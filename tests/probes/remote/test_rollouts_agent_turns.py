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
