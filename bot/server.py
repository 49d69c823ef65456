"""The bot process: aiohttp web app (Slack events, health, metrics), Socket Mode, scheduler.

Policy: one aiohttp application serves ``POST /slack/events`` (Bolt's handler, after the
signature and timestamp are checked on the raw body, 401 on failure, before anything parses
it; a copy of a request already run is refused the same way, ``bot.replays``), ``GET
/healthz`` and ``GET /metrics``. The last two are unauthenticated, so they carry no
secret and no job detail: counts, cluster names, Slack method names and error codes only. The
listener binds ``JOBTABLES_HOST`` (default ``0.0.0.0`` for containers; ``127.0.0.1`` behind a
reverse proxy). When ``SLACK_APP_TOKEN`` is set, Socket Mode runs as well (slack_bolt's aiohttp
``AsyncSocketModeHandler``), and ``/healthz`` answers 503 while its socket is disconnected so
Kubernetes restarts a silently dead bot. Redis being down does not fail the health check: the
bot still answers from live sweeps (degraded). Scheduled sweeps run as one tracked background
task; shutdown on SIGTERM/SIGINT cancels it and closes every client.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog
from aiohttp import web
from pydantic import SecretStr
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from bot.app import Bot, build_app, make_web_client
from bot.config_file import load_config
from bot.config_source import ConfigSource
from bot.errors import UserError
from bot.logs import configure_logging
from bot.replays import SeenRequests
from bot.scheduled import make_scheduler
from bot.settings import Settings
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import Sweeper
from bot.telemetry import CONTENT_TYPE, Telemetry

log = structlog.get_logger(__name__)

EVENTS_PATH = "/slack/events"
Connected = Callable[[], Awaitable[bool]]


Handler = Callable[[web.Request], Awaitable[web.Response]]


def build_web_app(
    bot: Bot, app: AsyncApp, *, connected: Connected | None = None
) -> web.Application:
    """The HTTP surface. ``connected`` reports the Socket Mode link (``None``: HTTP only)."""

    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=bot.telemetry.render())
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    web_app = web.Application()
    web_app.add_routes([
        web.post(EVENTS_PATH, _slack_events(bot, app)),
        web.get("/healthz", _healthz(bot, connected)),
        web.get("/metrics", metrics),
    ])
    return web_app


def _slack_events(bot: Bot, app: AsyncApp) -> Handler:
    """``POST /slack/events``: checked on the raw body, then dispatched into Bolt."""
    verifier = SignatureVerifier(bot.settings.slack_signing_secret.get_secret_value())
    seen = SeenRequests(bot.store)

    async def slack_events(request: web.Request) -> web.Response:
        # The signature is checked on the raw body before Bolt parses it: Bolt parses first
        # (a form ``payload`` or a JSON body that does not decode raised before its own check:
        # a 500 and a logged trace for any unauthenticated sender).
        if not _signed_headers_well_formed(request.headers) or not _signed(
                verifier, await request.read(), request.headers):
            return web.json_response({"error": "invalid request"}, status=401)
        if not await seen.first_time(request.headers["X-Slack-Signature"]):
            # A played-back copy of a request already run: valid for five minutes by its
            # signature alone, so refused here (bot.replays), nothing run.
            log.warning("replayed slack request refused")
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt_request = await to_bolt_request(request)
        except (UnicodeDecodeError, LookupError):  # a body no charset reads: not Slack's
            return web.json_response({"error": "invalid request"}, status=401)
        except (ValueError, AttributeError, TypeError):
            # Signed, yet a form payload or JSON body that does not parse, or is no object
            # (Bolt's parsing raises these on it): a bad request, not a crash.
            return web.json_response({"error": "malformed body"}, status=400)
        bolt_response = await app.async_dispatch(bolt_request)
        return await to_aiohttp_response(bolt_response)

    return slack_events


def _healthz(bot: Bot, connected: Connected | None) -> Handler:
    """``GET /healthz``: 503 while the Socket Mode link is down; Redis down only degrades."""

    async def healthz(_: web.Request) -> web.Response:
        socket_ok = True if connected is None else await connected()
        try:
            await bot.store.ping()
            redis = "ok"
        except StoreUnavailable:
            redis = "unavailable (degraded: no history)"
        body = {"status": "ok" if socket_ok else "socket mode disconnected",
                "socket_mode": connected is not None, "redis": redis,
                "slack": bot.health.summary()}
        return web.json_response(body, status=200 if socket_ok else 503)

    return healthz


def _signed_headers_well_formed(headers: Mapping[str, str]) -> bool:
    """Slack's request timestamp is decimal seconds and its signature ASCII; anything else is
    refused here (401) as Bolt refuses a bad signature: ``SignatureVerifier`` would raise on
    it (``int('abc')``, ``hmac.compare_digest`` of non-ASCII text), a 500 and a logged trace
    for any unauthenticated sender."""
    stamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    return stamp.isascii() and stamp.isdigit() and len(stamp) <= 12 and signature.isascii()


def _signed(verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str]) -> bool:
    """Slack's signature over the raw body, and its timestamp within five minutes (slack_sdk's
    check, as Bolt's); a body that is not UTF-8 is no Slack request."""
    try:
        return verifier.is_valid(body=body,
                                 timestamp=headers.get("X-Slack-Request-Timestamp", ""),
                                 signature=headers.get("X-Slack-Signature", ""))
    except UnicodeDecodeError:
        return False


