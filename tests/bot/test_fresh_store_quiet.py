"""The bot's first sweeps on a fresh store (an empty Redis: a new install, a flushed store)
tell only what is new: the runs already running when the bot first looks are not all "new
runs" to deep-probe, each with its own offer DM.

Driven through the real Sweeper over the bundled recorded cluster (bot/demo/recording: built
from real trainer output; one RL run, rl-grpo-qwen3b-newmix, is a first launch in its first
steps), real Redis, fake Slack, ``[deep_probe] offer = true``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config, DeepProbeSection
from bot.config_source import ConfigSource
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from bot.sweep import Sweeper
from probes.config import ReplayCluster
from tests.bot.builders import FakeClock, FakeSweeper
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

RECORDING = Path(__file__).resolve().parents[2] / "bot" / "demo" / "recording"


def offers(slack: FakeSlack) -> list[str]:
    """The job each deep-probe offer posted names (its button's value)."""
    out = []
    for call in slack.to("/api/chat.postMessage"):
        blocks = call.params.get("blocks") or []
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        out += [e["value"] for b in blocks if b.get("type") == "actions"
                for e in b.get("elements", []) if e.get("action_id") == "deep_probe"
                and "cancel_salvage" not in json.dumps(blocks)]
    return out


@pytest.fixture
async def swept(prefix: str, tmp_path: Path, store: RedisStore, slack: FakeSlack,
                clock: FakeClock) -> AsyncIterator[tuple[Any, Sweeper]]:
    base = make_config(prefix, tmp_path)
    config = Config(clusters=(ReplayCluster(name="demo", path=str(RECORDING)),),
                    redis=base.redis, slack=base.slack,
                    deep_probe=DeepProbeSection(offer=True))
    sweeper = Sweeper(lambda: config, state=store, clock=clock)
    stand_in = FakeSweeper(make=lambda: None, conf=config)  # type: ignore[arg-type,return-value]
    try:
        async with running_bot(slack, store, stand_in, clock,
                               config=ConfigSource.fixed(config)) as h:
            h.bot.sweeper = sweeper
            yield h, sweeper
    finally:
        await sweeper.aclose()


async def test_a_fresh_store_offers_the_deep_probe_only_for_the_new_run(
        swept: tuple[Any, Sweeper], slack: FakeSlack, clock: FakeClock) -> None:
    """16:00, an empty Redis: the only offer is for rl-grpo-qwen3b-newmix (5 steps in), as
    `jobtables sweep` flags it; 16:30: no more offers (before: all six running RL runs were
    'New run: deep-probe before trusting this row' and got an offer DM each, a 40/40 PPO run
    and a 27-step GRPO run among them)."""
    h, _ = swept
    scheduler = make_scheduler(h.bot)
    assert await scheduler.tick()
    first = offers(slack)
    clock.advance(1800)
    await scheduler.tick()
    assert first == ["demo:41130"]
    assert offers(slack) == first
