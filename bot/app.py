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
"Share to channel" live in bot/home.py and bot/share.py. Config is read from the bot's one
:class:`~bot.config_source.ConfigSource`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import deep_probe, home, share
from bot.actions import ActionHandler, SweepEngine
from bot.alerts import Alerter
from bot.cached import SweepCache, SweepDoc
from bot.cached_render import View, jobs_replies
from bot.chart import render_history_png
from bot.commands import (
    USAGE,
    HelpQuery,
    JobQuery,
    JobsQuery,
    NotifyQuery,
    SlashPayload,
    job_filter,
    parse_command,
)
from bot.config import Config
from bot.config_source import ConfigSource
from bot.delivery import (
    NETWORK_ERRORS,
    BoundedRateLimitRetryHandler,
    CountingWebClient,
    Responder,
    SlackHealth,
    dm_channel,
    posting,
)
from bot.digest import Digest
from bot.errors import JobNotFoundError, UserError
from bot.incidents import FollowUps
from bot.lease import TickLease
from bot.messages import (
    ACKNOWLEDGE,
    CANCEL,
    KEEP,
    MAX_RESPONSES,
    SNOOZE,
    code,
    collapse_line,
    config_refused_line,
    error_text,
    job_messages,
    share_button,
    sweep_header,
)
from bot.notify import Notifier
from bot.offload import Offload, tune_interpreter
from bot.owners import slack_owner
from bot.payloads import payload_problem
from bot.presses import ActionPress
from bot.refusals import refusal_news
from bot.scheduler import Scheduler
from bot.settings import Settings
from bot.shared_sweep import cache_stamp, cache_ttl_s, holding, shared_live_doc
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import SweepResult
from bot.tasks import TaskSet
from bot.telemetry import Telemetry
from report.findings import normalized_history
from report.models import JobDetail
from report.render import render_job_detail

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
        bot.tasks.spawn(giving_up_together(answer_command(
            bot, payload, bot.responder(respond, payload.command))),
            name=f"command {payload.command}")

    async def on_action(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                        respond: Respond) -> None:
        await ack()
        press = ActionPress.from_body(body)
        bot.tasks.spawn(giving_up_together(handle_press(
            bot, press, bot.responder(respond, press.action_id))),
            name=f"action {press.action_id}")

    async def after_ack(error: Exception, request: AsyncBoltRequest) -> BoltResponse | None:
        log.error("listener failed", exc_info=error)
        acked: BoltResponse | None = request.context.ack.response
        return acked  # None (not acked): Bolt's 500 stands

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


async def answer_command(bot: Bot, payload: SlashPayload, respond: Respond) -> None:
    """Answer one slash command; never raises (errors become ephemeral replies)."""
    try:
        query = parse_command(payload.command, payload.text)
        if isinstance(query, HelpQuery):
            await respond(text=USAGE, response_type="ephemeral")
        elif isinstance(query, JobsQuery):
            await answer_jobs(bot, query, respond, payload.user_id, payload.channel_id)
        elif isinstance(query, NotifyQuery):
            await respond(text=await bot.notifier.set_enabled(payload.user_id, query.on),
                          response_type="ephemeral")
        else:
            await answer_job(bot, query, payload, respond)
    except UserError as exc:
        await respond(text=error_text(str(exc)), response_type="ephemeral")
    except Exception:
        ref = uuid.uuid4().hex[:8]
        log.exception("command failed", ref=ref, command=payload.command)
        await respond(text=f"Something went wrong (reference `{ref}`); it has been logged.",
                      response_type="ephemeral")


async def current_sweep(bot: Bot, *, before_live: Callable[[int], Awaitable[Any]] | None = None
                        ) -> tuple[SweepResult, float | None]:
    """A sweep young enough to answer with (and its age in seconds), else a live one
    (``before_live(n)`` is awaited first with the number of clusters to sweep)."""
    cached = await cached_sweep(bot)
    if cached is not None:
        return cached
    await _before_live(bot, before_live)
    return await live_sweep(bot), None


async def _before_live(bot: Bot, before_live: Callable[[int], Awaitable[Any]] | None) -> None:
    if before_live is not None:
        config = bot.config.current()
        await before_live(sum(1 for c in config.clusters if getattr(c, "active", True)))


async def cached_sweep(bot: Bot) -> tuple[SweepResult, float] | None:
    """The cached sweep and its age in seconds while it is young enough, else ``None``."""
    fresh = await bot.cache.fresh(bot.config.current().slack.cache_seconds)
    if fresh is None:
        return None
    return await bot.cache.result(fresh[0]), fresh[1]


async def live_sweep(bot: Bot) -> SweepResult:
    """Sweep every cluster (shared with concurrent callers), record metrics, refresh the cache."""
    return (await live_doc(bot))[0]


