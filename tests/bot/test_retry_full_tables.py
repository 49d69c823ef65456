"""A sweep's retry posts no second set of full tables (follow-up of b52c8e1).

With ``[digest] full_tables_every = N`` the full tables go into the thread on every Nth sweep
of the period. b52c8e1 made a retry keep the sweep count of the try it repeats, so a retry of
the Nth sweep (its parent edit refused with a 500, a cluster unreachable) read the Nth sweep
again and dumped the whole tables into the thread a second time, minutes after the first:
the noise the digest avoids for a blip. The first try's tables stand; only tables Slack
refused are posted again by the retry (c6644ff)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, detail, job, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack


def _full_tables(slack: FakeSlack) -> list[str]:
    """The thread replies that open a set of full tables."""
    out = []
    for call in slack.to("/api/chat.postMessage"):
        blocks = call.params.get("blocks")
        text = call.params["text"] + "\n" + blocks_text(
            json.loads(blocks) if isinstance(blocks, str) else list(blocks or []))
        if call.params.get("thread_ts") and "Full tables" in text:
            out.append(text)
    return out


async def test_a_retry_of_a_full_tables_sweep_posts_them_once(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """full_tables_every = 2: 16:00 opens the parent (tables), 16:30 is sweep 2 (tables) and
    its parent edit is refused with a 500; the 16:31 retry edits the parent and posts no
    tables again; 17:00 (sweep 3) none, 17:30 (sweep 4) tables."""
    config = make_config(prefix, tmp_path)
    config = config.model_copy(update={"digest": config.digest.model_copy(
        update={"full_tables_every": 2})})

    def make() -> Any:
        return sweep_result([detail(job("4100", "rl-ppo-llama-8b"))], at=clock())

    sweeper = FakeSweeper(make=make, conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00, sweep 1: the parent and its tables
        clock.advance(1800)
        slack.fail("chat.update", "internal_error", status=500)
        assert await scheduler.tick()  # 16:30, sweep 2: tables; the parent edit refused
        after_first = len(_full_tables(slack))
        clock.advance(60)
        assert await scheduler.tick()  # the retry
        after_retry = len(_full_tables(slack))
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00, sweep 3
        clock.advance(1800)
        assert await scheduler.tick()  # 17:30, sweep 4
    assert after_first == 2
    assert after_retry == 2, "the retry posted the full tables a second time"
    assert len(_full_tables(slack)) == 3
