"""What ``/jobs`` and ``/job`` answer, and the sweep they answer from.

Policy: a command was acked before it gets here (``bot.app``). ``/jobs`` answers from the
cached sweep when it is younger than ``slack.cache_seconds`` (its age shown), else from a live
sweep acked first with "Sweeping N clusters…", shared between callers and replicas
(``bot.shared_sweep``); what does not fit the ephemeral replies goes to the user's DM as a
file, a few uploads at a time (:data:`UPLOADS_AT_ONCE`). ``/job`` asks for that job only
unless a fresh cached sweep holds it, and reads its whole stored window for the chart. A
user error is one ephemeral line; a bug is logged with a reference id, the user sees the id.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError

from bot import deep_probe
from bot.cached import SweepDoc
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
from bot.delivery import NETWORK_ERRORS, dm_channel
from bot.errors import JobNotFoundError, UserError
from bot.messages import MAX_RESPONSES, code, error_text, job_messages, share_button, sweep_header
from bot.shared_sweep import cache_stamp, cache_ttl_s, shared_live_doc
from bot.store import StoreUnavailable
from bot.sweep_result import SweepResult
from report.findings import normalized_history
from report.models import JobDetail
from report.render import render_job_detail

if TYPE_CHECKING:
    from bot.app import Bot, Respond
    from bot.config import Config


log = structlog.get_logger(__name__)


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
    """Answer ``/jobs``: the tables of a fresh cached sweep, else of one live sweep (said
    first), as ephemeral replies (the whole answer to the invoker's DM when cut); asked in
    the alert channel unfiltered, the tables are posted there too (the digest's rule)."""
    config = bot.config.current()
    # A filter is checked before any sweep: an unknown cluster or unmapped user is a typo.
    if query.filtered:
        job_filter(query, user_id or "", config)
    acked: list[bool] = []  # a response_url takes five posts: the ack is one of them

    async def sweeping(clusters: int) -> None:
        acked.append(await respond(
            text=f"Sweeping {clusters} cluster{'s' if clusters != 1 else ''}…",
            response_type="ephemeral"))

    live, doc, age = await _jobs_doc(bot, config, sweeping)
    if acked and not acked[0]:
        return  # that response_url is gone (logged and counted once): nobody to answer
    bot.telemetry.commands.labels(command="/jobs", source="cache" if age is not None else
                                  "live").inc()
    view = View(query=query, invoker=user_id or "", config=config, width=config.report.width)
    await _reply_tables(bot, doc, view, age, respond, posted=len(acked), user_id=user_id)
    if channel_id and channel_id == config.slack.channel and not query.filtered \
            and not query.bucket:
        # "Whenever someone asks" (digest.py), once per sweep: decoded only to be posted.
        if live is not None:
            await bot.digest.post_tables(live, config)
        else:
            await bot.digest.post_tables(doc.head, config, whole=lambda: bot.cache.result(doc))


async def _jobs_doc(bot: Bot, config: Config, sweeping: Callable[[int], Awaitable[Any]],
                    ) -> tuple[SweepResult | None, SweepDoc, float | None]:
    """``(live result, doc, age)``: the cached sweep while fresh (no live result), else one
    live sweep across replicas (``sweeping`` told first; age ``None`` if this replica's)."""
    fresh = await bot.cache.fresh(config.slack.cache_seconds)
    if fresh is not None:
        doc, age = fresh
        return None, doc, age
    # What is cached as this replica decides to sweep: a sweep published after it (another
    # replica's, while this one acks) is the one to answer from (bot.shared_sweep).
    before = await cache_stamp(bot.cache)
    await _before_live(bot, sweeping)
    # One live sweep across replicas (bot.shared_sweep): its tables are posted once.
    return await shared_live_doc(bot.cache, bot.store, lambda: live_doc(bot), config=config,
                                 replica=bot.replica, before=before)


async def _reply_tables(bot: Bot, doc: SweepDoc, view: View, age: float | None,
                        respond: Respond, *, posted: int, user_id: str | None) -> None:
    """The view's tables as ephemeral replies (``posted``: the response_url's posts spent
    already), and the whole answer to ``user_id``'s DM as a file when they were cut."""
    # Tables are rendered once per sweep and query, off the event loop (bot.cached): a
    # 5,000-job answer is 2 s of CPU, and fifty callers share one rendering.
    rendered = await bot.cache.tables(doc, view)
    replies = await asyncio.to_thread(
        jobs_replies, rendered.tables, header=sweep_header(doc.head, age_s=age),
        bucket=view.query.bucket, limit=MAX_RESPONSES - posted,
        what="matching" if view.query.filtered else None)
    for message in replies:
        if not await respond(text=message.text, blocks=message.blocks,
                             response_type="ephemeral"):
            break  # that response_url is gone; the rest would fail the same way
    if replies and replies[-1].cut and user_id:
        # More than a response_url takes: the whole answer goes to the invoker's DM as a file.
        text = await bot.cache.text(doc, view)
        await upload_to_dm(bot, user_id, content=text, filename="jobs.txt",
                           title="Job tables", comment="The whole `/jobs` answer")


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
        # A refusal or an unreachable host (the Web API's or the upload URL's) is logged and
        # counted once by the client (bot.delivery) and never becomes an error reply under an
        # answer already sent.
        with contextlib.suppress(SlackApiError, SlackClientError, *NETWORK_ERRORS):
            await bot.client.files_upload_v2(
                channel=channel, content=data, filename=filename,
                title=title, initial_comment=comment,
            )


def upload_stem(cluster: str, job_id: str) -> str:
    """The name of a ``/job`` upload (``<cluster>-<id>``): a JobSet's id ``jobset/NAME``
    written ``jobset_NAME``, so that no ``/`` reaches a file name."""
    return f"{cluster}-{job_id}".replace("/", "_")