async def live_doc(bot: Bot) -> tuple[SweepResult, SweepDoc]:
    """A live sweep and its document; callers sharing the sweep share one cache write."""
    result: SweepResult = await bot.sweeper.sweep()
    for facts in result.facts:
        bot.telemetry.sweep_duration.labels(cluster=facts.name).observe(result.duration_s)
        if facts.status == "unreachable":
            bot.telemetry.probe_errors.labels(cluster=facts.name).inc()
    # Kept at least long enough for a replica waiting on this sweep (bot.shared_sweep).
    doc = await bot.cache.publish(result, ttl_s=cache_ttl_s(bot.config.current()))
    return result, doc


async def answer_jobs(bot: Bot, query: JobsQuery, respond: Respond,
                      user_id: str | None = None, channel_id: str | None = None) -> None:
    config = bot.config.current()
    # A filter is checked before any sweep: an unknown cluster or unmapped user is a typo.
    if query.filtered:
        job_filter(query, user_id or "", config)
    acked: list[bool] = []  # a response_url takes five posts: the ack is one of them

    async def sweeping(clusters: int) -> None:
        acked.append(await respond(
            text=f"Sweeping {clusters} cluster{'s' if clusters != 1 else ''}…",
            response_type="ephemeral"))

    live: SweepResult | None = None
    age: float | None
    fresh = await bot.cache.fresh(config.slack.cache_seconds)
    if fresh is not None:
        doc, age = fresh
    else:
        # What is cached as this replica decides to sweep: a sweep published after it (another
        # replica's, while this one acks) is the one to answer from (bot.shared_sweep).
        before = await cache_stamp(bot.cache)
        await _before_live(bot, sweeping)
        # One live sweep across replicas (bot.shared_sweep): its tables are posted once.
        live, doc, age = await shared_live_doc(bot.cache, bot.store, lambda: live_doc(bot),
                                               config=config, replica=bot.replica,
                                               before=before)
    if acked and not acked[0]:
        return  # that response_url is gone (logged and counted once): nobody to answer
    bot.telemetry.commands.labels(command="/jobs", source="cache" if age is not None else
                                  "live").inc()
    # Tables are rendered once per sweep and query, off the event loop (bot.cached): a
    # 5,000-job answer is 2 s of CPU, and fifty callers share one rendering.
    view = View(query=query, invoker=user_id or "", config=config, width=config.report.width)
    rendered = await bot.cache.tables(doc, view)
    replies = await asyncio.to_thread(
        jobs_replies, rendered.tables, header=sweep_header(doc.head, age_s=age),
        bucket=query.bucket, limit=MAX_RESPONSES - len(acked),
        what="matching" if query.filtered else None)
    for message in replies:
        if not await respond(text=message.text, blocks=message.blocks,
                             response_type="ephemeral"):
            break  # that response_url is gone; the rest would fail the same way
    if replies and replies[-1].cut and user_id:
        # More than a response_url takes: the whole answer goes to the invoker's DM as a file.
        text = await bot.cache.text(doc, view)
        await upload_to_dm(bot, user_id, content=text, filename="jobs.txt",
                           title="Job tables", comment="The whole `/jobs` answer")
    if channel_id and channel_id == config.slack.channel and not query.filtered \
            and not query.bucket:
        # "Whenever someone asks" (digest.py), once per sweep: decoded only to be posted.
        if live is not None:
            await bot.digest.post_tables(live, config)
        else:
            await bot.digest.post_tables(doc.head, config, whole=lambda: bot.cache.result(doc))


async def job_answer(bot: Bot, query: JobQuery) -> tuple[SweepResult, float | None, JobDetail]:
    """The job from a fresh cached sweep when it is there, else that job only, asked live
    (``Sweeper.job``): a cache miss never sweeps every cluster for one job. From the cache,
    the result is the sweep's head (``bot.cached``): the worker decodes, and sends one job."""
    fresh = await bot.cache.fresh(bot.config.current().slack.cache_seconds)
    if fresh is not None:
        doc, age = fresh
        with contextlib.suppress(JobNotFoundError):  # not in the sweep: ask its cluster
            return doc.head, age, await bot.cache.job(doc, query.cluster, query.job_id)
    result = await bot.sweeper.job(query.cluster, query.job_id)
    return result, None, result.find(query.cluster, query.job_id)


