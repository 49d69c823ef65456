"""A deep probe's Redis lock is released only by its holder.

``bot.deep_probe_post.one_at_a_time`` took the lock for ``PRESS_LOCK_S`` (900 s) and, when
its probe ended, deleted it by name: a probe that ran past the TTL (its lock expired and
another replica's press took the job) freed that later holder's lock, and a third press then
probed the same job at once. Now the lock records a token and is deleted only while it still
holds it (compare-and-delete in Redis); the Redis-down fallback (``Bot.probing``) is kept.
Real bot (fake Slack), real Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.deep_probe import DEEP_PROBE
from bot.deep_probe_post import one_at_a_time
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, sweep_result
from tests.bot.conftest import make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

NAME = f"alpha:4242:{DEEP_PROBE}"


@pytest.mark.redis
async def test_a_probe_past_its_ttl_leaves_the_next_holder_s_lock(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The first probe outlives its lock; another replica's press takes the job; the first
    one's end leaves that press's lock held (before: deleted, the job free to probe again)."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        async with one_at_a_time(h.bot, "alpha", "4242", user="UALICE", where="C0SWEEP") as mine:
            assert mine is True
            await store.release(NAME)  # its 900 s ran out while it probed
            assert await store.acquire(NAME, {"user": "UBOB", "where": "elsewhere"}, ttl_s=900)
        assert (await store.holder(NAME) or {}).get("user") == "UBOB"
        async with one_at_a_time(h.bot, "alpha", "4242", user="UCAROL", where="C0SWEEP") as mine:
            assert mine is False  # UBOB's probe still runs
        async with one_at_a_time(h.bot, "alpha", "4242", user="UBOB", where="C0SWEEP") as mine:
            assert mine is False
        await store.release(NAME)


@pytest.mark.redis
async def test_a_probe_within_its_ttl_frees_the_job(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The ordinary case: the holder's end releases its lock, and the next press probes."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        async with one_at_a_time(h.bot, "alpha", "4242", user="UALICE", where="C0SWEEP") as mine:
            assert mine is True
            assert (await store.holder(NAME) or {}).get("user") == "UALICE"
        assert await store.holder(NAME) is None
        async with one_at_a_time(h.bot, "alpha", "4242", user="UBOB", where="C0SWEEP") as mine:
            assert mine is True
        assert await store.holder(NAME) is None


async def test_with_redis_down_the_replica_s_own_claim_still_serves(
        slack: FakeSlack, tmp_path: Path) -> None:
    """Redis unreachable: the press probes (the replica's claim is all there is) and its end
    frees the job for the next press, as before."""
    clock = FakeClock()
    down = make_store("jt-test-lock-holder:", url="redis://127.0.0.1:1/0")  # nothing listens
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config("jt-test-lock-holder:", tmp_path))
    try:
        async with running_bot(slack, down, sweeper, clock) as h:
            for user in ("UALICE", "UBOB"):
                async with one_at_a_time(h.bot, "alpha", "4242", user=user,
                                         where="C0SWEEP") as mine:
                    assert mine is True
                    assert h.bot.probing == {"alpha:4242"}
            assert h.bot.probing == set()
    finally:
        await down.aclose()
