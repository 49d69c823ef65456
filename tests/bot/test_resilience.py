"""The real Sweeper over the bundled replay recording, with Redis behind a closable forwarder.

Redis "stops" when the forwarder closes (listener gone, live connections cut) and "returns"
when it reopens on the same port: /jobs keeps answering, degraded, and history resumes.
Also: Slack's 429 with Retry-After is retried by the SDK's handler, not by us.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.cli import DEMO_RECORDING
from bot.config import Config
from bot.config_source import ConfigSource
from bot.scheduled import make_scheduler
from bot.store import RedisStore, StoreUnavailable, decode_sweep
from bot.sweep import Sweeper
from probes.config import ReplayCluster
from tests.bot.builders import T0, FakeClock, blocks_text
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.forwarder import Forwarder


@pytest.fixture
async def forwarder(redis_server: str) -> AsyncIterator[Forwarder]:
    """A TCP forwarder in front of the real Redis (cut and restored by the tests)."""
    proxy = Forwarder("127.0.0.1", 6379)
    await proxy.open()
    try:
        yield proxy
    finally:
        await proxy.close()


@pytest.fixture
async def proxied_store(forwarder: Forwarder, prefix: str) -> AsyncIterator[RedisStore]:
    """A store that reaches Redis only through the forwarder; cleaned up directly."""
    instance = make_store(prefix, url=f"redis://127.0.0.1:{forwarder.port}/0")
    try:
        yield instance
    finally:
        await instance.aclose()
        direct = make_store(prefix)
        await direct.delete_prefix()
        await direct.aclose()


def demo_config(prefix: str, tmp_path: Path) -> Config:
    base = make_config(prefix, tmp_path, cache_seconds=30.0)
    cluster = ReplayCluster(name="alpha", path=str(DEMO_RECORDING))
    return base.model_copy(update={"clusters": (cluster,)})


@pytest.fixture
async def real(slack: FakeSlack, proxied_store: RedisStore, prefix: str, tmp_path: Path
               ) -> AsyncIterator[Harness]:
    """The bot with the real Sweeper on the replay recording and Redis via the forwarder."""
    clock = FakeClock(T0)
    config = demo_config(prefix, tmp_path)
    sweeper = Sweeper(lambda: config, state=proxied_store, clock=clock)
    try:
        async with running_bot(slack, proxied_store, sweeper, clock,  # type: ignore[arg-type]
                               config=ConfigSource.fixed(config)) as h:
            yield h
    finally:
        await sweeper.aclose()


def failure_files(directory: Path) -> list[Path]:
    return list(directory.rglob("*-failure.json"))


async def ask_jobs(h: Harness) -> str:
    _, hook = await h.command("/jobs")
    replies = await h.slack.wait_for(hook)
    if replies[-1].params.get("text", "").startswith("Sweeping"):  # a live sweep's ack
        replies = await h.slack.wait_for(hook, len(replies) + 1)
    return "\n".join(r.params.get("text", "") + blocks_text(r.params.get("blocks") or [])
                     for r in replies)


async def test_jobs_from_the_real_sweeper_on_a_recording(real: Harness) -> None:
    """/jobs over the replay recording answers with the recorded jobs' tables."""
    text = await ask_jobs(real)
    assert "rl-grpo-qwen7b" in text and "sft-llama8b-longctx" in text
    assert "```" in text and "degraded" not in text
    history = await real.bot.store.load_history("alpha", "41001")
    assert len(history) >= 10