async def whole_window(bot: Bot, detail: JobDetail) -> JobDetail:
    """``detail`` with its job's whole stored metric window (a sweep keeps only the last
    points of an unflagged job, ``bot.sweep.KEPT_HISTORY``); unchanged when Redis is down, or
    when the job's steps are only its points' order (``steps_unanchored``: never merged, the
    stored window is no history of this read)."""
    job = detail.report
    if detail.steps_unanchored:
        return detail
    try:
        window = await bot.store.load_history(job.cluster, job.job_id)
    except StoreUnavailable:
        return detail
    if len(window) <= len(detail.history):
        return detail
    return detail.model_copy(update={"history": normalized_history(window)})


async def answer_job(bot: Bot, query: JobQuery, payload: SlashPayload, respond: Respond) -> None:
    config = bot.config.current()
    if query.cluster is not None:
        config.cluster(query.cluster)  # an unknown cluster is a typo: answered before any sweep
    result, age, detail = await job_answer(bot, query)
    detail = await whole_window(bot, detail)
    bot.telemetry.commands.labels(command="/job", source="cache" if age is not None else
                                  "live").inc()
    png = await asyncio.to_thread(render_history_png, detail)
    note = "Metric chart sent to your DM with the bot." if png else "No metric history to chart."
    messages = await asyncio.to_thread(job_messages, detail, header=sweep_header(result, age_s=age),
                                       width=config.report.width, note=note)
    # The Deep-probe button on deep-probe rows, and "Share to channel" (bot/share.py).
    row_actions = [*deep_probe.row_actions(detail), share_button(detail)]
    if len(messages[-1].blocks) + len(row_actions) <= 50:
        messages[-1].blocks.extend(row_actions)
    for message in messages:
        if not await respond(text=message.text, blocks=message.blocks,
                             response_type="ephemeral"):
            break
    stem = upload_stem(detail.report.cluster, query.job_id)
    if messages[-1].cut:
        text = await asyncio.to_thread(render_job_detail, detail, width=config.report.width)
        await upload_to_dm(bot, payload.user_id, content=text, filename=f"{stem}.txt",
                           title=f"{stem} in depth", comment=f"The whole `/job` answer for "
                           f"`{code(stem)}`")
    if png:
        await upload_to_dm(bot, payload.user_id, content=png, filename=f"{stem}.png",
                           title=f"{stem} metric history",
                           comment=f"Metric history of `{code(stem)}`")


UNTOLD_KEPT = 200
"""Thread lines (collapse lines, a refused config edit) kept for the next thread reply when
Slack did not take the sweep's: the newest, should Slack refuse the channel for days."""
UPLOADS_AT_ONCE = 4
"""DM uploads in flight at once: a 5,016-job answer's file is 1.7 MB, and a burst of ``/jobs``
(each answered at once from the shared rendering) held one copy each in flight, in the bench
over a hundred: 380 MB more at peak and second-long stalls of the event loop."""


async def upload_to_dm(bot: Bot, user_id: str, *, content: bytes | str, filename: str,
                       title: str, comment: str) -> None:
    """Upload a file (a chart, an answer too long for messages) to the invoker's DM; text is
    encoded only when its turn comes (``UPLOADS_AT_ONCE``: waiting uploads hold no copy)."""
    async with bot.uploads:
        data = content.encode() if isinstance(content, str) else content
        channel = await dm_channel(bot.client, user_id)
        if channel is None:
            return  # logged and counted once by the client; the answer itself was sent
        try:
            await bot.client.files_upload_v2(
                channel=channel, content=data, filename=filename,
                title=title, initial_comment=comment,
            )
        except (SlackApiError, SlackClientError):
            pass  # a Web API call's refusal: logged and counted once by the client
        except NETWORK_ERRORS as exc:
            # The bytes go to the upload URL outside the Web API client's accounting: an
            # unreachable upload host is logged and counted here, and never becomes an
            # error reply under an answer already sent.
            error = type(exc).__name__
            bot.telemetry.slack_api_errors.labels(method="files.upload", error=error).inc()
            bot.health.record("files.upload", error, datetime.now(UTC))
            log.error("slack call failed", method="files.upload", error=error)


def upload_stem(cluster: str, job_id: str) -> str:
    """The name of a ``/job`` upload (``<cluster>-<id>``): a JobSet's id ``jobset/NAME``
    written ``jobset_NAME``, so that no ``/`` reaches a file name."""
    return f"{cluster}-{job_id}".replace("/", "_")


