"""A multi-step trial whose agent resumes its session step after step counts each turn once.

With ``agent.resume_trajectory`` (Harbor 0.26.0, ``harbor.trial.multi_step``) a step resumes the
previous step's native session: the agent dir is copied to ``steps/<step>/agent/``
(``_archive_step_outputs(preserve_agent=True)``), and the next step's ATIF trajectory is
converted from the same, grown session, so step 2's ``trajectory.json`` holds step 1's turns
too (and its agent context the totals so far). The tree is Harbor's own serialisation
(``tests/fixtures/generators/harbor_agent_trajectories.py --only resumed``: claude-code on
2-step tasks of 4+6, 3+5 and 1+1 turns). Summing the steps' trajectories read 4+10, 3+8 and 1+2
turns: 28 over 6 agent runs, avg_turns 4.67 for a run of 20 turns (3.33), and a dead engine's
1+1 read 1.5, over the dead-engine gate. A run without resume still sums its steps
(``test_trial_agent_layouts``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from probes.harbor import summarize_trials
from probes.remote.script import build_collector_script
from probes.remote.trial_roots import collect_trials
from probes.slurm.assemble import trial_tree

RESUMED = (Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"
           / "resumed" / "jobs")
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"


def _last_step_turns() -> list[int]:
    """Each trial's turns as its session holds them: the agent steps of its last step's
    (cumulative) trajectory."""
    out = []
    for result in sorted(RESUMED.glob("*/*/*/result.json")):
        last = json.loads(result.read_text())["step_results"][-1]["step_name"]
        path = result.parent / "steps" / last / "agent" / "trajectory.json"
        out.append(sum(1 for s in json.loads(path.read_text())["steps"]
                       if s.get("source") == "agent"))
    return out


def test_resumed_steps_count_the_sessions_turns_once() -> None:
    tree = trial_tree(collect_trials([str(RESUMED)]))
    assert tree is not None
    assert sorted((t.n_turns, t.agent_runs) for t in tree.trials) == [(2, 2), (8, 2), (10, 2)]
    assert sorted(_last_step_turns()) == [2, 8, 10]
    assert summarize_trials(tree).avg_turns == pytest.approx(20 / 6)


def test_the_shipped_collector_under_python_37_counts_them_once() -> None:
    req = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
           "jobs": [{"id": "4243", "stdout": None, "workdir": "/nonexistent", "offset": 0,
                     "checkpoint_roots": [], "trial_roots": [str(RESUMED)]}]}
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(req),
                         capture_output=True, text=True, check=True, timeout=120)
    (job,) = json.loads(run.stdout)["jobs"]["4243"]["trials"][str(RESUMED)]["jobs"].values()
    assert (job["tally"]["turns_n"], job["tally"]["turns_sum"]) == (6, 20)
