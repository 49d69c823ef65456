"""The day's message: one parent per period, edited in place, with only changes in its thread.

Policy (issue 13; Robusta's pattern): a scheduled sweep never posts a fresh set of tables.
Time is cut into UTC-aligned periods of ``[digest] period_hours`` (default a day). The first
sweep of a period posts the period's *parent* message (the one-line summary per bucket, the
counts, the time it is "as of") and puts the full tables in its thread; every later sweep
edits that parent with ``chat.update`` and adds one thread reply listing what changed since the
last sweep (started, finished, failed, collapsed, restarted, stalled, recovered, cancelled),
with those jobs' rows (a cancel made by the bot's button is told when it happens, and not
again by the next sweep; a job stalling or collapsing again soon after that was told is not
told again: ``bot.repeats``; an unreachable cluster is told only past one sweep:
``bot.cluster_watch``). A sweep in which nothing changed posts nothing, nor one whose only
changes are routine (a chain restart: listed when a reply goes out anyway). A sweep that posts
the full tables (the period's first) puts its change lines at their head: one reply, the tables
holding every row, where a change reply after them repeated the changed rows. The full tables go
into the thread again when someone asks (``/jobs`` in the channel, once per sweep) and every
``full_tables_every`` sweeps when that is set; a period opened while a cluster is unreachable
waits up to two intervals for a sweep that reads it before its tables go. Arrays and grids are
grouped (:mod:`report.grouping`) in the parent, the tables and the change rows.

State lives in Redis (documents under ``digest:``, each with a TTL): the parent of each
(channel, period) and the last sweep's job snapshots (a cluster the sweep could not read keeps
its jobs' snapshots from before: back after a blip, it tells nothing twice). A restarted bot or
another replica therefore edits the same parent and repeats no change. The snapshots are saved
*before* the change reply is posted: a crash between the two loses one reply rather than
repeating it. While Redis is down the process keeps its own copy (it cannot know about other
replicas), and writes it back to Redis when it answers again, before the next tick is
claimed: Redis's older copy would tell the outage's changes (and job-end DMs) a second time.
The very first sweep (no snapshots anywhere) is a baseline and reports no changes; so is a
cluster's first read (added or renamed in the config: report.changes.clusters_read).

Posts to one channel are paced (:class:`bot.digest_posting.Pacer`: a second apart, Slack's ~1
message per second per channel) and go through :mod:`bot.delivery`: a failed post is logged and
counted once (by the Web API client) and never stops the posts after it, nor the sweep's
collapse alerts. If the parent cannot be posted, the tables and changes go to the channel
unthreaded (a duplicate beats silence) and the next sweep tries to open the parent again; a
parent whose edit fails for now (not ``delivery.GONE_FOR_EDITS``) is kept, and the edit tried
again by the next sweep. Every message is built in :mod:`bot.messages` (its one escape;
mentions only through ``mention()``). The documents and the paced posts are
``bot.digest_posting``'s.

A reply Slack refused (a 5xx, rate limits past the retries) is kept in process memory and
:attr:`Digest.undelivered` says so (as it does for a parent edit that failed for now): the
scheduler then tries the sweep once more soon
(``bot.scheduler``), and that retry's :meth:`Digest.publish` posts the kept replies again
before its own (the change reply is not lost: its changes were saved as seen). Table replies
are not kept when the retry posts the full tables itself (a parent opened then). A change
reply still refused by the retry (Slack down across both) is posted by the sweeps after it,
before their own, while it is younger than ``digest_posting.UNDELIVERED_KEPT_S``: its
changes were saved as seen, so no later diff tells those endings again (its header keeps its
own time). Those are kept in Redis too (``digest:undelivered``), for whichever replica sweeps
next and across a restart. Refused table replies are dropped by a later sweep (the tables
come afresh).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from bot.alerts import pressed_episode, same_instance
from bot.cluster_watch import seen_now, watch
from bot.config import Config
from bot.delivery import edit
from bot.digest_posting import DigestPosting
from bot.log_watch import discarded_output, log_watch
from bot.messages import (
    cancel_line,
    change_rows,
    changes_header,
    sweep_parent,
    sweep_thread,
    text_message,
)
from bot.owners import cluster_user
from bot.repeats import quiet_repeats
from bot.scheduler import interval_start
from bot.slack_errors import Refusal
from bot.store import StoreUnavailable
from bot.sweep_result import SweepResult
from report.changes import (
    Change,
    Key,
    Snapshot,
    clusters_read,
    decode_key,
    diff,
    encode_key,
    read_before,
    restart_counts,
)
from report.chunks import SlackMessage
from report.grouping import pending_task_counts

log = structlog.get_logger(__name__)

SEEN = "digest:seen"


def _cancel_told(cluster: str, job_id: str) -> str:
    """The document saying a cancel button's outcome was already told in the thread; it holds
    the cancelled job's instance (Kubernetes uid, submit time), as its alert's episode did."""
    return f"digest:cancel-told:{cluster}:{job_id}"


NOTE_MAX = 3800
"""A thread reply of notes at most this many characters (Slack's readable text bound)."""


def packed_lines(lines: Sequence[str], limit: int) -> list[str]:
    """``lines`` joined into as few texts of at most ``limit`` characters as they fit (a line
    longer than that is a text of its own, cut by the message builder)."""
    texts: list[str] = []
    for line in lines:
        if texts and len(texts[-1]) + 1 + len(line) <= limit:
            texts[-1] += "\n" + line
        else:
            texts.append(line)
    return texts


class Digest(DigestPosting):
    """Publishes each scheduled sweep into the period's parent message and thread."""

    # -- the scheduled sweep ------------------------------------------------------------------

    async def publish(self, result: SweepResult, config: Config,
                      extra: Sequence[str] = (), *, retry: bool = False,
                      interval: int | None = None, told: Collection[Key] = ()) -> list[Change]:
        """Edit (or open) the period's parent, thread what changed; return the changes.

        ``extra``: the sweep's own lines (collapse alerts, failure diagnoses, cleanups, raw
        text), added to the same reply so one sweep makes at most one change reply; ``told``:
        the jobs one of them tells, whose change bullet would say it again. ``retry``: this
        sweep tries a failed one again (``bot.scheduler``): the replies Slack refused then go
        first.
        ``interval``: the scheduler's interval number: a retry of an interval the parent
        already counted is not another sweep of the period.
        """
        kept = await self._kept(retry=retry)
        self._stale_parent = False
        seen = await self._get(SEEN)
        previous: dict[tuple[str, str], Snapshot] | None = None
        if isinstance(seen, dict) and isinstance(seen.get("jobs"), dict):
            previous = {decode_key(k): Snapshot.model_validate(v)
                        for k, v in seen["jobs"].items()}
        counts = restart_counts(result.facts)
        changes = (diff(previous, result.report, pending_tasks=pending_task_counts(result.facts),
                        restarts=counts)
                   if previous is not None else [])
        known = read_before(seen)
        if known is not None:  # a cluster read for the first time is a baseline of its own
            changes = [c for c in changes if c.cluster in known]
        now = self._clock()
        reads = watch(seen, result.report, previous, now,
                      interval_s=config.slack.sweep_every_minutes * 60)
        logs, log_lines = log_watch(seen.get("logs") if isinstance(seen, dict) else None,
                                    result.report, now,
                                    interval_s=config.slack.sweep_every_minutes * 60,
                                    discarded=discarded_output(result.facts))
        await self._put(SEEN, {"at": now.isoformat(), "jobs": {
            encode_key(k): s.model_dump(mode="json")
            for k, s in seen_now(previous, result.report, counts).items()},
            "clusters": clusters_read(known if known is not None or previous is None
                                      else {k[0] for k in previous}, result.report),
            "read_at": reads.read_at, "down": reads.down, "logs": logs},
            ttl_s=self._ttl(config))
        channel = config.slack.channel
        if channel:
            untold = await quiet_repeats(self._store, await self._untold(changes, result),
                                         previous, self._clock, told=told)
            await self._post_sweep(result, config, channel, untold,
                                   [*reads.lines, *log_lines, *extra],
                                   since=seen.get("at") if isinstance(seen, dict) else None,
                                   kept=kept, interval=interval, retry=retry, told=told,
                                   unread=reads.unread)
            await self._save_undelivered()
        return changes

    async def _untold(self, changes: list[Change], result: SweepResult) -> list[Change]:
        """``changes`` less the cancels already told in the thread by the button that made
        them (:meth:`after_cancel`); while Redis is down, all of them. The mark holds the
        cancelled job's instance: a later job under the same id (a Kubernetes Job re-created
        under its name, the first one deleted and gone before a sweep saw it Deleting; a
        reset slurmctld) cancelled by hand is told."""
        told: list[Change] = []
        try:
            for change in changes:
                if change.kind != "cancelled":
                    continue
                name = _cancel_told(change.cluster, change.job_id)
                mark = await self._store.get_doc(name)
                if mark is None:
                    continue
                await self._store.delete_doc(name)  # this id's cancel is told now, or was
                if isinstance(mark, dict) and same_instance(
                        mark, result.job_facts(change.cluster, change.job_id)):
                    told.append(change)
        except StoreUnavailable:
            return changes
        return [change for change in changes if change not in told]

    async def _post_sweep(self, result: SweepResult, config: Config, channel: str,
                          changes: list[Change], extra: Sequence[str], *,
                          since: str | None,
                          kept: Sequence[tuple[str, SlackMessage, datetime]] = (),
                          interval: int | None = None, retry: bool = False,
                          told: Collection[Key] = (),
                          unread: Mapping[str, tuple[int, datetime | None]] | None = None,
                          ) -> None:
        parent, opened, counted = await self._parent(result, config, channel, interval,
                                                     retry=retry, unread=unread)
        ts = parent["ts"] if parent else None  # no parent: the replies go unthreaded
        every = config.digest.full_tables_every
        # A retry of a sweep the parent counted already is no new sweep: its first try's
        # periodic tables stand (those Slack refused are in ``kept``), never posted twice.
        tables = parent is None or opened or bool(parent.get("tables_due")) or bool(
            every and parent["sweeps"] % every == 0 and not counted)
        if tables and parent is not None and await self._tables_wait(parent, config, channel,
                                                                     unread):
            tables = False
        for kind, message, at in kept:  # the refused replies still kept, in their order
            if not (kind == "tables" and tables):  # fresh full tables replace old ones
                await self._thread(channel, ts, [message], kind=kind, refused_at=at)
        # A routine change (a chain restart) is listed in a reply that goes out anyway; alone
        # it is no reply: the parent counts it, and a grid's restarts every few hours per
        # cell were a thread reply each.
        news = bool(extra) or any(not c.routine for c in changes)

        def head(every_row: bool) -> str:
            return changes_header(changes, extra, now=self._clock(), told=told,
                                  since=datetime.fromisoformat(since) if since else None,
                                  every_row=every_row)

        # The changes head the tables, which hold every row: one reply, where a change reply
        # of its own had repeated the changed rows right after them.
        if tables and await self._full_tables(result, config, channel, parent, header=None,
                                              kind="tables", news=head(True) if news else None):
            return
        if news:  # no tables, or they went without them (posted for this sweep already)
            header = head(False)
            only = change_rows(changes)  # a mass change: the jobs needing a human
            messages = await asyncio.to_thread(sweep_thread, result, width=config.report.width,
                                               header=header, only=only)
            await self._thread(channel, ts, messages, kind="changes")

    async def _tables_wait(self, parent: dict[str, Any], config: Config, channel: str,
                           unread: Mapping[str, tuple[int, datetime | None]] | None) -> bool:
        """Whether the period's full tables wait for a sweep that reads every cluster: one
        opened while a cluster holding jobs is unreachable (an SSH blip at midnight) would be
        the day's only tables, without them. They wait (``tables_due`` in the parent's
        document) up to two sweep intervals after the parent opened, then go as they are."""
        if not any(n for n, _ in (unread or {}).values()):
            return False
        opened = parent.get("opened_at")
        waited = (self._clock() - datetime.fromisoformat(opened)).total_seconds() \
            if isinstance(opened, str) else 0.0
        if waited >= 2 * config.slack.sweep_every_minutes * 60:
            return False
        name, _ = self._parent_name(channel, config)
        current = await self._get(name)
        if isinstance(current, dict) and current.get("ts") == parent.get("ts"):
            await self._put(name, {**current, "tables_due": True}, ttl_s=self._ttl(config))
        return True

    async def _parent(self, result: SweepResult, config: Config, channel: str,
                      interval: int | None = None, *, retry: bool = False,
                      unread: Mapping[str, tuple[int, datetime | None]] | None = None,
                      ) -> tuple[dict[str, Any] | None, bool, bool]:
        """The period's parent (edited with this sweep's summary), whether it is new, and
        whether this is a retry of a sweep it counted already; ``interval``: the sweep's
        interval, kept in the document: a retry of an interval the parent already counted
        (its first try edited or opened it) is not another sweep."""
        name, period = self._parent_name(channel, config)
        period_start = interval_start(period, self._period_s(config))
        doc = await self._get(name)
        counted = (retry and isinstance(doc, dict) and interval is not None
                   and doc.get("interval") == interval)
        sweeps = int(doc["sweeps"]) + (0 if counted else 1) if isinstance(doc, dict) else 1
        message = sweep_parent(result, period_start=period_start, now=self._clock(),
                               period_hours=config.digest.period_hours, sweeps=sweeps,
                               unread=unread)
        if isinstance(doc, dict) and doc.get("ts"):
            async with self._slot(channel):
                edited = await edit(self._client, channel=doc.get("channel") or channel,
                                    ts=doc["ts"], text=message.text, blocks=message.blocks)
            if edited != "gone":
                # Edited, or failed for now (rate limit past the retries, internal_error): a
                # passing failure keeps the period's one parent, a sweep behind until the next
                # edit; a second parent and a second full-table dump are noise for a blip.
                if edited != "edited":  # "refused" for good: no retry would pass it
                    log.warning("parent not edited this sweep; kept for the next edit")
                    self._stale_parent = edited == "failed"
                doc = {**doc, "sweeps": sweeps, "interval": interval}
                await self._put(name, doc, ttl_s=self._ttl(config))
                return doc, False, counted
            log.warning("parent not editable; opening a new one")
        posted = await self._post_found(channel, message)  # one landed unanswered is it
        if isinstance(posted, Refusal) or not posted.get("ts"):
            return None, False, counted
        doc = {"ts": posted["ts"], "channel": posted.get("channel") or channel,
               "period": period, "opened_at": self._clock().isoformat(), "sweeps": sweeps,
               "tables_for": None, "interval": interval}
        await self._put(name, doc, ttl_s=self._ttl(config))
        return doc, True, counted

    async def _full_tables(self, result: SweepResult, config: Config, channel: str,
                           parent: dict[str, Any] | None, *, header: str | None,
                           whole: Callable[[], Awaitable[SweepResult]] | None = None,
                           kind: str | None = None, news: str | None = None) -> bool:
        """The full tables into the parent's thread, once per sweep (``parent`` None: the
        parent could not be posted, so they go to the channel unthreaded). ``whole``: how to
        get the whole sweep when ``result`` is only its head (decoded only when posting).
        ``news``: the sweep's change lines (:func:`changes_header`), under the header; the
        message holding them is a change reply (kept while Slack refuses it, as one is)."""
        stamp = result.started_at.isoformat()
        if parent is not None and parent.get("tables_for") == stamp:
            return False
        if parent is not None and not await self._claim_tables(parent, stamp, config):
            return False  # another /jobs (or replica) is posting this sweep's tables
        try:
            if whole is not None:
                result = await whole()
            head = header or f"Full tables as of {result.started_at:%H:%M}Z"
            messages = await asyncio.to_thread(sweep_thread, result, width=config.report.width,
                                               header=f"{head}\n{news}" if news else head)
        except BaseException:
            if parent is not None:  # nothing posted: the next one asking may
                with contextlib.suppress(StoreUnavailable):
                    await self._store.release(self._tables_lock(parent, stamp))
            raise
        ts = parent["ts"] if parent else None
        if news:
            await self._thread(channel, ts, messages[:1], kind="changes")
            messages = messages[1:]
        await self._thread(channel, ts, messages, kind=kind)
        if parent is not None:
            # Read again: posting took a while, and a sweep may have moved the document on
            # since (its sweep count, or a new parent replacing one deleted): writing the copy
            # read before posting would put those back.
            name, _ = self._parent_name(channel, config)
            current = await self._get(name)
            if isinstance(current, dict) and current.get("ts") == parent.get("ts"):
                await self._put(name, {**current, "tables_for": stamp, "tables_due": False},
                                ttl_s=self._ttl(config))
        return True

    async def _claim_tables(self, parent: dict[str, Any], stamp: str, config: Config) -> bool:
        """Whether this caller posts the full tables of the sweep ``stamp`` into ``parent``'s
        thread: the first of several asking at once (``/jobs`` typed by several people,
        replicas), by a lock in Redis (SET NX, kept for the period); while Redis is down,
        each caller posts (a table too many beats none)."""
        try:
            return await self._store.acquire(self._tables_lock(parent, stamp),
                                             {"at": self._clock().isoformat()},
                                             ttl_s=self._ttl(config))
        except StoreUnavailable:
            return True

    @staticmethod
    def _tables_lock(parent: dict[str, Any], stamp: str) -> str:
        return f"tables:{parent['ts']}:{stamp}"

    # -- on request and from actions ----------------------------------------------------------

    async def post_tables(self, result: SweepResult, config: Config, *,
                          whole: Callable[[], Awaitable[SweepResult]] | None = None) -> bool:
        """``/jobs`` in the channel: the full tables into today's thread (once per sweep).
        ``whole``: ``result`` is the sweep's head, and this gets the whole sweep, called only
        when the tables are posted (a cached 5,000-job sweep is decoded for that only)."""
        channel = config.slack.channel
        if not channel:
            return False
        parent = await self._get(self._parent_name(channel, config)[0])
        if not isinstance(parent, dict) or not parent.get("ts"):
            return False
        return await self._full_tables(result, config, channel, parent,
                                       header=f"Full tables as of {result.started_at:%H:%M}Z "
                                              "(asked for with /jobs)", whole=whole)

    async def note(self, config: Config, line: str) -> bool:
        """One line of bot mrkdwn (built by :mod:`bot.messages`) into the period's thread."""
        return await self.notes(config, [line])

    async def notes(self, config: Config, lines: Sequence[str]) -> bool:
        """Lines of bot mrkdwn into the period's thread as one reply (several only past
        Slack's text limit): a sweep's collapse alerts are one reply, not one each."""
        channel = config.slack.channel
        if not channel or not lines:
            return False
        parent = await self._get(self._parent_name(channel, config)[0])
        if not isinstance(parent, dict) or not parent.get("ts"):
            log.info("no parent this period; notes not threaded", lines=len(lines))
            return False
        told = True
        for piece in packed_lines(lines, NOTE_MAX):
            told = not isinstance(await self._post_found(channel, text_message(piece),
                                                         parent["ts"]), Refusal) and told
        return told

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
                who = cluster_user(config, cluster, actor)
                told = await self.note(config, cancel_line(f"{cluster}:{job_id}", who,
                                                           entry.get("detail") or "?"))
                if told:
                    # The next sweep finds the job CANCELLED: its change line would tell this
                    # cancel a second time (``publish`` leaves it out, for this job only).
                    with contextlib.suppress(StoreUnavailable):
                        await self._store.put_doc(_cancel_told(cluster, job_id),
                                                  await self._cancelled_instance(entry),
                                                  ttl_s=self._ttl(config))
                return told
        return False

    async def _cancelled_instance(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """The instance (uid, submit time) of the job a cancel press acted on: its alert's
        episode, found through the pressed message the audit entry names."""
        episode = await pressed_episode(self._store, str(entry.get("channel") or ""),
                                        str(entry.get("ts") or ""),
                                        f"{entry.get('cluster')}:{entry.get('job_id')}") or {}
        return {"uid": episode.get("uid"), "submitted": episode.get("submitted")}