class ListenError(UserError):
    """The HTTP listener could not bind: the user's port or host, not a bug."""


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def build_bot(config_path: Path, settings: Settings) -> Bot:
    """Compose the production bot: Redis store, Sweeper re-reading the config, Web API client."""
    source = ConfigSource(lambda: load_config(config_path))
    config = source.load()  # fail fast, with line and key, before binding a port
    telemetry = Telemetry()
    store = RedisStore.from_config(config.redis, password=_secret(settings.redis_password),
                                   sentinel_password=_secret(settings.redis_sentinel_password))
    sweeper = Sweeper(source.load, state=store, keep_connections=True)
    client = make_web_client(settings, telemetry)
    client.bound(config.slack.api_timeout_seconds)
    return Bot(settings=settings, config=source, sweeper=sweeper, store=store, client=client,
               telemetry=telemetry)


async def run_bot(config_path: Path, *, port: int) -> None:
    """``jobtables bot``: serve until SIGTERM/SIGINT."""
    configure_logging()
    settings = Settings.from_env()
    bot = build_bot(config_path, settings)
    app = build_app(bot)
    socket = None
    if settings.slack_app_token is not None:
        socket = AsyncSocketModeHandler(app, settings.slack_app_token.get_secret_value())
    web_app = build_web_app(bot, app,
                            connected=socket.client.is_connected if socket else None)
    runner = web.AppRunner(web_app)
    await runner.setup()
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    try:
        try:
            await web.TCPSite(runner, host=settings.host, port=port).start()
        except OSError as exc:  # the port is taken, or JOBTABLES_HOST names no address here
            raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc} "
                              "(--port, JOBTABLES_HOST)") from exc
        bound = _bound_port(runner, port)
        # Said whatever the log level: with --port 0 the system picks it, and a supervisor
        # or a test must learn it from here.
        print(f"jobtables bot listening on http://{host}:{bound}/slack/events "
              f"(GET /healthz, /metrics)", file=sys.stderr, flush=True)
        log.info("bot listening", host=settings.host, port=bound, socket_mode=socket is not None)
        if socket is not None:
            await socket.connect_async()  # type: ignore[no-untyped-call]  # slack_bolt untyped
        # Cancels a previous process left half-done are settled before anything new runs.
        bot.tasks.spawn(bot.actions.reconcile(), name="reconcile interrupted cancels")
        bot.tasks.spawn(make_scheduler(bot).run_forever(), name="scheduled sweeps")
        await _until_signalled()
    finally:
        await _shutdown(bot, runner, socket)


def _bound_port(runner: web.AppRunner, asked: int) -> int:
    """The port the listener got (the system's choice for port 0)."""
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2 and isinstance(address[1], int):
            return address[1]
    return asked


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _shutdown(bot: Bot, runner: web.AppRunner,
                    socket: AsyncSocketModeHandler | None) -> None:
    await bot.tasks.aclose()
    if socket is not None:
        await socket.close_async()  # type: ignore[no-untyped-call]  # slack_bolt untyped
    await runner.cleanup()
    await bot.aclose()
    log.info("bot stopped")
