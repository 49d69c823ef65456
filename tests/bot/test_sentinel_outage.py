"""While Redis is unreachable: no duplicate sweep posts, collapses still DMed, answers served.

Replicas reach the real Redis through a closable forwarder ("Redis down" = listener gone and
live connections cut). The policy under test is ``bot.lease``: the last known winner of the
tick lock keeps posting, a replica that saw another win stays quiet, and one that never saw
the lock decide sweeps for collapse DMs (once per process) without posting a channel thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.lease import TickLease
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import (
    FakeClock,
    FakeSweeper,
    blocks_text,
    collapsing,
    detail,
    job,
    sweep_result,
)
from tests.bot.conftest import make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.forwarder import Forwarder


def test_lease_table() -> None:
    """The fallback role follows the last interval the lock decided, through an outage."""
    lease = TickLease()
    assert lease.unreachable(7) == "alone"        # never saw the lock decide
    lease.decided(8, won=False)
    assert lease.fallback(7) is None               # the lock decided since
    assert lease.unreachable(9) == "follow"        # another replica won 8
    lease.decided(10, won=True)
    assert [lease.unreachable(n) for n in (11, 12)] == ["lead", "lead"]  # sticky
    assert lease.fallback(12) == "lead" and lease.fallback(11) is None


@pytest.fixture
async def forwarder(redis_server: str) -> AsyncIterator[Forwarder]:
    proxy = Forwarder("127.0.0.1", 6379)
    await proxy.open()
    try:
        yield proxy
    finally:
        await proxy.close()


async def proxied(forwarder: Forwarder, prefix: str) -> RedisStore:
    return make_store(prefix, url=f"redis://127.0.0.1:{forwarder.port}/0")


async def close_all(stores: list[RedisStore], prefix: str) -> None:
    """Close the replicas' stores, then drop every key under the test's prefix."""
    for store in stores:
        await store.aclose()
    direct = make_store(prefix)
    await direct.delete_prefix()
    await direct.aclose()


def parents(slack: FakeSlack) -> list[str]:
    """One per posted interval: the period's parent posted once, then edited in place."""
    posted = [c.params["text"] for c in slack.to("/api/chat.postMessage")
              if c.params.get("channel") == "C0SWEEP" and "thread_ts" not in c.params
              and "alpha:4242" not in str(c.params.get("blocks", ""))]
    edited = [c.params["text"] for c in slack.to("/api/chat.update")
              if c.params.get("channel") == "C0SWEEP"]
    return posted + edited


