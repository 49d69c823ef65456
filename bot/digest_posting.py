"""The digest's state and its posts: documents that outlive a Redis outage, paced replies.

Policy (see ``bot.digest``): the digest's documents (the period's parent, the last sweep's
snapshots) live in Redis; while Redis is down this process keeps its own copy and writes it
back when Redis answers, only over the copy it last saw there (another replica's newer one
is kept). Posts to one channel are paced (:class:`Pacer`, a second apart by default) and a
reply of a sweep refused for now (a rate limit, a 5xx, a timeout) is kept for its retry; one
Slack will never take (``bot.slack_errors.PERMANENT_ERRORS``: the bot not in the channel,
the channel archived, the token refused) is dropped at once, and once the channel itself
refused, the publish's other replies to it are not sent at all (``Refusal.gone``). A posting
whose Web API hung gives up without waiting for its slot. :class:`DigestPosting` is the base
of ``bot.digest.Digest``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.breaker import given_up
from bot.config import Config
from bot.delivery import post
from bot.landed import landed, post_key, tagged
from bot.scheduler import interval_number
from bot.slack_errors import Refusal
from bot.store import RedisStore, StoreUnavailable
from report.chunks import SlackMessage

log = structlog.get_logger(__name__)

UNDELIVERED_KEPT_S = 6 * 3600.0
"""How long a sweep's change reply (or job-end DM) Slack refused is kept for the sweeps after
it: Slack down across a sweep and its retry must not lose the endings that sweep saw (the
next sweep's diff no longer holds them), but an outage of a day should not end in a day of
stale news."""


UNDELIVERED = "digest:undelivered"
"""The change replies Slack refused, for the next sweep of any replica (``_kept``)."""


def _merged(*lists: list[tuple[str, SlackMessage, datetime]]
            ) -> list[tuple[str, SlackMessage, datetime]]:
    """The entries of ``lists`` once each (this process's copy and Redis's overlap), by when
    they were first refused."""
    seen: dict[str, tuple[str, SlackMessage, datetime]] = {}
    for kind, message, at in (entry for entries in lists for entry in entries):
        seen.setdefault(json.dumps([kind, message.text, message.blocks, at.isoformat()],
                                   sort_keys=True), (kind, message, at))
    return sorted(seen.values(), key=lambda entry: entry[2])


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


class DigestPosting:
    """The digest's documents (Redis, or this process's copy while Redis is down) and its
    paced posts to the channel."""

    def __init__(self, *, store: RedisStore, client: AsyncWebClient,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 pacer: Pacer | None = None) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self.pacer = pacer or Pacer(1.0)
        self._local: dict[str, Any] = {}
        """Documents this process wrote, for while Redis is unavailable."""
        self._unsaved: dict[str, float] = {}
        """Names (with their TTLs) written to process memory only, Redis being down: newer
        than Redis's copy, which must not be read back once it answers again."""
        self._known: dict[str, Any] = {}
        """Each document as this process last read or wrote it in Redis: a write-back goes
        in only over that copy (another replica's newer one is kept)."""
        self._pending: list[tuple[str, SlackMessage, datetime]] = []
        """The thread replies Slack refused: ("tables" | "changes", message, first refused)."""
        self._stale_parent = False
        """Whether the last publish's edit of the parent failed for now (kept, not edited)."""
        self._undelivered_unsaved = False
        """Whether :attr:`_pending` could not be written to Redis (Redis down)."""
        self._gone: dict[str, Refusal] = {}
        """Channels that refused this publish's posts for good (``Refusal.gone``)."""

    @property
    def undelivered(self) -> bool:
        """Whether the last publish left a reply undelivered or the parent unedited (its
        retry posts the reply again and edits the parent)."""
        return bool(self._pending) or self._stale_parent

    async def _kept(self, *, retry: bool) -> list[tuple[str, SlackMessage, datetime]]:
        """The refused replies a publish posts first (and forgets): on a retry, all of them;
        on a later sweep, the change replies refused within :data:`UNDELIVERED_KEPT_S` (their
        changes were saved as seen: dropped, the endings they tell would never be told; the
        tables are posted afresh when due), this process's and those another replica (or this
        one before a restart) left in Redis (:meth:`_save_undelivered`)."""
        now = self._clock()
        pending, self._pending = self._pending, []
        self._gone = {}  # a publish begins here: a channel refused before may take posts now
        if not retry:
            stored = await self._stored_undelivered()
            # Redis's list is the one to go by once this process's was written there: an
            # entry gone from it was delivered since (by another replica).
            pending = _merged(pending, stored or []) if stored is None or \
                self._undelivered_unsaved else stored
        return [(kind, message, at) for kind, message, at in pending
                if retry or (kind == "changes"
                             and (now - at).total_seconds() <= UNDELIVERED_KEPT_S)]

    async def _stored_undelivered(self) -> list[tuple[str, SlackMessage, datetime]] | None:
        """The change replies kept in Redis; ``None`` while Redis cannot say."""
        try:
            doc = await self._store.get_doc(UNDELIVERED)
        except StoreUnavailable:
            return None
        kept: list[tuple[str, SlackMessage, datetime]] = []
        for entry in doc if isinstance(doc, list) else []:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                kept.append((str(entry["kind"]), SlackMessage(text=str(entry["text"]),
                             blocks=list(entry["blocks"])), datetime.fromisoformat(entry["at"])))
        return kept

    async def _save_undelivered(self) -> None:
        """The change replies still refused, in Redis for whichever replica sweeps next (kept
        :data:`UNDELIVERED_KEPT_S`); nothing there once they are delivered."""
        entries = [{"kind": kind, "text": message.text, "blocks": message.blocks,
                    "at": at.isoformat()} for kind, message, at in self._pending
                   if kind == "changes"]
        try:
            if entries:
                await self._store.put_doc(UNDELIVERED, entries, ttl_s=UNDELIVERED_KEPT_S)
            else:
                await self._store.delete_doc(UNDELIVERED)
        except StoreUnavailable as exc:
            self._undelivered_unsaved = True
            log.warning("undelivered replies kept in process memory only", error=str(exc))
        else:
            self._undelivered_unsaved = False

    # -- state --------------------------------------------------------------------------------

    async def _get(self, name: str) -> Any:
        if name in self._unsaved:
            # Written here while Redis was down (this replica led through the outage):
            # Redis still holds the copy from before, which would tell its changes again.
            await self.flush()
            if name in self._unsaved:
                return self._local.get(name)
        try:
            value = await self._store.get_doc(name)
        except StoreUnavailable as exc:
            log.warning("digest state unavailable; using process memory", error=str(exc))
            return self._local.get(name)
        self._known[name] = value
        return value

    async def _put(self, name: str, value: Any, *, ttl_s: float) -> None:
        self._local[name] = value
        try:
            await self._store.put_doc(name, value, ttl_s=ttl_s)
        except StoreUnavailable as exc:
            self._unsaved[name] = ttl_s
            log.warning("digest state kept in process memory only", error=str(exc))
        else:
            self._unsaved.pop(name, None)
            self._known[name] = value

    async def flush(self) -> None:
        """Write back the documents kept in process memory only while Redis was down (the
        parent, the last snapshots), so that no replica, this one included, reads the older
        copy Redis kept and tells again what was told during the outage. Called before each
        tick is claimed; quietly does nothing while Redis is still down.

        Each goes back only over the copy this process last saw there (or none): a replica
        that swept since Redis answered (it claimed first) wrote newer snapshots, and the
        older copy put over them would have the next sweep tell that sweep's changes again."""
        for name, ttl_s in list(self._unsaved.items()):
            value = self._local[name]
            try:
                written = await self._store.put_doc_if(name, value, expected=self._known.get(name),
                                                       ttl_s=ttl_s)
            except StoreUnavailable:
                return
            self._unsaved.pop(name, None)
            if written:
                self._known[name] = value
            else:
                log.info("digest state written since by another replica; kept", name=name)
                self._local.pop(name, None)
                self._known.pop(name, None)

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

    async def _post(self, channel: str, message: SlackMessage, thread_ts: str | None, *,
                    key: str | None = None) -> dict[str, Any] | Refusal:
        """One paced ``chat.postMessage``, or why Slack refused it (logged, counted); not
        sent to a channel that refused this publish for good. ``key``: carried in its
        metadata, for :func:`bot.landed.landed`."""
        if channel in self._gone:
            return self._gone[channel]
        thread: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts else {}
        if key is not None:
            thread["metadata"] = tagged(key)
        async with self._slot(channel):
            posted = await post(self._client, channel=channel, text=message.text,
                                blocks=message.blocks, **thread)
        if isinstance(posted, Refusal) and posted.gone:
            self._gone[channel] = posted
        return posted

    async def _post_found(self, channel: str, message: SlackMessage,
                          thread_ts: str | None = None) -> dict[str, Any] | Refusal:
        """:meth:`_post`, keyed; a post that timed out (it may have landed) is looked for in
        the channel or thread (``bot.landed``): found, it is the post."""
        key = post_key(message.text, message.blocks, self._clock())
        posted = await self._post(channel, message, thread_ts, key=key)
        if isinstance(posted, Refusal) and posted.unknown and (
                ts := await landed(self._client, channel, key, thread_ts=thread_ts)):
            return {"channel": channel, "ts": ts}
        return posted

    def _slot(self, channel: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """The channel's pacing slot; none for a call that gives up unsent (the Web API hung
        earlier in this posting: ``bot.delivery.posting``), so giving up waits for nothing."""
        return contextlib.nullcontext() if given_up() else self.pacer.slot(channel)

    async def _thread(self, channel: str, ts: str | None,
                      messages: Sequence[SlackMessage], *, kind: str | None = None,
                      refused_at: datetime | None = None) -> int:
        """Replies under ``ts`` (unthreaded when the parent is missing); returns those posted.
        ``kind``: a sweep's replies, those refused kept for its retry (:attr:`undelivered`)
        and, change replies, for the sweeps after it (:meth:`_kept`); ``refused_at``: when a
        kept one was first refused."""
        posted = 0
        for message in messages:
            at = refused_at or self._clock()
            key = post_key(message.text, message.blocks, at) if kind is not None else None
            if key is not None and refused_at is not None and \
                    await landed(self._client, channel, key, thread_ts=ts):
                posted += 1  # it landed on an earlier try whose answer never came
                continue
            sent = await self._post(channel, message, ts, key=key)
            if not isinstance(sent, Refusal):
                posted += 1
            elif sent.permanent:  # the call itself was logged by the client
                log.warning("reply dropped: Slack will not take it", error=sent.error,
                            channel=channel, kind=kind)
            elif kind is not None:
                self._pending.append((kind, message, at))
        return posted