async def test_redis_down_then_back(real: Harness, forwarder: Forwarder) -> None:
    """Redis gone: /jobs answers from a live sweep marked degraded; back: history resumes."""
    await ask_jobs(real)
    before = len(await real.bot.store.load_history("alpha", "41001"))
    await forwarder.close()
    real.clock.advance(60)
    text = await ask_jobs(real)
    assert "degraded: no history" in text and "rl-grpo-qwen7b" in text
    with pytest.raises(StoreUnavailable):
        await real.bot.store.ping()
    status, body = await real.get("/healthz")
    assert status == 200 and "unavailable" in body
    await forwarder.open()
    real.clock.advance(60)
    text = await ask_jobs(real)
    assert "degraded" not in text
    assert len(await real.bot.store.load_history("alpha", "41001")) == before
    cached = await real.bot.store.load_cache()  # the sweep after the outage is cached again
    assert cached is not None and ("alpha", "41001") in decode_sweep(cached).details


async def test_cancel_is_refused_while_redis_is_down(real: Harness, forwarder: Forwarder
                                                     ) -> None:
    """Without the lock a cancel could run twice, so it is refused with a clear reason."""
    await forwarder.close()
    _, hook = await real.press("cancel_salvage", "alpha:41001", user="UOPS")
    (reply,) = await real.slack.wait_for(hook)
    assert "state store is unavailable" in reply.params["text"]


