"""The sweep cache as the bot answers from it: one document per sweep, rendered once per query.

Policy (issue 12): at 5,000 jobs a cached sweep is 29 MB of JSON, 1.5 s to decode and 2 s to
render as ``/jobs`` tables, and each ``/jobs`` used to do both, in threads competing with the
sweep for the GIL. Now a sweep is encoded once (:meth:`SweepCache.publish`, in the worker
process when big: ``bot.offload``) and kept here as its text, a :class:`SweepDoc`, not as 5,000
decoded models: 29 MB instead of about 110 MB, and no sweep object stays alive between sweeps.
Beside the cache, Redis holds a small stamp document naming the sweep it holds (its id and the
pending array-task counts its facts gave, which the cache's text lacks), written with the cache
in one transaction, so a command first reads the stamp: when it names the document in memory,
that one answers and the 29 MB are not fetched again; otherwise the cache and its stamp are
read as one and become the document in memory. ``/jobs`` tables are rendered once per document,
query and width and shared by every caller (single flight: concurrent callers wait on one
rendering); so is the whole-answer text for the DM. Renderings belong to their document and are
dropped with it. Answers that need one job (``/job``, Share) get that job from the worker, and
the Home tab the user's jobs; the channel thread, which needs a whole sweep object, decodes it,
shared while someone holds it. Two replicas writing at once leave one's sweep with its own
stamp, whichever wrote last.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import structlog

from bot import cached_render
from bot.cached_render import Rendered, View
from bot.config import Config
from bot.offload import Offload
from bot.store import RedisStore, StoreUnavailable, decode_sweep
from bot.sweep_result import SweepResult
from bot.telemetry import Telemetry
from report.grouping import pending_task_counts
from report.models import JobDetail

log = structlog.get_logger(__name__)

T = TypeVar("T")
Key = tuple[str, str]

BYTES_PER_JOB = 6_000
"""About what one job adds to the cache's text (29 MB at 5,016 jobs), to size the encode."""

MAX_RENDERINGS = 16
"""Renderings kept per document (queries × widths); the oldest goes first."""


@dataclass(frozen=True)
class SweepDoc:
    """One sweep as the cache holds it: its text, its head (header fields), its stamp."""

    stamp: str
    payload: str
    head: SweepResult
    pending: Mapping[Key, int] = field(default_factory=dict)

    @property
    def started_at(self) -> datetime:
        return self.head.started_at


def _stamp_doc(doc: SweepDoc) -> dict[str, Any]:
    return {"id": doc.stamp, "pending": [[c, j, n] for (c, j), n in doc.pending.items()]}


def _names(stamp: Any, doc: SweepDoc) -> bool:
    return isinstance(stamp, dict) and stamp.get("id") == doc.stamp


def _pending(stamp: Any) -> dict[Key, int]:
    rows = stamp.get("pending", []) if isinstance(stamp, dict) else []
    return {(str(r[0]), str(r[1])): int(r[2]) for r in rows
            if isinstance(r, list) and len(r) == 3}


