"""Socket Mode health: /healthz follows the real Socket Mode client's connection state."""

from __future__ import annotations

from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

from bot.app import build_app
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper
from tests.bot.conftest import running_bot
from tests.bot.fake_slack import FakeSlack


async def test_healthz_is_503_until_socket_mode_connects(
    slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
) -> None:
    """Disconnected: 503; connected to the fake's WebSocket: 200; closed again: 503."""
    handler: AsyncSocketModeHandler | None = None

    async def connected() -> bool:
        return handler is not None and bool(await handler.client.is_connected())

    async with running_bot(slack, store, sweeper, clock, connected=connected) as h:
        handler = AsyncSocketModeHandler(build_app(h.bot), "xapp-1-test")
        try:
            status, body = await h.get("/healthz")
            assert status == 503 and "socket mode disconnected" in body
            await handler.connect_async()  # type: ignore[no-untyped-call]
            await slack.wait_for("/link")
            status, _ = await h.get("/healthz")
            assert status == 200
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
        status, _ = await h.get("/healthz")
        assert status == 503
    assert slack.to("/api/apps.connections.open")
