"""An owner's new runs of one sweep get one deep-probe offer, not one DM each (fake Slack,
real Redis).

A user who launches a sweep of new RL runs (eight settings at once, not an array) got eight
"New RL run" DMs in one sweep, where their collapses of one sweep come as one DM
(``bot.alerts``). The offers of one sweep to one destination (the owner's DM, or the channel
when the owner is unknown) are one message, split only past Slack's limits (50 blocks); each
run keeps its own button, bound to that run: a press on it probes that run, a value naming
a run that is not in the message is refused as on any alert.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot import deep_probe
from bot.config import Config, DeepProbeSection
from tests.bot.builders import detail, job, sweep_result
from tests.bot.conftest import Harness
from tests.bot.test_deep_probe_presses import HeldProbe, held  # noqa: F401 (fixture)


def flagged(job_id: str, name: str, user: str = "alice") -> Any:
    return detail(job(job_id, name, user=user, flags=("deep-probe",)))


def offer_posts(h: Harness) -> list[Any]:
    def blocks(call: Any) -> list[dict[str, Any]]:
        raw = call.params.get("blocks") or []
        return json.loads(raw) if isinstance(raw, str) else list(raw)

    return [(c, [e["value"] for b in blocks(c) if b.get("type") == "actions"
                 for e in b["elements"] if e.get("action_id") == "deep_probe"])
            for c in h.slack.to("/api/chat.postMessage")]


def offering(h: Harness) -> Config:
    return h.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(offer=True)})


async def test_an_owners_new_runs_of_one_sweep_are_one_offer(harness: Harness) -> None:
    """Alice's eight new runs and bob's (unmapped) two: one DM to alice with eight buttons,
    one channel post with two; each block id unique in its message (Slack refuses the whole
    message otherwise). Near miss: a single new run is offered alone, as before."""
    runs = [flagged(str(5000 + i), f"rl-sweep-lr{i}") for i in range(8)]
    bobs = [flagged(str(6000 + i), f"rl-bob-{i}", user="bob") for i in range(2)]
    result = sweep_result([*runs, *bobs], at=harness.clock())
    handled = await deep_probe.after_sweep(harness.bot, result, offering(harness))
    assert len(handled) == 10
    posts = offer_posts(harness)
    assert [(c.params["channel"], len(values)) for c, values in posts] == \
        [("DALICE", 8), ("C0SWEEP", 2)]
    for call, _ in posts:
        raw = call.params["blocks"]
        ids = [b.get("block_id") for b in (json.loads(raw) if isinstance(raw, str) else raw)
               if b.get("block_id")]
        assert len(ids) == len(set(ids))
    harness.clock.advance(1800)
    lone = sweep_result([*runs, flagged("7000", "rl-lone")], at=harness.clock())
    assert await deep_probe.after_sweep(harness.bot, lone, offering(harness)) == ["alpha:7000"]
    assert [len(v) for _, v in offer_posts(harness)] == [8, 2, 1]


async def test_each_button_of_a_batched_offer_probes_its_own_run(
        harness: Harness, held: HeldProbe) -> None:  # noqa: F811
    """Pressing the third run's button probes that run; a crafted value naming a run the
    message does not offer is refused and audited 'tampered', nothing probed."""
    runs = [flagged(str(5000 + i), f"rl-sweep-lr{i}") for i in range(3)]
    await deep_probe.after_sweep(harness.bot, sweep_result(runs, at=harness.clock()),
                                 offering(harness))
    ((call, values),) = offer_posts(harness)
    raw = call.params["blocks"]
    blocks = json.loads(raw) if isinstance(raw, str) else raw
    where = {"channel": call.answer["channel"], "ts": call.answer["ts"], "blocks": blocks}
    held.release.set()
    await harness.press("deep_probe", values[2], user="UALICE", **where)
    await harness.press("deep_probe", "alpha:4100", user="UALICE", **where)
    await harness.bot.tasks.drain()
    assert held.calls == [values[2]]
    audit = await harness.bot.store.audit_entries()
    assert [(e["job_id"], e["outcome"]) for e in audit if e["outcome"] == "tampered"] == \
        [("4100", "tampered")]


@pytest.mark.parametrize("count", [30])
async def test_a_batch_past_slacks_block_limit_is_split(harness: Harness, count: int) -> None:
    """Thirty new runs of one owner: as few messages as 50 blocks a message allow, every run
    offered once."""
    runs = [flagged(str(5000 + i), f"rl-sweep-{i}") for i in range(count)]
    await deep_probe.after_sweep(harness.bot, sweep_result(runs, at=harness.clock()),
                                 offering(harness))
    posts = offer_posts(harness)
    assert 1 < len(posts) <= 2
    assert sorted(v for _, values in posts for v in values) == sorted(
        f"alpha:{5000 + i}" for i in range(count))
    for call, _ in posts:
        raw = call.params["blocks"]
        assert len(json.loads(raw) if isinstance(raw, str) else raw) <= 50