async def scheduled_sweep(bot: Bot, interval: int, *, retry: bool = False) -> bool:
    """Interval ``interval``'s sweep: collapse DMs (first: the time-critical messages),
    follow-ups, the day's parent and thread (the alerts told in it), job-end DMs, deep
    probes, reconcile. False when it should be
    tried again soon (``bot.scheduler``; ``retry``: this is that try): a cluster could not be
    read, Redis could not serve the history, or Slack refused a thread reply, the parent's
    edit, a collapse alert, the alerts' thread reply or a job-end DM.

    Each step runs whatever happened to the one before: Slack refusing the channel post (bot
    not invited, rate-limited, message too long) must not silence a collapse alert. A hung
    Web API costs the sweep one request's bound, not one per message: once a request timed
    out, the sweep's other messages give up unsent (``bot.delivery.posting``) and its retry
    sends them.
    """
    config = bot.config.current()
    async with holding(bot.store, config, bot.replica):  # /jobs elsewhere answers from it
        result = await live_sweep(bot)
    config = bot.config.current()
    if isinstance(bot.client, CountingWebClient):
        bot.client.bound(config.slack.api_timeout_seconds)  # re-read with the config
    with posting():
        unsent = await _tell_sweep(bot, result, config, interval, retry=retry)
    log.info("scheduled sweep done", interval=interval, jobs=len(result.report.jobs),
             fallback=bot.lease.fallback(interval), retry=retry)
    unread = [c.name for c in result.report.clusters if c.status == "unreachable"]
    return not (unread or result.degraded or unsent)


async def _tell_sweep(bot: Bot, result: SweepResult, config: Config, interval: int, *,
                      retry: bool) -> bool:
    """The sweep's messages, in :func:`scheduled_sweep`'s order; True when some were not
    delivered (kept for the retry)."""
    details = list(result.details.values())
    # Claimed without the lock by a replica that never saw who leads: alerts only, so an
    # outage neither silences a collapse nor doubles the channel thread (bot.lease).
    alone = bot.lease.fallback(interval) == "alone"
    # The collapse alerts first: they are the time-critical messages, and the period's full
    # tables (dozens of paced posts at thousands of jobs) must not hold them back a minute.
    told = []
    for ref in await bot.alerter.process(details, config, facts=result.facts):
        cluster, _, job_id = ref.partition(":")
        user = result.details[(cluster, job_id)].report.user
        told.append(collapse_line(ref, user, mapped=slack_owner(config, cluster, user) is not None,
                                  by_dm=ref in bot.alerter.by_dm))
    lines = [] if alone else await bot.followups.process(result, config)
    changes = None if alone else await bot.digest.publish(result, config, lines, retry=retry,
                                                          interval=interval)
    if alone:  # no thread to tell them in yet: the next one this replica posts does
        bot.untold.extend(told)
        told = []
    else:
        told, bot.untold = [*bot.untold, *told], []
    refused = None if alone else await refusal_news(bot.config, bot.store)  # an edit refused
    if refused is not None:
        told.append(config_refused_line(refused))
    # One reply for the sweep's alerts, not one each; one Slack did not take is kept.
    unnoted = bool(told) and bool(config.slack.channel) and not await bot.digest.notes(
        config, told)
    if unnoted:
        bot.untold = told[-UNTOLD_KEPT:]
    if changes is not None:
        # job-end DMs (bot/notify.py)
        await bot.notifier.process(changes, result, config, retry=retry)
        await deep_probe.after_sweep(bot, result, config)  # offer / auto-run, once per run
        await bot.actions.reconcile()
    return unnoted or bool(bot.alerter.undelivered) or (changes is not None and (
        bot.digest.undelivered or bot.notifier.undelivered))


async def claim_interval(bot: Bot, interval: int, ttl_s: float) -> bool:
    """The tick lock; while Redis is unreachable, the fallback of ``bot.lease`` decides.

    True means: run this interval's scheduled sweep (degraded, if ``bot.lease`` says so).
    """
    # What this replica told during an outage, written back before anyone reads it.
    await bot.digest.flush()
    await bot.alerter.flush()
    try:
        won = await bot.store.claim_tick(interval, ttl_s=ttl_s, owner=bot.replica)
    except StoreUnavailable as exc:
        bot.telemetry.store_errors.inc()
        role = bot.lease.unreachable(interval)
        log.warning("tick lock unavailable", interval=interval, fallback=role, error=str(exc))
        return role != "follow"
    bot.lease.decided(interval, won)
    if not won:
        bot.untold.clear()  # another replica leads: its thread is the channel's now
    return won


def make_scheduler(
    bot: Bot,
    *,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Scheduler:
    """Scheduled sweeps every ``slack.sweep_every_minutes`` (re-read with the config)."""

    async def claim(interval: int, ttl_s: float) -> bool:
        return await claim_interval(bot, interval, ttl_s)

    async def run(interval: int, retry: bool) -> bool:
        return await scheduled_sweep(bot, interval, retry=retry)

    return Scheduler(
        every_s=lambda: bot.config.current().slack.sweep_every_minutes * 60,
        claim=claim, run=run, clock=clock or bot.clock, sleep=sleep,
    )


__all__ = ["Bot", "build_app", "make_scheduler", "make_web_client", "scheduled_sweep"]
