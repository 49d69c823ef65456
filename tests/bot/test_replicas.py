"""Two bot replicas on one Redis and one Slack (fake Slack, fake clock, real Redis)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.scheduled import scheduled_sweep
from bot.shared_sweep import cache_stamp, shared_live_doc
from bot.slash_answers import live_doc
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from tests.bot.builders import FakeClock, FakeSweeper, detail, job, sweep_result
from tests.bot.conftest import make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("cache_seconds", [60.0, 0.0])
async def test_two_replicas_answering_jobs_at_once_without_a_cache_post_the_tables_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, redis_server: str,
        cache_seconds: float) -> None:
    """Two people type /jobs in the sweep channel at the same moment, each reaching another
    replica, with no cached sweep: each gets one answer, and the day's thread gets the full
    tables once (each replica swept live, under its own stamp, and each posted them). Also
    with ``cache_seconds = 0`` (every /jobs sweeps): the sweep shared is still one."""
    clock = FakeClock()
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    config = make_config(store.prefix, tmp_path, cache_seconds=cache_seconds)
    gate = asyncio.Event()
    sweepers = [FakeSweeper(make=lambda lag=lag: sweep_result(
        jobs, at=clock() + timedelta(seconds=lag)), conf=config) for lag in (0, 1)]
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweepers[0], clock) as a, \
                running_bot(slack, other, sweepers[1], clock) as b:
            await scheduled_sweep(a.bot, 0)  # the day's parent
            clock.advance(600)  # the cached sweep is too old to answer from
            before = len(slack.to("/api/chat.postMessage"))
            for s in sweepers:
                s.gate = gate
            b.replies = 100  # each harness numbers its response_urls: B's must not be A's
            (_, hook_a), (_, hook_b) = await asyncio.gather(
                a.command("/jobs", user="UALICE"), b.command("/jobs", user="UBOB"))
            await slack.wait_for(hook_a)  # "Sweeping 1 cluster…": both found no fresh cache
            await slack.wait_for(hook_b)
            assert hook_a != hook_b  # else one ack would release the gate before the other
            gate.set()
            await a.bot.tasks.drain()
            await b.bot.tasks.drain()
            answers = {hook: [c.params.get("text", "") for c in slack.to(hook)]
                       for hook in (hook_a, hook_b)}
            posts = slack.to("/api/chat.postMessage")[before:]
    finally:
        await other.aclose()
    asked = [c for c in posts if "asked for with /jobs" in str(c.params.get("text", ""))]
    assert len(asked) == 1, [c.params.get("text") for c in posts]
    for hook, texts in answers.items():
        tables = [t for t in texts if not t.startswith("Sweeping")]
        assert len(tables) >= 1, (hook, texts)
    assert sweepers[0].sweeps + sweepers[1].sweeps == 2  # the parent's, then one live sweep


async def test_a_replica_waiting_on_a_sweep_that_fails_sweeps_itself(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, redis_server: str) -> None:
    """The replica holding the live sweep fails it (nothing cached): the other, waiting for
    it, sweeps itself once the lock is released and answers; neither hangs."""
    clock = FakeClock()
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    config = make_config(store.prefix, tmp_path)
    gate = asyncio.Event()

    def broken() -> SweepResult:
        raise RuntimeError("probe bug")

    failing = FakeSweeper(make=broken, conf=config, gate=gate)
    working = FakeSweeper(make=lambda: sweep_result(jobs, at=clock()), conf=config)
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, failing, clock) as a, \
                running_bot(slack, other, working, clock) as b:
            b.replies = 100  # each harness numbers its response_urls: B's must not be A's
            _, hook_a = await a.command("/jobs", user="UALICE")
            await slack.wait_for(hook_a)  # "Sweeping 1 cluster…": A holds the lock
            _, hook_b = await b.command("/jobs", user="UBOB")
            await slack.wait_for(hook_b)
            gate.set()
            await a.bot.tasks.drain()
            await b.bot.tasks.drain()
            a_texts = [c.params.get("text", "") for c in slack.to(hook_a)]
            b_texts = [c.params.get("text", "") for c in slack.to(hook_b)]
    finally:
        await other.aclose()
    assert any("Something went wrong" in t for t in a_texts), a_texts
    assert working.sweeps == 1
    assert any("rl-ppo-llama-8b" in str(c.params) for c in slack.to(hook_b)), b_texts


async def test_a_sweep_finished_after_a_replica_acked_its_jobs_is_the_one_it_answers_from(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, redis_server: str) -> None:
    """Review of 7b53e70 (the two-replica test above failed about one run in two with
    ``cache_seconds = 0``): a replica found no fresh sweep, acked 'Sweeping 1 cluster…', and
    only then read which sweep was cached; when the other replica's live sweep was published
    in between, that one became the sweep to wait past: it swept again and the day's thread
    got the full tables twice. What is cached when the replica decided to sweep is the sweep
    a newer one is judged against."""
    clock = FakeClock()
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    config = make_config(store.prefix, tmp_path, cache_seconds=0.0)
    sweepers = [FakeSweeper(make=lambda: sweep_result(jobs, at=clock()), conf=config)
                for _ in range(2)]
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweepers[0], clock) as a, \
                running_bot(slack, other, sweepers[1], clock) as b:
            await scheduled_sweep(a.bot, 0)
            clock.advance(600)
            before = await cache_stamp(b.bot.cache)  # B decides to sweep live, acks
            clock.advance(1)
            _, published = await live_doc(a.bot)  # meanwhile A's live sweep is published
            result, doc, age = await shared_live_doc(
                b.bot.cache, b.bot.store, lambda: live_doc(b.bot), config=config,
                replica=b.bot.replica, before=before)
    finally:
        await other.aclose()
    assert result is None and age is not None and doc.stamp == published.stamp
    assert sweepers[1].sweeps == 0


async def test_jobs_on_another_replica_during_a_scheduled_sweep_answers_from_it(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, redis_server: str) -> None:
    """A /jobs in the channel reaches replica B while replica A runs the period's first
    scheduled sweep (no cached sweep yet): B waits for A's sweep and answers from it; the
    clusters are read once and the day's thread gets the full tables once (B swept beside A
    and posted its own 'asked for with /jobs' tables right after the period's)."""
    clock = FakeClock()
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    config = make_config(store.prefix, tmp_path)
    gate = asyncio.Event()
    a_sweeper = FakeSweeper(make=lambda: sweep_result(jobs, at=clock()), conf=config, gate=gate)
    b_sweeper = FakeSweeper(make=lambda: sweep_result(jobs, at=clock() + timedelta(seconds=1)),
                            conf=config)
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, a_sweeper, clock) as a, \
                running_bot(slack, other, b_sweeper, clock) as b:
            started = asyncio.Event()
            held = a_sweeper.sweep

            async def sweep(**kwargs: Any) -> SweepResult:
                started.set()
                return await held(**kwargs)

            a_sweeper.sweep = sweep  # type: ignore[method-assign]
            scheduled = asyncio.create_task(scheduled_sweep(a.bot, 0))
            await started.wait()  # A's sweep has begun (held at the gate)
            _, hook = await b.command("/jobs", user="UBOB")
            await slack.wait_for(hook)  # "Sweeping 1 cluster…": B found nothing cached
            gate.set()
            await scheduled
            await b.bot.tasks.drain()
            answers = [c.params.get("text", "") for c in slack.to(hook)]
    finally:
        await other.aclose()
    tables = [c for c in slack.to("/api/chat.postMessage") if "Full tables" in
              str(c.params.get("text", ""))]
    assert b_sweeper.sweeps == 0 and a_sweeper.sweeps == 1
    assert len(tables) == 1, [c.params.get("text") for c in tables]
    assert any("cached" in t for t in answers), answers


