"""The day's message: one parent per period, edited in place, with only changes in its thread.

Policy (issue 13; Robusta's pattern): a scheduled sweep never posts a fresh set of tables.
Time is cut into UTC-aligned periods of ``[digest] period_hours`` (default a day). The first
sweep of a period posts the period's *parent* message (the one-line summary per bucket, the
counts, the time it is "as of") and puts the full tables in its thread; every later sweep
edits that parent with ``chat.update`` and adds one thread reply listing what changed since the
last sweep (started, finished, failed, collapsed, restarted, stalled, recovered, cancelled),
with those jobs' rows. A sweep in which nothing changed posts nothing. The full tables go into
the thread again when someone asks (``/jobs`` in the channel, once per sweep) and every
``full_tables_every`` sweeps when that is set. Arrays and grids are grouped
(:mod:`report.grouping`) in the parent, the tables and the change rows.

State lives in Redis (documents under ``digest:``, each with a TTL): the parent of each
(channel, period) and the last sweep's job snapshots. A restarted bot or another replica
therefore edits the same parent and repeats no change. The snapshots are saved *before* the
change reply is posted: a crash between the two loses one reply rather than repeating it.
While Redis is down the process keeps its own copy (it cannot know about other replicas).
The very first sweep (no snapshots anywhere) is a baseline and reports no changes.

Posts to one channel are paced (at least ``pace_s`` apart, Slack's ~1 message per second per
channel); a failed post is logged and never stops the posts after it. All text from clusters
is escaped for mrkdwn (``report.chunks.escape_mrkdwn``); the only mentions are the ones built
here from configured Slack ids.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config
from bot.scheduler import interval_number, interval_start
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import SweepResult
from report.changes import Change, Snapshot, decode_key, diff, encode_key, merged_lines, snapshots
from report.chunks import escape_mrkdwn, slack_messages, summary_lines
from report.grouping import group_report, pending_task_counts
from report.models import JobDetail, Report
from report.tables import render_tables

log = structlog.get_logger(__name__)

SEEN = "digest:seen"
SLACK_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
"""A Slack user id as configured; anything else is never turned into a mention."""


def mention(user: str | None) -> str | None:
    return f"<@{user}>" if user and SLACK_ID.match(user) else None


def collapse_line(ref: str, owner: str | None) -> str:
    """The thread's line when a collapse DM goes out."""
    who = mention(owner)
    told = f"owner {who} told" if who else "owner unknown, posted in the channel"
    return f"🚨 collapse on `{escape_mrkdwn(ref)}`, {told}"


def cancel_line(ref: str, actor: str, evidence: str) -> str:
    """The thread's line when a cancel from a button completed."""
    who = mention(actor) or escape_mrkdwn(actor)
    return f"🛑 `{escape_mrkdwn(ref)}` cancelled by {who}, evidence at `{escape_mrkdwn(evidence)}`"


