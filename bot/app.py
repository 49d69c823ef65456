"""The Bolt app: slash commands, buttons, and the scheduled sweep post, wired to one :class:`Bot`.

Policy: every handler calls ``ack()`` first, before any probe, then hands the work to the
bot's :class:`~bot.tasks.TaskSet` so nothing runs untracked and a crash is logged at once.
Answers go through ``respond()`` (ephemeral), wrapped so a failed ``response_url`` POST is
logged and counted. ``/jobs`` answers from the cached sweep in Redis when it is younger than
``slack.cache_seconds`` (its age is shown), else from a live sweep, which the Sweeper shares
between concurrent callers; the cache's document, its stamp and the renderings shared per
query live in bot/cached.py, big sweeps' CPU stages in a worker process (bot/offload.py).
A user error is a short ephemeral line; a bug is logged with a reference id and the user sees
only that id. Slack's 429s are retried by slack_sdk's own retry
handlers, honouring ``Retry-After``. A scheduled sweep's steps (follow-ups, the day's parent and
its thread (bot/digest.py), collapse alerts, job-end DMs (bot/notify.py), cancel
reconciliation) are independent: a failed channel post never stops the alerts. ``/jobs`` takes
filters (``mine``, ``@user``, ``cluster:NAME``) matched through the per-cluster owners
(bot/owners.py); a live sweep is acked first with "Sweeping N clusters…". The App Home tab and
"Share to channel" live in bot/home.py and bot/share.py, the slash commands' answers in
bot/slash_answers.py, the scheduled sweep post in bot/scheduled.py. Config is read from the
bot's one :class:`~bot.config_source.ConfigSource`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import authorization, deep_probe, home, share
from bot.action_records import SweepEngine
from bot.actions import ActionHandler
from bot.alerts import Alerter
from bot.breaker import posting
from bot.cached import SweepCache
from bot.commands import (
    SlashPayload,
)
from bot.config_source import ConfigSource
from bot.delivery import (
    BoundedRateLimitRetryHandler,
    CountingWebClient,
    SlackHealth,
)
from bot.digest import Digest
from bot.incidents import FollowUps
from bot.lease import TickLease
from bot.logs import drop_message
from bot.messages import (
    ACKNOWLEDGE,
    CANCEL,
    KEEP,
    SNOOZE,
)
from bot.notify import Notifier
from bot.offload import Offload, tune_interpreter
from bot.payloads import payload_problem
from bot.presses import ActionPress
from bot.replays import SeenRequests
from bot.responder import Responder
from bot.settings import Settings
from bot.slash_answers import UPLOADS_AT_ONCE, answer_command
from bot.store import RedisStore
from bot.tasks import TaskSet
from bot.telemetry import Telemetry

log = structlog.get_logger(__name__)

Respond = Callable[..., Awaitable[Any]]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def make_web_client(
    settings: Settings,
    telemetry: Telemetry,
    *,
    health: SlackHealth | None = None,
    retry_handlers: list[AsyncRetryHandler] | None = None,
) -> CountingWebClient:
    """The Web API client: ``SLACK_API_URL``, slack_sdk's connection retries and 429 retries
    bounded in time (``bot.delivery.BoundedRateLimitRetryHandler``)."""
    handlers = retry_handlers if retry_handlers is not None else [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        BoundedRateLimitRetryHandler(max_retry_count=3),
    ]
    return CountingWebClient(
        telemetry=telemetry,
        health=health if health is not None else SlackHealth(),
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        retry_handlers=handlers,
    )


@dataclass
class Bot:
    """Everything the handlers share; one per process (tests build several)."""

    settings: Settings
    config: ConfigSource
    sweeper: SweepEngine
    store: RedisStore
    client: AsyncWebClient
    telemetry: Telemetry = field(default_factory=Telemetry)
    tasks: TaskSet = field(default_factory=TaskSet)
    clock: Callable[[], datetime] = _utcnow
    replica: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    lease: TickLease = field(default_factory=TickLease)
    """What this replica knows of the tick lock, for outages (``bot.lease``)."""
    untold: list[str] = field(default_factory=list)
    """Collapse lines of alerts sent with no thread to tell them in (claimed ``alone``):
    told in the next thread this replica posts; dropped if another replica leads."""
    offload: Offload = field(default_factory=Offload)
    """Where big sweeps are encoded, decoded and rendered (``bot.offload``)."""
    probing: set[str] = field(default_factory=set)
    """``cluster:job`` of the Deep-probe presses this process is running (``bot.deep_probe``:
    one per job, the Redis lock's stand-in while Redis is down)."""

    def __post_init__(self) -> None:
        if isinstance(self.client, CountingWebClient):
            self.client.clock = self.clock  # a Retry-After counted on the bot's clock
        self.health: SlackHealth = getattr(self.client, "health", None) or SlackHealth()
        self.cache = SweepCache(store=self.store, offload=self.offload,
                                telemetry=self.telemetry, clock=self.clock)
        """The sweep cache, its document in memory and its shared renderings."""
        self.uploads = asyncio.Semaphore(UPLOADS_AT_ONCE)
        """DM file uploads in flight (``upload_to_dm``)."""
        self.alerter = Alerter(store=self.store, client=self.client, clock=self.clock)
        self.actions = ActionHandler(config=self.config, sweeper=self.sweeper, store=self.store,
                                     client=self.client, telemetry=self.telemetry,
                                     clock=self.clock)
        self.followups = FollowUps(store=self.store, clock=self.clock)
        self.digest = Digest(store=self.store, client=self.client, clock=self.clock)
        self.notifier = Notifier(store=self.store, client=self.client, clock=self.clock)
        self.triggers = SeenRequests(self.store)
        """The ``trigger_id``s of the commands and presses run (:meth:`first_delivery`)."""

    async def first_delivery(self, body: dict[str, Any]) -> bool:
        """Whether this command or press is run here: not when it is Slack's retry of one
        already run (``X-Slack-Retry-Num``, after an ack Slack did not see in time; in Socket
        Mode, an envelope sent again). A retry is the same payload signed anew, so the
        signature check lets it through; its ``trigger_id`` (one per invocation) is the key,
        remembered here and in Redis (``bot.replays``: every replica refuses it)."""
        trigger = body.get("trigger_id")
        if not isinstance(trigger, str) or not trigger:
            return True
        if await self.triggers.first_time(f"trigger:{trigger}"):
            return True
        log.info("slack retry of a request already run; not run again")
        return False

    def spawn_once(self, body: dict[str, Any], work: Callable[[], Awaitable[None]], *,
                   name: str) -> None:
        """Run ``work()`` as a tracked task unless ``body`` is Slack's retry of a request
        already run (:meth:`first_delivery`), checked in the task: the ack leaves at once."""
        async def once() -> None:
            if await self.first_delivery(body):
                await work()

        self.tasks.spawn(once(), name=name)

    def responder(self, respond: Respond, surface: str) -> Responder:
        """``respond`` with its failures logged, counted and shown in ``/healthz``."""
        return Responder(respond, telemetry=self.telemetry, health=self.health, surface=surface,
                         timeout_s=float(self.client.timeout))

    async def aclose(self) -> None:
        """Release the sweeper's probes, Redis and the Web API session."""
        await self.tasks.aclose()
        closer = getattr(self.sweeper, "aclose", None)
        if closer is not None:
            await closer()
        await self.offload.aclose()
        await self.store.aclose()
        if self.client.session is not None and not self.client.session.closed:
            await self.client.session.close()


class CheckedApp(AsyncApp):
    """Bolt's app, refusing a body that is not the shape Slack sends (``bot.payloads``) with a
    400 before any matcher or listener reads it: HTTP (after the signature check) and Socket
    Mode envelopes alike."""

    async def async_dispatch(self, req: AsyncBoltRequest) -> BoltResponse:
        problem = payload_problem(req.body)
        if problem is not None:
            log.warning("slack payload refused", problem=problem)
            return BoltResponse(status=400, body='{"error": "malformed payload"}',
                                headers={"content-type": "application/json"})
        return await super().async_dispatch(req)


def build_app(bot: Bot) -> AsyncApp:
    """The Bolt app with ``/jobs``, ``/job`` and the collapse buttons registered.

    ``process_before_response``: Bolt answers Slack when the listener returns rather than
    polling every 10 ms for ``ack()`` from a listener task (the default); every listener here
    acks and hands its work to a tracked task, so it returns at once and the ack leaves
    without that wait. A listener that fails after its ``ack()`` still answers Slack with that
    ack (logged; a 500 would show the user an error for work that is tracked anyway).
    """
    tune_interpreter()  # the loop thread takes the GIL back sooner from parsing threads
    # Bolt reads SLACK_BOT_TOKEN from the environment (where deployments give it to
    # bot.settings) and warns, at every start, that the client given wins: as meant.
    drop_message("slack_bolt.AsyncApp", warning_client_prioritized_and_token_skipped())
    app = CheckedApp(
        client=bot.client,
        signing_secret=bot.settings.slack_signing_secret.get_secret_value(),
        name="jobtables",
        process_before_response=True,
    )

    async def on_command(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                         respond: Respond) -> None:
        await ack()
        payload = SlashPayload.model_validate(body)
        bot.spawn_once(body, lambda: giving_up_together(answer_command(
            bot, payload, bot.responder(respond, payload.command))),
            name=f"command {payload.command}")

    async def on_action(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                        respond: Respond) -> None:
        await ack()
        press = ActionPress.from_body(body)
        bot.spawn_once(body, lambda: giving_up_together(handle_press(
            bot, press, bot.responder(respond, press.action_id))),
            name=f"action {press.action_id}")

    async def after_ack(error: Exception, request: AsyncBoltRequest) -> BoltResponse | None:
        log.error("listener failed", exc_info=error)
        acked: BoltResponse | None = request.context.ack.response
        return acked  # None (not acked): Bolt's 500 stands

    # auth.test asked in the background, never before an ack (bot.authorization).
    authorization.install(app, lambda work: bot.tasks.spawn(work, name="auth.test"))
    app.error(after_ack)
    app.command("/jobs")(on_command)
    app.command("/job")(on_command)
    for action_id in (CANCEL, KEEP, SNOOZE, ACKNOWLEDGE):
        app.action(action_id)(on_action)
    deep_probe.register(app, bot)  # the Deep-probe button (bot/deep_probe.py)
    home.register(app, bot)  # the App Home tab (bot/home.py)
    share.register(app, bot)  # "Share to channel" on /job answers (bot/share.py)
    return app


async def giving_up_together(work: Awaitable[None]) -> None:
    """A command's or a press's work, whose Web API calls give up together once one request
    timed out (``bot.delivery.posting``): ``/jobs``' tables in the thread, a press's edit and
    its thread line do not wait out the bound one by one, holding the channel's pacing."""
    with posting():
        await work


async def handle_press(bot: Bot, press: ActionPress, respond: Responder) -> None:
    """A button press; a completed cancel is then told in the day's thread (bot/digest.py)."""
    await bot.actions.handle(press, respond)
    if press.action_id == CANCEL and ":" in press.value:
        # The audit trail (written by the checked press) says whether it cancelled.
        cluster, _, job_id = press.value.partition(":")
        await bot.digest.after_cancel(bot.config.current(), cluster, job_id, press.user_id)


__all__ = ["Bot", "build_app", "make_web_client"]
