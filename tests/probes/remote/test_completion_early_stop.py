"""``trainer_state.json`` of a run HF's EarlyStoppingCallback stopped reads finished
(``probes.remote.completion.parse_trainer_state_json``), whole or as the head+tail cut a huge
``log_history`` is read by; a patience not exhausted, or no stop asked, does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from probes.remote.completion import STATE_TAIL, STATE_WHOLE, parse_trainer_state_json
from tests.probes.slurm.test_e2e_early_stopped import _state


def _cut(text: str) -> str:
    """A huge state's head and tail, as the collector reads it (STATE_WHOLE exceeded)."""
    data: dict[str, Any] = json.loads(text)
    data["log_history"] = data["log_history"] * 500  # ~5 MiB of history
    whole = json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert len(whole) > STATE_WHOLE  # a state the collector reads as its head and tail
    return whole[:4096] + "\n" + whole[-STATE_TAIL:]


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(("counter", "early"), [(3, True), (1, False)])
def test_an_early_stopped_state_is_finished(cut: bool, counter: int, early: bool) -> None:
    text = _state(counter).decode()
    parsed = parse_trainer_state_json(_cut(text) if cut else text)
    assert (parsed["current_steps"], parsed["total_steps"]) == (60, 95)
    assert parsed["finished"] is early and parsed.get("early_stopped", False) is early


def test_patience_reached_but_no_stop_asked_is_not_finished() -> None:
    """The counter at its patience while TrainerControl asked no stop (a state saved before
    the callback's on_evaluate of that step): not early-stopped."""
    data = json.loads(_state(3))
    data["stateful_callbacks"]["TrainerControl"]["args"]["should_training_stop"] = False
    parsed = parse_trainer_state_json(json.dumps(data, indent=2, sort_keys=True))
    assert parsed["finished"] is False
