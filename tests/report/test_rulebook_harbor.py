"""Rulebook: Harbor instant-fail is judged on the agent's execution phase.

Every trial here starts from a real Harbor 0.26.0 ``result.json`` (``tests/fixtures/harbor-0.26.0``,
serialised by Harbor's own pydantic models: ``agent_execution`` is a ``TimingInfo`` with
``started_at``/``finished_at``, tokens in ``agent_result.n_output_tokens``); only its agent phase,
tokens or times are edited (labelled "derived" below). It goes through the real collector and
reducer on disk and is judged as an eval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import is_instant_fail, summarize_trials
from probes.models import JobFacts, TrialTree
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record, summary

REAL = (Path(__file__).resolve().parents[1] / "fixtures" / "harbor-0.26.0" / "jobs"
        / "2026-11-30__10-00-00" / "crack-7z-hash__LL53Qp2" / "result.json")
"""A real scored trial: 28 s of environment/agent setup, the agent ran 2 min 18 s."""


def _instant_agent(data: dict[str, Any], tokens: int | None = None) -> None:
    """Derived: the agent finishes the moment it starts (setup times stay real), the task left
    unsolved (the verifier still runs: reward 0; a passed trial did the work, never instant)."""
    data["agent_execution"]["finished_at"] = data["agent_execution"]["started_at"]
    data["agent_result"]["n_output_tokens"] = tokens
    data["verifier_result"] = {"rewards": {"reward": 0.0}}


def _old_harbor_instant(data: dict[str, Any]) -> None:
    """Derived: an older result with no phase timings, the trial itself instant."""
    for phase in ("environment_setup", "agent_setup", "agent_execution", "verifier"):
        data.pop(phase)
    data["finished_at"] = data["started_at"]
    data["agent_result"]["n_output_tokens"] = None
    data["verifier_result"] = {"rewards": {"reward": 0.0}}


def _agent_running(data: dict[str, Any]) -> None:
    """Derived: the agent phase has started and not finished (trial still in flight)."""
    data["agent_execution"]["finished_at"] = None
    data["finished_at"] = None
    data["agent_result"]["n_output_tokens"] = None


VARIANTS = {
    "real": lambda d: None,
    "instant-null": _instant_agent,
    "instant-zero": lambda d: _instant_agent(d, tokens=0),
    "instant-with-output": lambda d: _instant_agent(d, tokens=500),
    "old-harbor-instant": _old_harbor_instant,
    "agent-running": _agent_running,
}


def _tree(tmp: Path, kinds: list[str]) -> TrialTree:
    job = tmp / "jobs" / "2026-11-30__10-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    for i, kind in enumerate(kinds):
        data = json.loads(REAL.read_text())
        VARIANTS[kind](data)
        (job / f"t{i:04d}").mkdir()
        (job / f"t{i:04d}" / "result.json").write_text(json.dumps(data, indent=4))
    raw = collect_trials([str(tmp / "jobs")])
    tree = trial_tree(raw)
    assert tree is not None
    return tree


@pytest.mark.parametrize(
    ("kind", "instant"),
    [
        ("real", False),
        ("instant-null", True),  # tens of seconds of setup, then an agent that fails at once
        ("instant-zero", True),
        ("instant-with-output", False),
        ("old-harbor-instant", True),
        ("agent-running", False),
    ],
)
def test_instant_fail_on_the_agent_phase(tmp_path: Path, kind: str, instant: bool) -> None:
    """The agent phase decides; trial-level times only for a result without that phase."""
    [trial] = _tree(tmp_path, [kind]).trials
    assert is_instant_fail(trial) is instant
    if kind == "instant-null":
        assert trial.started_at and trial.finished_at
        assert (trial.finished_at - trial.started_at).total_seconds() > 60


def _eval(tree: TrialTree) -> JobFacts:
    return JobFacts(record=record("eval-qwen-tb"), log=log(text="eval\n"), summary=summary(),
                    trials=tree)


@pytest.mark.parametrize(
    ("kinds", "flagged"),
    [
        (["instant-null"] * 12 + ["real"] * 8, True),
        (["instant-null"] * 10 + ["real"] * 10, True),  # half of the window
        (["instant-null"] * 9 + ["real"] * 11, False),
        (["real"] * 20, False),
        (["agent-running"] * 20, False),
    ],
)
def test_eval_instant_fail_flag(tmp_path: Path, kinds: list[str], flagged: bool) -> None:
    """An eval whose agents instant-fail (behind real setup times) is flagged instant-fail."""
    tree = _tree(tmp_path, kinds)
    assert summarize_trials(tree).instant_fail == kinds.count("instant-null")
    report = judge(_eval(tree)).report
    assert ("instant-fail" in report.flags) is flagged
    if flagged:
        assert report.recommendation is not None and "tunnel" in report.recommendation.why
