"""A live sweep for ``/jobs`` shared by every replica, as the Sweeper shares one in a process.

Policy: when no cached sweep is young enough, the first replica to need one takes the Redis
lock ``live-sweep`` (SET NX, held for the sweep's bound: the slowest cluster's ``timeout_s``
plus a margin) and sweeps; another replica asking meanwhile waits for that sweep's document in
the cache and answers from it. Two people typing ``/jobs`` at once on two replicas so read the
clusters once and answer from one sweep, so its full tables go into the day's thread once
(``bot.digest`` posts them once per sweep): two sweeps under two stamps each posted them.
A waiter sweeps itself when the lock is gone with no new document (the sweep failed, or was
degraded and not cached) or when Redis does not answer; a holder that died frees the lock when
it expires. The scheduled sweep holds the lock too (``holding``, never waiting for it), so a
``/jobs`` meanwhile answers from it; a ``/jobs`` on the holder's own replica shares it in the
process (the Sweeper).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from bot.cached import SweepCache, SweepDoc
from bot.config import Config
from bot.store import RedisStore, StoreUnavailable
from bot.sweep_result import SweepResult

LOCK = "live-sweep"
POLL_S = 0.2
"""How often a waiting replica looks for the other's sweep (a sweep takes seconds)."""
MARGIN_S = 60.0
"""The lock outlives the slowest cluster's bound by this (encoding, caching)."""

HANDOVER_S = 60.0
"""The least time a live sweep's document is kept in Redis (``cache_ttl_s``), whatever
``cache_seconds`` says: a replica waiting on that sweep answers from it (with
``cache_seconds = 0`` it expired a millisecond after its write, so the waiter swept again and
the tables were posted twice). Readers still judge its age by ``cache_seconds``."""

Live = Callable[[], Awaitable[tuple[SweepResult, SweepDoc]]]


class Sleep(Protocol):
    def __call__(self, seconds: float, /) -> Awaitable[None]: ...


def cache_ttl_s(config: Config) -> float:
    """How long a live sweep's document is kept: ``cache_seconds``, at least ``HANDOVER_S``."""
    return max(config.slack.cache_seconds, HANDOVER_S)


def lock_ttl_s(config: Config) -> float:
    """How long a live sweep may hold the lock: its slowest cluster's bound, and a margin."""
    return max((getattr(c, "timeout_s", 60.0) for c in config.clusters), default=60.0) + MARGIN_S


_UNREAD = object()


async def shared_live_doc(cache: SweepCache, store: RedisStore, live: Live, *, config: Config,
                          replica: str, sleep: Sleep = asyncio.sleep,
                          before: str | object | None = _UNREAD,
                          ) -> tuple[SweepResult | None, SweepDoc, float | None]:
    """``live()`` run by one replica at a time: ``(result, doc, None)`` from this replica's
    sweep, or ``(None, doc, age)`` from the one another replica finished meanwhile.

    ``before``: the cached sweep's stamp (:func:`cache_stamp`) when the caller found no fresh
    one and decided to sweep (before it acked): a sweep published after that is answered
    from. Read here when not given (a sweep another replica published while the caller acked
    would then be the one to wait past: swept again, tables posted twice)."""
    try:
        if before is _UNREAD:
            before = await cache_stamp(cache)
        seen = before if isinstance(before, str) else None
        while True:
            newer = await _newer(cache, seen, config.slack.cache_seconds)
            if newer is not None:
                return None, *newer
            if await store.acquire(LOCK, {"replica": replica}, ttl_s=lock_ttl_s(config)):
                break
            if ((await store.holder(LOCK)) or {}).get("replica") == replica:
                # This replica's own sweep (its scheduled one) holds it: the Sweeper shares
                # that sweep in the process.
                result, doc = await live()
                return result, doc, None
            await sleep(POLL_S)
    except StoreUnavailable:
        result, doc = await live()  # no Redis: nothing to share through
        return result, doc, None
    try:
        # The holder before us publishes, then releases: what it cached is visible now.
        newer = await _newer(cache, seen, config.slack.cache_seconds)
        if newer is not None:
            return None, *newer
        result, doc = await live()
        return result, doc, None
    finally:
        with contextlib.suppress(StoreUnavailable):  # else it expires with its bound
            await store.release(LOCK)


@contextlib.asynccontextmanager
async def holding(store: RedisStore, config: Config, replica: str) -> AsyncIterator[None]:
    """The lock held, when free, around a sweep this replica runs anyway (the scheduled one):
    a ``/jobs`` meanwhile on another replica waits for it and answers from it, rather than
    sweeping beside it and posting its tables after the period's own. Never waits."""
    try:
        took = await store.acquire(LOCK, {"replica": replica}, ttl_s=lock_ttl_s(config))
    except StoreUnavailable:
        took = False
    try:
        yield
    finally:
        if took:
            with contextlib.suppress(StoreUnavailable):  # else it expires with its bound
                await store.release(LOCK)


async def cache_stamp(cache: SweepCache) -> str | None:
    """The stamp of the sweep cached now, at any age (None: none cached)."""
    current = await cache.latest()
    return current[0].stamp if current is not None else None


async def _newer(cache: SweepCache, before: str | None, max_age_s: float
                 ) -> tuple[SweepDoc, float] | None:
    """A sweep to answer from: young enough (another replica's, cached since the caller found
    none), or any other than the one the wait began with (``cache_seconds = 0``). Its age is
    taken from 0: a replica whose clock runs ahead stamps its sweep in this one's future."""
    current = await cache.latest()
    if current is None or (current[0].stamp == before and current[1] >= max_age_s):
        return None
    return current[0], max(current[1], 0.0)


__all__ = ["LOCK", "cache_stamp", "cache_ttl_s", "holding", "lock_ttl_s", "shared_live_doc"]