def dms(slack: FakeSlack) -> int:
    return sum(1 for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE")


async def test_outage_posts_one_thread_per_interval_and_answers(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Two replicas, Redis cut after one interval: only the last winner posts, no second DM,
    /jobs still answered; a replica started during the outage DMs but posts no thread."""
    config = make_config(prefix, tmp_path)
    healthy = detail(job("4100", "rl-ppo-llama-8b"))
    sweeper = FakeSweeper(make=lambda: sweep_result([healthy, collapsing()], at=clock()),
                          conf=config)
    stores = [await proxied(forwarder, prefix) for _ in range(3)]
    try:
        async with running_bot(slack, stores[0], sweeper, clock) as one, \
                running_bot(slack, stores[1], sweeper, clock) as two:
            first, second = make_scheduler(one.bot), make_scheduler(two.bot)
            won = await asyncio.gather(first.tick(), second.tick())
            assert sorted(won) == [False, True] and len(parents(slack)) == 1 and dms(slack) == 1
            await forwarder.close()
            for interval in range(2, 4):
                clock.advance(1800)
                swept = await asyncio.gather(first.tick(), second.tick())
                assert list(swept) == list(won)  # the same replica leads through the outage
                assert len(parents(slack)) == interval
            assert dms(slack) == 1  # the leader remembers its episode without Redis
            _, hook = await two.command("/jobs")
            assert (await slack.wait_for(hook))[0].params.get("text")
            async with running_bot(slack, stores[2], sweeper, clock) as late:
                newcomer = make_scheduler(late.bot)
                for _ in range(2):
                    clock.advance(1800)
                    await asyncio.gather(first.tick(), second.tick(), newcomer.tick())
            assert len(parents(slack)) == 5  # still one thread per interval
            assert dms(slack) == 2  # the newcomer's one DM: it could not know of the first
            await forwarder.open()
            clock.advance(1800)
            await asyncio.gather(first.tick(), second.tick())
            assert len(parents(slack)) == 6 and dms(slack) == 2
    finally:
        await close_all(stores, prefix)


async def test_a_change_told_during_the_outage_is_not_told_again_after_it(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The leader posts through an outage from its process memory: a job that finished during
    it is told in the thread once. When Redis answers again, the snapshot it still holds is
    from before the outage; the next sweep must not tell that finish a second time."""
    from probes.models import JobState

    config = make_config(prefix, tmp_path)
    run = detail(job("4100", "rl-ppo-llama-8b"))
    done = detail(job("4100", "rl-ppo-llama-8b", state=JobState.COMPLETED, verdict="done"))
    jobs = [run]
    sweeper = FakeSweeper(make=lambda: sweep_result(list(jobs), at=clock()), conf=config)
    store = await proxied(forwarder, prefix)

    def told() -> list[str]:
        return [c.params["text"] for c in slack.to("/api/chat.postMessage")
                if c.params.get("thread_ts") and "Changes since" in c.params["text"]]

    try:
        async with running_bot(slack, store, sweeper, clock) as one:
            scheduler = make_scheduler(one.bot)
            assert await scheduler.tick()  # baseline, Redis up
            await forwarder.close()
            jobs[:] = [done]
            clock.advance(1800)
            assert await scheduler.tick()  # the leader tells the finish from memory
            assert len(told()) == 1
            await forwarder.open()
            clock.advance(1800)
            assert await scheduler.tick()
            assert len(told()) == 1, told()
    finally:
        await close_all([store], prefix)


async def test_a_collapse_dmed_during_the_outage_is_not_dmed_again_after_it(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A run that starts collapsing while Redis is down is DMed once from process memory;
    when Redis answers again (it never saw that episode) the next sweep does not DM it again,
    and the DM's buttons are bound to its episode."""
    config = make_config(prefix, tmp_path)
    healthy = detail(job("4242", "rl-grpo-qwen-7b"))
    jobs = [healthy]
    sweeper = FakeSweeper(make=lambda: sweep_result(list(jobs), at=clock()), conf=config)
    store = await proxied(forwarder, prefix)
    try:
        async with running_bot(slack, store, sweeper, clock) as one:
            scheduler = make_scheduler(one.bot)
            assert await scheduler.tick()
            await forwarder.close()
            jobs[:] = [collapsing()]
            clock.advance(1800)
            assert await scheduler.tick()
            assert dms(slack) == 1
            await forwarder.open()
            clock.advance(1800)
            assert await scheduler.tick()
            assert dms(slack) == 1
            hook = await one.press_alert("keep_running", user="UALICE")
            await one.bot.tasks.drain()
            assert not slack.to(hook), "the press found its episode and updated the DM"
    finally:
        await close_all([store], prefix)


async def test_the_write_back_keeps_what_another_replica_wrote_since(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Redis answers again and the other replica claims the next interval before the outage's
    leader does (the leader's own link came back later, or its tick ran second): that sweep's
    snapshots are newer than what the leader kept in memory. The leader's write-back must not
    put its older copy over them, else the sweep after tells that sweep's changes again."""
    from probes.models import JobState

    config = make_config(prefix, tmp_path)

    def run(job_id: str, name: str, state: str = "RUNNING") -> object:
        return detail(job(job_id, name, state=state,
                          verdict="done" if state == JobState.COMPLETED.value else "healthy"))

    jobs = [run("4100", "rl-ppo-llama-8b"), run("4300", "sft-mistral-7b")]
    sweeper = FakeSweeper(make=lambda: sweep_result(list(jobs), at=clock()), conf=config)
    stores = [await proxied(forwarder, prefix) for _ in range(2)]

    def told(job_id: str) -> int:
        return sum(1 for c in slack.to("/api/chat.postMessage")
                   if c.params.get("thread_ts") and "Changes since" in c.params["text"]
                   and f"alpha:{job_id}" in c.params["text"] + str(c.params.get("blocks")))

    try:
        async with running_bot(slack, stores[0], sweeper, clock) as one, \
                running_bot(slack, stores[1], sweeper, clock) as two:
            leader, other = make_scheduler(one.bot), make_scheduler(two.bot)
            assert await leader.tick() and not await other.tick()  # baseline
            await forwarder.close()
            jobs[0] = run("4100", "rl-ppo-llama-8b", "COMPLETED")
            clock.advance(1800)
            assert await leader.tick() and not await other.tick()  # told from memory
            await forwarder.open()
            jobs[1] = run("4300", "sft-mistral-7b", "COMPLETED")
            clock.advance(1800)
            assert await other.tick()  # the other replica claims first and tells 4300
            assert not await leader.tick()  # the leader writes back, then loses the claim
            assert told("4300") == 1
            clock.advance(1800)
            assert await other.tick() or await leader.tick()
            assert told("4300") == 1, "the newer snapshots were overwritten by the older"
    finally:
        await close_all(stores, prefix)


async def test_the_write_back_keeps_an_episode_answered_since(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The leader DMs a collapse through the outage; Redis answers, the other replica claims
    first (it cannot know of that DM: it DMs the collapse too), and the owner answers its DM
    with Keep running. The leader's write-back of its own open episode must not reopen the
    answered one: an open episode is never DMed again, so a later collapse would go unsaid."""
    import json

    from bot.alerts import episode_name

    config = make_config(prefix, tmp_path)
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    sweeper = FakeSweeper(make=lambda: sweep_result(list(jobs), at=clock()), conf=config)
    stores = [await proxied(forwarder, prefix) for _ in range(2)]
    direct = make_store(prefix)
    try:
        async with running_bot(slack, stores[0], sweeper, clock) as one, \
                running_bot(slack, stores[1], sweeper, clock) as two:
            leader, other = make_scheduler(one.bot), make_scheduler(two.bot)
            assert await leader.tick() and not await other.tick()
            await forwarder.close()
            jobs.append(collapsing())
            clock.advance(1800)
            assert await leader.tick() and not await other.tick()
            assert dms(slack) == 1
            await forwarder.open()
            clock.advance(1800)
            assert await other.tick()
            assert dms(slack) == 2  # the other replica could not know of the first DM
            dm = [c for c in slack.to("/api/chat.postMessage")
                  if c.params["channel"] == "DALICE"][-1]
            blocks = dm.params["blocks"]
            await two.press("keep_running", "alpha:4242", user="UALICE",
                            blocks=json.loads(blocks) if isinstance(blocks, str) else blocks,
                            channel=dm.answer["channel"], ts=dm.answer["ts"])
            await two.bot.tasks.drain()
            kept = await direct.get_doc(episode_name("alpha", "4242"))
            assert kept["state"] == "closed" and kept["action"] == "keep_running"
            assert not await leader.tick()  # the leader writes back, then loses the claim
            after = await direct.get_doc(episode_name("alpha", "4242"))
            assert (after["state"], after.get("action")) == ("closed", "keep_running"), after
    finally:
        for store in stores:
            await store.aclose()
        await direct.delete_prefix()
        await direct.aclose()


async def test_a_collapse_dmed_before_any_thread_is_told_in_the_first_thread(
    slack: FakeSlack, forwarder: Forwarder, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A replica that starts while Redis is down DMs a collapse but posts no thread (it cannot
    know who leads); once Redis answers and it wins an interval, that thread tells the
    collapse (the owner told), as every other collapse is told, and the DM is not repeated."""
    config = make_config(prefix, tmp_path)
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()), conf=config)
    store = await proxied(forwarder, prefix)
    await forwarder.close()
    try:
        async with running_bot(slack, store, sweeper, clock) as one:
            scheduler = make_scheduler(one.bot)
            assert await scheduler.tick()  # alone: the DM, no thread
            assert dms(slack) == 1 and parents(slack) == []
            await forwarder.open()
            clock.advance(1800)
            assert await scheduler.tick()
            clock.advance(1800)
            assert await scheduler.tick()
    finally:
        await close_all([store], prefix)
    notes = [line for c in slack.to("/api/chat.postMessage") if c.params.get("thread_ts")
             for line in blocks_text(c.params.get("blocks") or []).splitlines()
             if "collapse on" in line]  # a line of the sweep's one reply
    assert notes == ["🚨 collapse on `alpha:4242` rl-grpo-qwen-7b, owner `alice` told by DM"]
    assert dms(slack) == 1