async def test_a_sweep_stamped_by_a_replica_whose_clock_runs_ahead_is_answered_from(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, redis_server: str) -> None:
    """Replica B's clock runs 5 s ahead of A's: the sweep B published while A waited is
    stamped in A's future. A answers from it (it read the negative age as no sweep at all,
    swept again and, in the channel, posted the tables a second time)."""
    clock_a = FakeClock()
    clock_b = FakeClock(clock_a() + timedelta(seconds=5))
    jobs = [detail(job("4100", "rl-ppo-llama-8b"))]
    config = make_config(store.prefix, tmp_path)
    sweepers = [FakeSweeper(make=lambda c=c: sweep_result(jobs, at=c()), conf=config)
                for c in (clock_a, clock_b)]
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweepers[0], clock_a) as a, \
                running_bot(slack, other, sweepers[1], clock_b) as b:
            before = await cache_stamp(a.bot.cache)  # A decides to sweep live, acks
            _, published = await live_doc(b.bot)  # meanwhile B's live sweep is published
            result, doc, age = await shared_live_doc(
                a.bot.cache, a.bot.store, lambda: live_doc(a.bot), config=config,
                replica=a.bot.replica, before=before)
    finally:
        await other.aclose()
    assert result is None and doc.stamp == published.stamp and age == 0.0
    assert sweepers[0].sweeps == 0
