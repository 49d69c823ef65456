"""Two bot replicas through a real Sentinel failover, and back again.

Debian's ``redis-sentinel`` (port 26379) monitors ``jobtables-ha``: a primary on 6380 and its
replica on 6381, all started by ``scripts/services``. Each replica's store is built from
``[redis] sentinels`` exactly as the bot builds it, so after ``SENTINEL FAILOVER`` redis-py's
Sentinel pool finds the new primary by itself. Shown: one sweep post per interval, the collapse
DMed once, and the episode still there after each failover. The test fails over twice, so the
topology ends as it began (6380 primary), and it starts by restoring that topology if an
interrupted run left it the other way round.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from bot.alerts import episode_name
from bot.config import RedisSection
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack

ROOT = Path(__file__).resolve().parents[2]
SENTINEL = ("127.0.0.1", 26379)
SERVICE = "jobtables-ha"
PRIMARY, REPLICA = 6380, 6381
DEADLINE_S = 60.0
"""Bound on waiting for the real daemons (a failover takes a few seconds here)."""

pytestmark = pytest.mark.redis


def _client(port: int) -> aioredis.Redis:
    return aioredis.Redis(host="127.0.0.1", port=port, socket_timeout=2.0, decode_responses=True)


async def primary_port() -> int:
    async with _client(SENTINEL[1]) as s:
        _, port = await s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
    return int(port)


async def _unavailable() -> str | None:
    """Why the trio cannot be used (the sentinel or either server not answering), or None."""
    try:
        await primary_port()
    except (RedisError, OSError, TypeError) as exc:
        return f"Sentinel {SERVICE} on {SENTINEL[0]}:{SENTINEL[1]} does not answer: {exc!r}"
    for port in (PRIMARY, REPLICA):
        try:
            async with _client(port) as r:
                await r.ping()
        except (RedisError, OSError) as exc:
            return f"Redis on 127.0.0.1:{port} (of {SERVICE}) does not answer: {exc!r}"
    return None


@pytest.fixture
async def sentinel() -> None:
    """The Sentinel trio; skipped with the reason, or under CI (re)started and required:
    ``scripts/services`` rebuilds the topology when any of the three is down."""
    reason = await _unavailable()
    if reason and os.environ.get("CI") == "true":
        await asyncio.to_thread(subprocess.run, ["bash", str(ROOT / "scripts" / "services")],
                                check=False, timeout=900)
        if reason := await _unavailable():
            pytest.fail(f"Redis Sentinel unavailable under CI: {reason}")
    if reason:
        pytest.skip(reason)
    if await primary_port() != PRIMARY:  # an interrupted run: start from the clean topology
        await fail_over(to=PRIMARY)


async def _role(port: int) -> tuple[str, int]:
    """(role, replication offset) of the server on ``port``."""
    async with _client(port) as r:
        info: dict[str, Any] = await r.info("replication")
    offset = info.get("master_repl_offset") if info["role"] == "master" else info.get(
        "slave_repl_offset")
    return str(info["role"]), int(offset or 0)


async def _poll(what: str, check: Any) -> None:
    """Wait (bounded) for a condition on the real daemons; they live on the real clock."""
    async with asyncio.timeout(DEADLINE_S):
        # Polled: the state lives in other processes, so there is no event to await.
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    del what


async def fail_over(*, to: int) -> None:
    """Promote the server on port ``to`` through Sentinel and wait until the topology settled:
    the sentinel names it, it is primary, the other is its replica, no failover in progress."""
    other = PRIMARY if to == REPLICA else REPLICA

    async def caught_up() -> bool:  # a planned failover: the replica has every write
        (_, sent), (_, got) = await _role(other), await _role(to)
        return got >= sent

    async def started() -> bool:
        try:
            async with _client(SENTINEL[1]) as s:
                await s.execute_command("SENTINEL", "FAILOVER", SERVICE)
        except ResponseError:  # NOGOODSLAVE / INPROG while the sentinel refreshes its view
            return False
        return True

    async def settled() -> bool:
        async with _client(SENTINEL[1]) as s:
            fields = await s.execute_command("SENTINEL", "MASTER", SERVICE)  # parsed: a dict
        return (int(fields["port"]) == to and fields["flags"] == "master"
                and (await _role(to))[0] == "master" and (await _role(other))[0] == "slave")

    await _poll("replica caught up", caught_up)
    await _poll("failover started", started)
    await _poll("failover settled", settled)


@pytest.fixture
async def ha_stores(sentinel: None, prefix: str) -> AsyncIterator[list[RedisStore]]:
    """Two stores (one per replica) configured by ``[redis] sentinels``, as the bot does."""
    section = RedisSection(sentinels=(f"{SENTINEL[0]}:{SENTINEL[1]}",), service_name=SERVICE,
                           key_prefix=prefix)
    stores = [RedisStore.from_config(section) for _ in range(2)]
    try:
        yield stores
    finally:
        await stores[0].delete_prefix()
        for store in stores:
            await store.aclose()


def parents(slack: FakeSlack) -> int:
    """Sweeps that reached the channel: the period's parent posted once, then edited in place."""
    posted = sum(1 for c in slack.to("/api/chat.postMessage")
                 if c.params.get("channel") == "C0SWEEP" and "thread_ts" not in c.params)
    edited = sum(1 for c in slack.to("/api/chat.update") if c.params.get("channel") == "C0SWEEP")
    return posted + edited


def dms(slack: FakeSlack) -> int:
    return sum(1 for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE")


async def test_two_replicas_through_a_sentinel_failover_and_back(
    slack: FakeSlack, ha_stores: list[RedisStore], prefix: str, tmp_path: Path,
    clock: FakeClock,
) -> None:
    """One post per interval, one collapse DM, and the episode kept across two failovers."""
    config = make_config(prefix, tmp_path)
    healthy = detail(job("4100", "rl-ppo-llama-8b"))
    sweeper = FakeSweeper(make=lambda: sweep_result([healthy, collapsing()], at=clock()),
                          conf=config)
    episode = episode_name("alpha", "4242")
    async with running_bot(slack, ha_stores[0], sweeper, clock) as one, \
            running_bot(slack, ha_stores[1], sweeper, clock) as two:
        replicas = [make_scheduler(one.bot), make_scheduler(two.bot)]
        swept = await asyncio.gather(*(r.tick() for r in replicas))
        assert sorted(swept) == [False, True]
        assert (parents(slack), dms(slack)) == (1, 1)
        opened = await ha_stores[0].get_doc(episode)
        assert opened is not None and opened["state"] == "open"
        for interval, primary in ((2, REPLICA), (3, PRIMARY)):
            await fail_over(to=primary)
            assert await primary_port() == primary
            clock.advance(1800)
            swept = await asyncio.gather(*(r.tick() for r in replicas))
            assert sorted(swept) == [False, True]  # the tick lock still decides, on the new one
            assert (parents(slack), dms(slack)) == (interval, 1)  # no second DM
            for store in ha_stores:  # both replicas still see the same open episode
                assert await store.get_doc(episode) == opened