async def test_scheduled_sweep_dms_the_recorded_collapse(real: Harness) -> None:
    """A scheduled sweep of the recording DMs alice about her collapsing run, once."""
    scheduler = make_scheduler(real.bot)
    assert await scheduler.tick()
    real.clock.advance(1800)
    assert await scheduler.tick()
    dms = [c for c in real.slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE"]
    assert len(dms) == 1
    text = blocks_text(dms[0].params["blocks"])
    assert "rl-grpo-qwen7b-shaped" in text and "grad_norm" in text
    thread = [c for c in real.slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]
    # The day's thread carries the follow-ups in the sweep's change reply (bot/digest.py).
    texts = [blocks_text(c.params.get("blocks") or []) for c in thread]
    followups = [t for t in texts if "🔥" in t]
    assert len(followups) == 1 and "sft-llama8b-longctx" in followups[0]
    assert len(failure_files(Path(real.bot.config.current().slack.incident_dir))) == 1


async def test_rate_limited_post_is_retried_after_retry_after(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A 429 with Retry-After on chat.postMessage is retried by slack_sdk and then succeeds."""
    from tests.bot.builders import FakeSweeper, detail, job, sweep_result

    clock = FakeClock(T0)
    sweeper = FakeSweeper(make=lambda: sweep_result([detail(job("1", "rl-a"))], at=clock()),
                          conf=make_config(prefix, tmp_path))
    slack.rate_limit("chat.postMessage", times=1, retry_after=0)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
    statuses = [c.status for c in slack.calls if c.path == "/api/chat.postMessage"]
    assert statuses[:2] == [429, 200]
    assert 'method="chat.postMessage"' not in h.bot.telemetry.render().decode()


def slack_texts(slack: FakeSlack) -> str:
    """Everything the bot sent to Slack: posts, edits, ephemeral and response_url replies."""
    return "\n".join(c.params.get("text", "") + blocks_text(c.params.get("blocks") or [])
                     for c in slack.calls)


async def test_redis_outage_note_in_the_channel_names_no_internal_address(
        real: Harness, forwarder: Forwarder) -> None:
    """Redis unreachable (the forwarder's port closed): the channel parent says Redis is
    unreachable and what it means for users, never Redis's host:port; the address is in the
    bot's log."""
    scheduler = make_scheduler(real.bot)
    assert await scheduler.tick()  # the leader, Redis up
    port = forwarder.port
    await forwarder.close()
    real.clock.advance(1800)
    with capture_logs() as logs:
        await scheduler.tick()  # the leader keeps posting, degraded
        text = await ask_jobs(real)
    edits = [c.params["text"] for c in real.slack.to("/api/chat.update")
             if c.params.get("channel") == "C0SWEEP"]
    assert edits and "Redis is unreachable" in edits[-1]
    assert "no sweep post is duplicated" in edits[-1]
    assert "Redis is unreachable" in text
    everything = slack_texts(real.slack)
    assert f":{port}" not in everything and "127.0.0.1" not in everything
    assert "Connect call failed" not in everything and "Errno" not in everything
    assert any(f"{port}" in str(e) for e in logs), "the address belongs in the bot's log"


@pytest.mark.parametrize(("retry_after", "dm_statuses"), [
    ("3600", [429]), ("0.25", [429, 200]), ("Wed, 21 Oct 2099 07:28:00 GMT", [429])])
async def test_a_long_or_odd_retry_after_neither_hangs_nor_crashes_the_sweep(
    *, slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, retry_after: str,
    dm_statuses: list[int],
) -> None:
    """A 429 on the collapse DM whose Retry-After is an hour away (in seconds or as an HTTP
    date, as a proxy may send), or not a whole number: the sweep neither sleeps on it
    (slack_sdk would, three times) nor raises (slack_sdk's ``int()`` of it); a short wait is
    waited and the DM retried, a long one is not and the alert goes to the channel, as for
    any refused DM."""
    import asyncio

    from tests.bot.builders import FakeSweeper, collapsing, detail, job, sweep_result

    clock = FakeClock(T0)
    sweeper = FakeSweeper(make=lambda: sweep_result([detail(job("1", "rl-a")), collapsing()],
                                                    at=clock()),
                          conf=make_config(prefix, tmp_path))
    slack.rate_limit("chat.postMessage", times=1, target="DALICE")
    slack.rate_limits["chat.postMessage"][-1] = (retry_after, "DALICE")  # type: ignore[list-item]
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        async with asyncio.timeout(20):
            assert await scheduler.tick()
        assert scheduler.retry_at is None, "the sweep was whole"
        alert = h.alert_post()
    dms = [c for c in slack.calls if c.params.get("channel") == "DALICE"]
    assert [c.status for c in dms] == dm_statuses
    assert alert["channel"] == ("DALICE" if dm_statuses[-1] == 200 else "C0SWEEP")


def test_retry_after_is_read_in_every_form() -> None:
    """Seconds whole or decimal, an HTTP date, or nothing readable (1 s, as slack_sdk)."""
    from datetime import UTC, datetime

    from bot.delivery import retry_after_s

    now = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("30", now) == 30.0
    assert retry_after_s(" 1.5 ", now) == 1.5
    assert retry_after_s("Fri, 04 Dec 2026 12:02:00 GMT", now) == 120.0
    assert retry_after_s("Fri, 04 Dec 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_s("-5", now) == 0.0
    assert retry_after_s("soon", now) == retry_after_s(None, now) == retry_after_s("nan") == 1.0


async def test_a_frozen_redis_is_waited_on_once_not_at_every_call(
        real: Harness, forwarder: Forwarder) -> None:
    """Redis frozen (its port still accepts, nothing answers: a hung primary, a partition
    that drops packets): each call waited its 2 s socket timeout twice (one retry), one call
    after another, so a scheduled sweep took 40 s and ``/jobs`` 20 s (30 connections opened
    into the void). After two timeouts in a row the store now refuses at once for a short
    while: the sweep and the answer go on degraded, and Redis is tried again later."""
    import asyncio

    scheduler = make_scheduler(real.bot)
    assert await scheduler.tick()  # Redis up: the leader
    tried: list[asyncio.StreamWriter] = []
    thaw = asyncio.Event()

    async def freeze(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tried.append(writer)
        await thaw.wait()
        writer.close()

    await forwarder.close()
    frozen = await asyncio.start_server(freeze, "127.0.0.1", forwarder.port, reuse_address=True)
    try:
        real.clock.advance(1800)
        await scheduler.tick()
        real.clock.advance(200)
        text = await ask_jobs(real)
        assert "rl-grpo-qwen7b" in text and "degraded" in text
        assert len(tried) <= 8, f"{len(tried)} connections into a frozen Redis"
    finally:
        thaw.set()
        frozen.close()
        await frozen.wait_closed()
        await asyncio.sleep(0)  # the handlers close their connections
