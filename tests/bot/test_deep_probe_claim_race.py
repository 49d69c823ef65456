"""Two presses of one job's Deep-probe button at once, Redis down: one probe, not two.

``bot.deep_probe_post.one_at_a_time`` is the one-per-job claim (5d53f02, 6622720): the Redis
lock across replicas, ``Bot.probing`` within the replica (all there is while Redis is down).
The replica's claim was checked before the Redis call and taken after it: two callers arriving
together (a double click, a press during the auto-probe's start) both found the job free while
their Redis calls failed, and both probed. Real bot (fake Slack), Redis unreachable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.deep_probe_post import one_at_a_time
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, sweep_result
from tests.bot.conftest import make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack


async def test_two_claims_at_once_with_redis_down_let_one_probe(
        slack: FakeSlack, tmp_path: Path) -> None:
    clock = FakeClock()
    down = make_store("jt-test-race:", url="redis://127.0.0.1:1/0")  # nothing listens
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config("jt-test-race:", tmp_path))
    try:
        async with running_bot(slack, down, sweeper, clock) as h:

            async def claim(user: str) -> bool:
                async with one_at_a_time(h.bot, "alpha", "4242", user=user,
                                         where="C0SWEEP") as mine:
                    await asyncio.sleep(0.05)  # the probe's reads
                    return mine

            got = await asyncio.gather(claim("UALICE"), claim("UBOB"))
            assert sorted(got) == [False, True], got
            assert h.bot.probing == set()  # released once done
            assert await claim("UCAROL") is True  # and the next one probes
    finally:
        await down.aclose()