class Pacer:
    """Keeps posts to one channel at least ``gap_s`` apart (and in order)."""

    def __init__(self, gap_s: float, *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.gap_s = gap_s
        self._monotonic = monotonic
        self._sleep = sleep
        self._last: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def slot(self, channel: str) -> Any:
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            last = self._last.get(channel)
            if last is not None:
                wait = self.gap_s - (self._monotonic() - last)
                if wait > 0:
                    await self._sleep(wait)
            try:
                yield
            finally:
                self._last[channel] = self._monotonic()


def parent_text(report: Report, *, period_start: datetime, now: datetime,
                period_hours: float, sweeps: int) -> str:
    """The parent message: title with counts, one line per bucket, the time it is as of."""
    states = Counter(j.state.value.lower() for j in report.jobs)
    counts = " · ".join(f"{n} {s}" for s, n in states.most_common())
    day = period_start.strftime("%a %d %b %Y") if period_hours >= 24 else (
        period_start.strftime("%a %d %b %Y %H:%MZ"))
    title = f"*Jobs · {day} (UTC)* — {len(report.jobs)} jobs" + (f": {counts}" if counts
                                                                   else "")
    grouped, _ = group_report(report, {}, for_counts=True)
    lines = [escape_mrkdwn(line) for line in summary_lines(grouped)]
    foot = f"_as of {now:%H:%M}Z · sweep {sweeps} of this period · changes in the thread_"
    return "\n".join([title, *lines, foot])[:2900]


def _sub_report(result: SweepResult, keys: set[tuple[str, str]]) -> tuple[Report, dict[
        tuple[str, str], JobDetail]]:
    report = result.report.model_copy(update={
        "jobs": [j for j in result.report.jobs if (j.cluster, j.job_id) in keys], "grid": []})
    details = {k: d for k, d in result.details.items() if k in keys}
    return report, details


class Digest:
    """Publishes each scheduled sweep into the period's parent message and thread."""

    def __init__(self, *, store: RedisStore, client: AsyncWebClient,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 pacer: Pacer | None = None) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self.pacer = pacer or Pacer(1.0)
        self._local: dict[str, Any] = {}
        """Documents this process wrote, for while Redis is unavailable."""

    # -- state --------------------------------------------------------------------------------

    async def _get(self, name: str) -> Any:
        try:
            return await self._store.get_doc(name)
        except StoreUnavailable as exc:
            log.warning("digest state unavailable; using process memory", error=str(exc))
            return self._local.get(name)

    async def _put(self, name: str, value: Any, *, ttl_s: float) -> None:
        self._local[name] = value
        try:
            await self._store.put_doc(name, value, ttl_s=ttl_s)
        except StoreUnavailable as exc:
            log.warning("digest state kept in process memory only", error=str(exc))

    @staticmethod
    def _period_s(config: Config) -> float:
        return config.digest.period_hours * 3600

    def _ttl(self, config: Config) -> float:
        # Kept two periods (and at least three days) so a late note still finds its parent.
        return max(2 * self._period_s(config), 72 * 3600)

    def _parent_name(self, channel: str, config: Config) -> tuple[str, int]:
        period = interval_number(self._clock(), self._period_s(config))
        return f"digest:parent:{channel}:{period}", period

    # -- posting ------------------------------------------------------------------------------

    async def _call(self, method: str, channel: str, **kwargs: Any) -> dict[str, Any] | None:
        """One paced Web API call; a failure is logged and answered with ``None``."""
        async with self.pacer.slot(channel):
            try:
                api = getattr(self._client, method)
                response = await api(channel=channel, **kwargs)
            except (SlackApiError, SlackClientError) as exc:
                log.error("digest post failed", method=method, channel=channel, error=str(exc))
                return None
        return dict(response.data) if isinstance(response.data, dict) else {}

    async def _thread(self, channel: str, ts: str, report: Report,
                      details: dict[tuple[str, str], JobDetail], *, header: str | None,
                      width: int, tasks: dict[tuple[str, str], int]) -> int:
        """Tables (grouped) as thread replies under ``ts``; returns the replies posted."""
        grouped, shown = group_report(report, details, pending_tasks=tasks)
        tables = await asyncio.to_thread(render_tables, grouped, shown, width=width)
        if not tables:
            messages = slack_messages([], header=header or "No active or recent jobs.")
        else:
            messages = slack_messages(tables, header=header)
        posted = 0
        for message in messages:
            if await self._call("chat_postMessage", channel, thread_ts=ts, text=message.text,
                                blocks=message.blocks):
                posted += 1
        return posted

    # -- the scheduled sweep ------------------------------------------------------------------

    async def publish(self, result: SweepResult, config: Config,
                      extra: Sequence[str] = ()) -> list[Change]:
        """Edit (or open) the period's parent, thread what changed; return the changes.

        ``extra``: the sweep's follow-up lines (failure diagnoses, cleanups), added to the
        same reply so one sweep makes at most one change reply.
        """
        seen = await self._get(SEEN)
        previous: dict[tuple[str, str], Snapshot] | None = None
        if isinstance(seen, dict) and isinstance(seen.get("jobs"), dict):
            previous = {decode_key(k): Snapshot.model_validate(v)
                        for k, v in seen["jobs"].items()}
        changes = diff(previous, result.report) if previous is not None else []
        now = self._clock()
        await self._put(SEEN, {"at": now.isoformat(), "jobs": {
            encode_key(k): s.model_dump(mode="json")
            for k, s in snapshots(result.report).items()}}, ttl_s=self._ttl(config))
        channel = config.slack.channel
        if channel:
            await self._post_sweep(result, config, channel, changes, extra,
                                   since=seen.get("at") if isinstance(seen, dict) else None)
        return changes

    async def _post_sweep(self, result: SweepResult, config: Config, channel: str,
                          changes: list[Change], extra: Sequence[str], *,
                          since: str | None) -> None:
        parent, opened = await self._parent(result, config, channel)
        if parent is None:
            return
        tasks = pending_task_counts(result.facts)
        width = config.report.width
        every = config.digest.full_tables_every
        if opened or (every and parent["sweeps"] % every == 0):
            await self._full_tables(result, config, channel, parent, header=None)
        if changes or extra:
            at = datetime.fromisoformat(since).strftime("%H:%MZ") if since else "the last sweep"
            header = "\n".join([f"Changes since {at} (as of {self._clock():%H:%M}Z)",
                                *merged_lines(changes), *extra])
            report, details = _sub_report(result, {(c.cluster, c.job_id) for c in changes})
            await self._thread(channel, parent["ts"], report, details, header=header,
                               width=width, tasks=tasks)

    async def _parent(self, result: SweepResult, config: Config,
                      channel: str) -> tuple[dict[str, Any] | None, bool]:
        """The period's parent (edited with this sweep's summary), and whether it is new."""
        name, period = self._parent_name(channel, config)
        period_start = interval_start(period, self._period_s(config))
        doc = await self._get(name)
        sweeps = int(doc["sweeps"]) + 1 if isinstance(doc, dict) else 1
        text = parent_text(result.report, period_start=period_start, now=self._clock(),
                           period_hours=config.digest.period_hours, sweeps=sweeps)
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
        if isinstance(doc, dict) and doc.get("ts"):
            updated = await self._call("chat_update", channel, ts=doc["ts"], text=text,
                                       blocks=blocks)
            if updated is not None:
                doc = {**doc, "sweeps": sweeps}
                await self._put(name, doc, ttl_s=self._ttl(config))
                return doc, False
            log.warning("parent not editable; opening a new one", channel=channel)
        posted = await self._call("chat_postMessage", channel, text=text, blocks=blocks)
        if posted is None or not posted.get("ts"):
            return None, False
        doc = {"ts": posted["ts"], "channel": posted.get("channel") or channel,
               "period": period, "opened_at": self._clock().isoformat(), "sweeps": sweeps,
               "tables_for": None}
        await self._put(name, doc, ttl_s=self._ttl(config))
        return doc, True

    async def _full_tables(self, result: SweepResult, config: Config, channel: str,
                           parent: dict[str, Any], *, header: str | None) -> bool:
        stamp = result.started_at.isoformat()
        if parent.get("tables_for") == stamp:
            return False
        tasks = pending_task_counts(result.facts)
        head = header or f"Full tables as of {result.started_at:%H:%M}Z"
        await self._thread(channel, parent["ts"], result.report, dict(result.details),
                           header=head, width=config.report.width, tasks=tasks)
        name, _ = self._parent_name(channel, config)
        await self._put(name, {**parent, "tables_for": stamp}, ttl_s=self._ttl(config))
        return True

    # -- on request and from actions ----------------------------------------------------------

    async def post_tables(self, result: SweepResult, config: Config) -> bool:
        """``/jobs`` in the channel: the full tables into today's thread (once per sweep)."""
        channel = config.slack.channel
        if not channel:
            return False
        parent = await self._get(self._parent_name(channel, config)[0])
        if not isinstance(parent, dict) or not parent.get("ts"):
            return False
        return await self._full_tables(result, config, channel, parent,
                                       header=f"Full tables as of {result.started_at:%H:%M}Z "
                                              "(asked for with /jobs)")

    async def note(self, config: Config, line: str) -> bool:
        """One line (already escaped, mentions built here) into the period's thread."""
        channel = config.slack.channel
        if not channel:
            return False
        parent = await self._get(self._parent_name(channel, config)[0])
        if not isinstance(parent, dict) or not parent.get("ts"):
            log.info("no parent this period; note not threaded", line=line)
            return False
        posted = await self._call("chat_postMessage", channel, thread_ts=parent["ts"],
                                  text=line[:3000])
        return posted is not None

    async def after_cancel(self, config: Config, cluster: str, job_id: str,
                           actor: str) -> bool:
        """After a cancel button: if the audit trail says it cancelled, say so in the thread."""
        try:
            entries = await self._store.audit_entries(200)
        except StoreUnavailable as exc:
            log.warning("audit unreadable; cancel not threaded", error=str(exc))
            return False
        for entry in reversed(entries):
            if (entry.get("cluster"), entry.get("job_id"), entry.get("actor")) == (
                    cluster, job_id, actor) and entry.get("action") == "cancel_salvage":
                if entry.get("outcome") != "cancelled":
                    return False
                return await self.note(config, cancel_line(f"{cluster}:{job_id}", actor,
                                                           entry.get("detail") or "?"))
        return False
