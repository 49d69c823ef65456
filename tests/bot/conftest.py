"""Fixtures: a fake Slack, a real Redis under a per-test key prefix, and a bot served over HTTP.

The Redis comes from ``redis_server`` (``tests/conftest.py``): without it these tests are
skipped with the reason, and under ``CI=true`` they fail. Every test that takes ``store`` or
``harness`` is marked ``redis`` from that dependency.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from redis.asyncio.connection import Connection, ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from bot.app import Bot, build_app, make_web_client
from bot.config import Config, RedisSection, SlackSection
from bot.config_source import ConfigSource
from bot.digest_posting import Pacer
from bot.server import build_web_app
from bot.settings import Settings
from bot.store import RedisStore
from bot.telemetry import Telemetry
from probes.config import ReplayCluster
from tests.bot.builders import FakeClock, FakeSweeper, sweep_result
from tests.bot.fake_slack import (
    SIGNING_SECRET,
    FakeSlack,
    action_body,
    command_body,
    signed_headers,
)

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    """A started fake Slack Web API."""
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"jt-test-{uuid.uuid4().hex[:10]}:"


def make_store(prefix: str, *, url: str = REDIS_URL, clock: FakeClock | None = None,
               window_len: int = 200) -> RedisStore:
    client = aioredis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0,
                                     retry=Retry(NoBackoff(), 1))
    if clock is None:
        return RedisStore(client, prefix=prefix, window_len=window_len)
    return RedisStore(client, prefix=prefix, window_len=window_len, clock=clock)


@pytest.fixture
async def store(redis_server: str, prefix: str) -> AsyncIterator[RedisStore]:
    """A store on the real Redis (``redis_server``: skipped, or under CI required); its keys
    are deleted afterwards."""
    instance = make_store(prefix, url=redis_server)
    try:
        yield instance
    finally:
        await instance.delete_prefix()
        await instance.aclose()


class CountingConnection(Connection):
    """A real connection that counts what it sends: one packet per command or pipeline
    (``sent``: round trips), and their bytes (``bytes_sent``)."""

    sent = 0
    bytes_sent = 0
    _handshaking = False

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        """A new connection's handshake (CLIENT SETINFO ...) is not the caller's round trip:
        whether the pool opens one more connection during a sweep depends on timing."""
        self._handshaking = True
        try:
            await super().on_connect_check_health(check_health)
        finally:
            self._handshaking = False

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._handshaking:
            packed = [command] if isinstance(command, bytes | str) else command
            CountingConnection.sent += 1
            CountingConnection.bytes_sent += sum(len(part) for part in packed)
        await super().send_packed_command(command, check_health)


@pytest.fixture
async def counted(redis_server: str, prefix: str) -> AsyncIterator[RedisStore]:
    """A store whose client's round trips and bytes are counted (connection set up
    beforehand)."""
    pool = ConnectionPool.from_url(redis_server, connection_class=CountingConnection)
    instance = RedisStore(aioredis.Redis(connection_pool=pool), prefix=prefix)
    await instance.ping()
    try:
        yield instance
    finally:
        await instance.delete_prefix()
        await instance.aclose()


def counts(store: RedisStore) -> tuple[int, int]:
    """``(round trips, bytes)`` a ``counted`` store has sent so far (read off its pool's
    connection class: pytest may load this module twice, under two names)."""
    kind = store._r.connection_pool.connection_class
    return kind.sent, kind.bytes_sent


async def notify_on(store: RedisStore, *users: str) -> None:
    """``users`` (default alice) typed `/jobs notify on`: job-end DMs are asked for
    (bot.notify); the tests about those DMs start with their owner having asked."""
    from bot.notify import PREF_TTL_S, pref_name

    for user in users or ("UALICE",):
        await store.put_doc(pref_name(user), {"off": False}, ttl_s=PREF_TTL_S)


def make_config(prefix: str, tmp_path: Path, **slack: Any) -> Config:
    defaults: dict[str, Any] = {
        "channel": "C0SWEEP", "operators": ("UOPS",), "owners": {"alice": "UALICE"},
        "incident_dir": str(tmp_path / "incidents"), "cache_seconds": 60.0,
        "sweep_every_minutes": 30.0,
    }
    # The fake sweeps report cluster "alpha"; the roster names it so `/job alpha:ID` is known.
    alpha = ReplayCluster(name="alpha", path=str(tmp_path / "alpha"))
    return Config(clusters=(alpha,), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(**{**defaults, **slack}))


@dataclass
class Harness:
    """A bot served on 127.0.0.1 port 0, and ways to talk to it as Slack would."""

    bot: Bot
    url: str
    http: aiohttp.ClientSession
    slack: FakeSlack
    sweeper: FakeSweeper
    clock: FakeClock
    replies: int = 0
    hooks: list[str] = field(default_factory=list)

    async def post(self, body: str, headers: dict[str, str]) -> tuple[int, str]:
        async with self.http.post(self.url + "/slack/events", data=body.encode(),
                                  headers=headers) as response:
            return response.status, await response.text()

    async def command(self, command: str, text: str = "", *, user: str = "UALICE",
                      timestamp: int | None = None, secret: str = SIGNING_SECRET
                      ) -> tuple[int, str]:
        """Send a signed slash command; return the HTTP status and the response_url path."""
        self.replies += 1
        hook = f"cmd{self.replies}"
        body = command_body(command, text, user=user, response_url=self.slack.response_url(hook))
        status, _ = await self.post(body, signed_headers(body, timestamp=timestamp,
                                                         secret=secret))
        return status, f"/webhook/{hook}"

    async def press(self, action_id: str, value: str, *, user: str,
                    blocks: list[dict[str, Any]] | None = None,
                    channel: str = "D0ALICE", ts: str = "1700000000.000001") -> tuple[int, str]:
        self.replies += 1
        hook = f"act{self.replies}"
        body = action_body(action_id, value, user=user, channel=channel, message_ts=ts,
                           response_url=self.slack.response_url(hook), blocks=blocks)
        status, _ = await self.post(body, signed_headers(body))
        return status, f"/webhook/{hook}"

    def alert_post(self, ref: str = "alpha:4242") -> dict[str, Any]:
        """The latest alert the bot posted for ``ref`` (a message with a button whose value
        names it; the sweep's thread replies after it name the job too): its channel, ts and
        blocks."""
        def loaded(call: Any) -> list[dict[str, Any]]:
            blocks = call.params.get("blocks") or []
            return json.loads(blocks) if isinstance(blocks, str) else list(blocks)

        posts = [c for c in self.slack.to("/api/chat.postMessage")
                 if any(e.get("value") == ref for b in loaded(c) if b.get("type") == "actions"
                        for e in b.get("elements", []))]
        assert posts, f"no alert posted for {ref}"
        return {"channel": posts[-1].answer["channel"], "ts": posts[-1].answer["ts"],
                "blocks": loaded(posts[-1])}

    async def press_alert(self, action_id: str, *, user: str, ref: str = "alpha:4242",
                          value: str | None = None) -> str:
        """Press a button on the alert the bot posted for ``ref``; return the hook path."""
        where = self.alert_post(ref)
        _, hook = await self.press(action_id, value or ref, user=user, blocks=where["blocks"],
                                   channel=where["channel"], ts=where["ts"])
        return hook

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.url + path) as response:
            return response.status, await response.text()


@asynccontextmanager
async def running_bot(
    slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
    *, connected: Callable[[], Any] | None = None, config: ConfigSource | None = None,
) -> AsyncIterator[Harness]:
    """Serve a bot over HTTP until the block ends; drains its tasks before stopping.

    ``config``: the bot's config source (default: the fake sweeper's fixed ``conf``).
    """
    settings = Settings(slack_bot_token="xoxb-test", slack_signing_secret=SIGNING_SECRET,
                        slack_api_url=slack.base_url)
    telemetry = Telemetry()
    client = make_web_client(settings, telemetry)
    source = config if config is not None else ConfigSource.fixed(sweeper.conf)
    bot = Bot(settings=settings, config=source, sweeper=sweeper, store=store, client=client,
              telemetry=telemetry, clock=clock)
    bot.digest.pacer = Pacer(0.0)  # no real-clock waits; pacing has its own fake-time test
    app = build_app(bot)
    runner = web.AppRunner(build_web_app(bot, app, connected=connected))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    http = aiohttp.ClientSession()
    try:
        yield Harness(bot, f"http://127.0.0.1:{port}", http, slack, sweeper, clock)
        await bot.tasks.drain()
    finally:
        await http.close()
        await runner.cleanup()
        await bot.tasks.aclose()
        if client.session is not None:
            await client.session.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sweeper(prefix: str, tmp_path: Path, clock: FakeClock) -> FakeSweeper:
    """A fake Sweeper with one healthy RL job and one collapsing one."""
    from tests.bot.builders import collapsing, detail, job

    healthy = detail(job("4100", "rl-ppo-llama-8b"))
    sft = detail(job("4300", "sft-mistral-7b", bucket="sft", user="bob"))
    return FakeSweeper(make=lambda: sweep_result([healthy, collapsing(), sft], at=clock()),
                       conf=make_config(prefix, tmp_path))


@pytest.fixture
async def harness(slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper,
                  clock: FakeClock) -> AsyncIterator[Harness]:
    async with running_bot(slack, store, sweeper, clock) as h:
        yield h
