"""An installed agent's turns come from the trajectories of the run's most recent trials only.

Each trial of claude-code, openhands, ... keeps its turns in an ATIF ``agent/trajectory.json``
(every observation the agent saw: hundreds of KiB), never in result.json. Reading every one of
a 10k-trial run's took 30 s of the login node a sweep, past the count's 20 s bound (8,493 of
10,000 trials counted; ``tests/bench/bench_trials.py --trajectory-kb 200``), where the
result.json files alone take 0.7 s. The collector now reads the ``TURN_SAMPLE`` most recently
finished trials' trajectories: the count stays whole and avg_turns is the recent trials'.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import summarize_trials
from probes.remote.trial_roots import TURN_SAMPLE, collect_trials
from probes.slurm.assemble import trial_tree

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"
T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _template() -> dict[str, Any]:
    result = next(AGENTS.glob("datagen/jobs/*/chunk-00/*/result.json"))
    data: dict[str, Any] = json.loads(result.read_text())
    assert (data["agent_result"] or {}).get("metadata") is None  # an installed agent's
    return data


def _trajectory(turns: int) -> str:
    steps = [{"step_id": 1, "source": "system", "message": "You are OpenHands agent ..."},
             {"step_id": 2, "source": "user", "message": "Solve the task in /app."}]
    steps += [{"step_id": 3 + i, "source": "agent", "message": "ran the tests",
               "observation": {"results": [{"content": "x" * 2000}]}} for i in range(turns)]
    return json.dumps({"schema_version": "ATIF-v1.8", "agent": {"name": "openhands"},
                       "steps": steps})


def _job(tmp_path: Path, turns_by_age: list[int]) -> Path:
    """A job dir whose trials finish a minute apart, oldest first, with these turns."""
    job = tmp_path / "jobs" / "chunk-00"
    job.mkdir(parents=True)
    template = _template()
    (job / "config.json").write_text("{}")
    for i, turns in enumerate(turns_by_age):
        trial = job / f"task-{i:04d}__abc{i:04d}"
        (trial / "agent").mkdir(parents=True)
        data = dict(template, trial_name=trial.name,
                    started_at=(T0 + timedelta(minutes=i)).isoformat(),
                    finished_at=(T0 + timedelta(minutes=i, seconds=50)).isoformat())
        (trial / "result.json").write_text(json.dumps(data))
        (trial / "agent" / "trajectory.json").write_text(_trajectory(turns))
    return job


def test_avg_turns_is_the_recent_trials_and_the_count_stays_whole(tmp_path: Path) -> None:
    """An engine that died: 100 recent one-turn trials after 60 real ones of nine turns."""
    job = _job(tmp_path, [9] * 60 + [1] * TURN_SAMPLE)
    stats = summarize_trials(_tree(job))
    assert (stats.trials, stats.count_complete) == (60 + TURN_SAMPLE, True)
    assert stats.avg_turns == pytest.approx(1.0)  # every trajectory read: (540 + 100) / 160


def test_a_run_that_recovered_reads_its_recent_turns(tmp_path: Path) -> None:
    job = _job(tmp_path, [1] * 30 + [7] * TURN_SAMPLE)
    stats = summarize_trials(_tree(job))
    assert stats.trials == 30 + TURN_SAMPLE
    assert stats.avg_turns == pytest.approx(7.0)


def test_fewer_trials_than_the_sample_are_all_read(tmp_path: Path) -> None:
    job = _job(tmp_path, [2, 4, 6, 8])
    stats = summarize_trials(_tree(job))
    assert stats.avg_turns == pytest.approx(5.0)
    # the recent window's records carry the turns the tally averaged
    assert sorted(t.n_turns for t in _tree(job).trials) == [2, 4, 6, 8]


def _tree(job: Path) -> Any:
    tree = trial_tree(collect_trials([str(job.parent)]))
    assert tree is not None
    return tree