class SweepCache:
    """The bot's view of the sweep cache (one per :class:`bot.app.Bot`)."""

    def __init__(self, *, store: RedisStore, offload: Offload, telemetry: Telemetry,
                 clock: Callable[[], datetime]) -> None:
        self._store = store
        self._offload = offload
        self._telemetry = telemetry
        self._clock = clock
        self.doc: SweepDoc | None = None
        """The document in memory: the last sweep this bot published or read from Redis."""
        self._writing: SweepDoc | None = None
        self._published: tuple[weakref.ref[SweepResult], asyncio.Future[SweepDoc]] | None = None
        self._decoded: tuple[SweepDoc, weakref.ref[SweepResult]] | None = None
        self._renders: dict[tuple[Any, ...], tuple[Config, asyncio.Future[Any]]] = {}
        self._renders_of: SweepDoc | None = None
        self.renderings = 0
        """Renderings started (for tests of sharing)."""

    # -- writing ---------------------------------------------------------------------------

    async def publish(self, result: SweepResult, *, ttl_s: float) -> SweepDoc:
        """``result`` as a document; written to Redis unless degraded. Callers sharing one
        sweep share one encode and one write."""
        known = self._published
        if known is not None and known[0]() is result:
            return await asyncio.shield(known[1])
        future: asyncio.Future[SweepDoc] = asyncio.get_running_loop().create_future()
        self._published = (weakref.ref(result), future)
        try:
            doc = await self._publish(result, ttl_s)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the callers sharing it re-raise it
            self._published = None
            raise
        future.set_result(doc)
        return doc

    async def _publish(self, result: SweepResult, ttl_s: float) -> SweepDoc:
        bare = SweepResult(result.report, result.details, (), result.started_at,
                           result.duration_s, result.degraded)  # facts stay in this process
        payload = await self._offload.run(cached_render.encode, bare,
                                          size=len(result.report.jobs) * BYTES_PER_JOB)
        doc = SweepDoc(stamp=uuid.uuid4().hex, payload=payload, head=cached_render.head(result),
                       pending=pending_task_counts(result.facts))
        if result.degraded is not None:
            return doc  # answers this sweep's callers; the cache keeps the last sound one
        self.doc = self._writing = doc
        self._decoded = (doc, weakref.ref(result))
        try:
            await self._store.save_cache(payload, stamp=_stamp_doc(doc), ttl_s=ttl_s)
        except StoreUnavailable as exc:
            self._telemetry.store_errors.inc()
            log.warning("sweep not cached", error=str(exc))
        finally:
            if self._writing is doc:
                self._writing = None
        return doc

    # -- reading ---------------------------------------------------------------------------

    async def fresh(self, max_age_s: float) -> tuple[SweepDoc, float] | None:
        """The cached sweep and its age in seconds while it is younger than ``max_age_s``."""
        latest = await self.latest()
        if latest is None:
            return None
        return latest if 0 <= latest[1] < max_age_s else None

    async def latest(self) -> tuple[SweepDoc, float] | None:
        """The cached sweep and its age in seconds, whatever its age: negative when the
        replica that swept has a clock ahead of this one's."""
        try:
            doc = await self._current()
        except StoreUnavailable as exc:
            self._telemetry.store_errors.inc()
            log.warning("sweep cache unavailable", error=str(exc))
            return None
        if doc is None:
            return None
        return doc, (self._clock() - doc.started_at).total_seconds()

    async def _current(self) -> SweepDoc | None:
        publishing = self._published
        if publishing is not None and not publishing[1].done():
            # A sweep just ended and is being encoded: its document, not the older one.
            with contextlib.suppress(Exception):
                await asyncio.shield(publishing[1])
        if self._writing is not None:
            return self._writing  # being written: newer than what Redis holds yet
        doc = self.doc
        if doc is not None and _names(await self._store.load_cache_stamp(), doc):
            return doc  # the cache holds the document in memory: not fetched again
        loaded = await self._store.load_stamped_cache()  # a replica may have written since
        if loaded is None:
            return None
        stamp, payload = loaded
        if doc is not None and payload == doc.payload:
            return doc
        sweep_head = await self._offload.run(cached_render.head_of, payload, size=len(payload))
        name = stamp.get("id") if isinstance(stamp, dict) else None
        self.doc = SweepDoc(stamp=str(name or f"unstamped-{uuid.uuid4().hex}"), payload=payload,
                            head=sweep_head, pending=_pending(stamp))
        return self.doc

    async def result(self, doc: SweepDoc) -> SweepResult:
        """The whole sweep of ``doc`` (the live one while it is alive, else decoded)."""
        known = self._decoded
        if known is not None and known[0] is doc and (alive := known[1]()) is not None:
            return alive
        decoded = await self._offload.run(decode_sweep, doc.payload, size=len(doc.payload))
        self._decoded = (doc, weakref.ref(decoded))
        return decoded

    async def job(self, doc: SweepDoc, cluster: str | None, job_id: str) -> JobDetail:
        """One job of ``doc`` (``SweepResult.find``'s errors when it is not there)."""
        return await self.apply(doc, SweepResult.find, cluster, job_id)

    async def apply(self, doc: SweepDoc, fn: Callable[..., T], *args: Any) -> T:
        """``fn(sweep, *args)`` on ``doc``'s sweep, off the loop: on the live sweep while it is
        alive, else in the worker on the decoded text (only ``fn``'s answer comes back)."""
        known = self._decoded
        if known is not None and known[0] is doc and (alive := known[1]()) is not None:
            return await asyncio.to_thread(fn, alive, *args)
        return await self._offload.run(cached_render.on_payload, fn, doc.payload, *args,
                                       size=len(doc.payload))

    # -- shared renderings -----------------------------------------------------------------

    async def tables(self, doc: SweepDoc, view: View) -> Rendered:
        """The tables answering ``view``, rendered once per document and shared."""
        return await self._shared(("tables", *view.key), doc, view.config, lambda: (
            self._offload.run(cached_render.render_view, doc.payload, doc.pending, view,
                              size=len(doc.payload))))

    async def text(self, doc: SweepDoc, view: View) -> str:
        """The whole answer to ``view`` as text (the DM file), rendered once and shared."""
        return await self._shared(("text", *view.key), doc, view.config, lambda: (
            self._offload.run(cached_render.render_view_text, doc.payload, doc.pending, view,
                              size=len(doc.payload))))

    async def _shared(self, key: tuple[Any, ...], doc: SweepDoc, config: Config,
                      start: Callable[[], Awaitable[T]]) -> T:
        if self._renders_of is not doc:
            self._renders, self._renders_of = {}, doc
        known = self._renders.get(key)
        if known is None or known[0] is not config:  # owners may have changed: rendered anew
            while len(self._renders) >= MAX_RENDERINGS:
                del self._renders[next(iter(self._renders))]
            self.renderings += 1
            task = asyncio.ensure_future(start())
            known = self._renders[key] = (config, task)
            renders = self._renders
            task.add_done_callback(lambda t: _forget_failed(renders, key, t))
        result: T = await asyncio.shield(known[1])
        return result


def _forget_failed(renders: dict[tuple[Any, ...], Any], key: tuple[Any, ...],
                   task: asyncio.Future[Any]) -> None:
    """A rendering that failed is not kept: the next caller tries again."""
    if task.cancelled() or task.exception() is not None:
        known = renders.get(key)
        if known is not None and known[1] is task:
            del renders[key]


__all__ = ["SweepCache", "SweepDoc"]
