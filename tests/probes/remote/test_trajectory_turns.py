"""``agent_turns``: an ATIF trajectory's agent steps, skimmed, held to Harbor's own count
(rewardkit ``count_agent_turns``: top-level steps whose ``source`` is ``agent``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.remote.trajectory_turns import MAX_TOKENS, agent_turns

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"


def _harbor_count(doc: dict[str, Any]) -> int:
    return sum(1 for s in doc.get("steps", []) if s.get("source") == "agent")


def test_every_fixture_trajectory_matches_harbors_count() -> None:
    """claude-code's and openhands' trajectories as their converters dump them."""
    paths = sorted(AGENTS.glob("*/jobs/*/*/*/agent/trajectory.json"))
    assert len(paths) >= 50
    for path in paths:
        raw = path.read_bytes()
        assert agent_turns(raw) == _harbor_count(json.loads(raw)), path


def _doc(**extra: Any) -> dict[str, Any]:
    steps = [{"step_id": 1, "source": "user", "message": "do it"},
             {"step_id": 2, "source": "agent", "message": 'said "source": "agent"',
              "tool_calls": [{"tool_call_id": "t", "function_name": "f",
                              "arguments": {"source": "agent"}}]},
             {"step_id": 3, "source": "agent", "message": "", "extra": {"source": "agent"}}]
    return {"schema_version": "ATIF-v1.7", "agent": {"name": "x", "version": "1"},
            "steps": steps, **extra}


@pytest.mark.parametrize("indent", [None, 2, 4])
def test_only_the_steps_own_source_counts(indent: int | None) -> None:
    """A quoted or nested ``source: agent`` (a message, a tool's arguments, a step's extra)
    and an embedded subagent's steps are none of the agent's turns."""
    sub = {"trajectory_id": "s1", "agent": {"name": "sub", "version": "1"},
           "steps": [{"step_id": 1, "source": "agent", "message": "m"}] * 5}
    doc = _doc(subagent_trajectories=[sub], final_metrics={"total_steps": 3})
    assert agent_turns(json.dumps(doc, indent=indent).encode()) == 2 == _harbor_count(doc)


@pytest.mark.parametrize("raw", [
    b'{"steps": [{"source": "agent"}',                 # cut off mid-write
    b'{"steps": [{"source": "agent}]}',                # a string that never closes
    b'{"agent": {"name": "x"}}',                       # no steps
    b'[{"source": "agent"}]',                          # no object
    b'{"steps": [{"source": "agent"}]} {"steps": []}',  # two documents
    b'{"steps": [{"source": "agent"}]} x',
    b"\x00\xff" * 100,
    b"",
])
def test_what_is_no_whole_atif_document_tells_nothing(raw: bytes) -> None:
    assert agent_turns(raw) is None


def test_a_trajectory_past_the_token_bound_tells_nothing() -> None:
    """A pathological document (a token a byte) stops at the bound instead of costing its
    size in Python steps."""
    raw = b'{"steps": [' + b"[]," * MAX_TOKENS + b"[]]}"
    assert agent_turns(raw) is None
    assert agent_turns(b'{"steps": [' + b"[]," * 1000 + b'{"source": "agent"}]}') == 1
