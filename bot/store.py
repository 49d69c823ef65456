"""Redis: every piece of bot state that must outlive a process.

Policy: all keys start with ``redis.key_prefix``. Redis errors are translated exactly once,
here, into :class:`StoreUnavailable` (the original chained); callers decide how to degrade
(answer from a live sweep, post without history) and never see a redis-py exception. The
client fails fast (short socket timeouts, one immediate retry) so an outage costs a command
milliseconds, and it reconnects by itself when Redis is back. The client is redis-py's own:
one URL (``rediss://`` for TLS, ``user@`` for an ACL user), or ``Sentinel.master_for`` when
``[redis] sentinels`` is set, which finds the primary again after a failover (README, Redis).

Keys (``P`` = prefix)::

    P window:{cluster}:{job}   ZSET step -> point JSON, capped at window_len, expires
                               expire_hours after the run was last seen by a sweep; the
                               process keeps the windows it merged (bot.store_windows)
    P window-rev:{cluster}:{job}  STRING a token each merge of that window sets anew (a
                               window kept in memory is checked by it), same expiry
    P logs:{cluster}           HASH job id -> LogState JSON (cursor + fold carry,
                               probes.slurm.cursors) without its text; jobs gone from the
                               sweep are pruned, the key expires expire_hours after the
                               last save
    P logtext:{cluster}:{job}  LIST that state's latest log text in chunks, appended to by
                               the new bytes of each save (bot.store_texts), pruned with its
                               state, expires expire_hours after its last write
    P memory                   STRING SweepMemory JSON (chain-restart edges, failure signatures),
                               expires expire_hours after the last sweep wrote it
    P sweep-cache              STRING the latest sweep, for /jobs within cache_seconds
    P sweep-cache-stamp        STRING JSON naming that sweep (bot.cached), written and read
                               with it as one, same expiry
    P tick:{n}                 STRING lock: the replica that posts interval n's sweep
    P lock:{name}              STRING lock: exactly-once actions (cancel, acknowledge, ...)
    P doc:{name}               STRING JSON documents: alert episodes, the message -> episode
                               index, incidents, signatures, the refused config edit
                               told (bot.refusals) (always with an expiry)
    P audit                    STREAM append-only audit trail (pruned to AUDIT_MAXLEN)

Every key expires or is pruned: nothing the bot writes grows without bound.

Floats are stored with Python's JSON (``NaN``/``Infinity`` allowed): a NaN loss is evidence.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from pydantic import TypeAdapter
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot import store_texts
from bot.config import sentinel_address
from bot.store_texts import APPEND_LUA, APPEND_SHA, TextBook
from bot.store_windows import CACHED_POINTS, JOBS_PER_CALL, MERGE_LUA, MERGE_SHA, WindowCache
from probes.models import MetricPoint
from probes.slurm.cursors import LogState, decode_state

if TYPE_CHECKING:
    from bot.config import RedisSection
    from bot.sweep import SweepResult
    from report.memory import SweepMemory

AUDIT_MAXLEN = 10_000
"""Audit entries kept (approximate trim); older ones age out of Redis, the log keeps all."""


class StoreUnavailable(Exception):
    """Redis could not be reached or refused the operation. ``reason`` says which, without
    the error's own text (which names Redis's address): what Slack may be told."""

    def __init__(self, message: str, *, reachable: bool = False) -> None:
        super().__init__(message)
        self.reason = "Redis refused a request" if reachable else "Redis is unreachable"


def dump_json(value: Any) -> str:
    """JSON that keeps NaN/Infinity and writes datetimes as ISO 8601."""
    return json.dumps(value, default=_default, allow_nan=True, separators=(",", ":"))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump()
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def _encode_states(
    states: Mapping[str, LogState],
) -> dict[str, tuple[str, bytes] | None]:
    """Each state as stored, its text apart (``bot.store_texts.encode``: ``None`` when over
    the size bound)."""
    return {job_id: store_texts.encode(state) for job_id, state in states.items()}


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[at : at + size] for at in range(0, len(items), size)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


TIMEOUT_PAUSE_S = 15.0
"""After :data:`TIMEOUTS_TO_PAUSE` calls in a row timed out, how long every call is refused
at once instead of sent. A frozen Redis (its port accepting, nothing answering) costs each
call its socket timeout twice (one retry): a sweep's and an answer's calls, one after
another, took 40 s and 20 s. Refused Redis (connection refused) fails fast anyway and pauses
nothing."""
TIMEOUTS_TO_PAUSE = 2
"""Timed-out calls in a row (no call answered between them) that pause the store: one alone
may be a busy machine's stall (an event loop starved past the socket timeout), not a frozen
Redis, and pauses nothing."""


class RedisStore:
    """The bot's Redis state: implements the Sweeper's ``SweepState`` plus locks and audit."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str,
        window_len: int = 200,
        expire_s: float = 72 * 3600,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        cached_points: int = CACHED_POINTS,
    ) -> None:
        self._r = client
        self._paused_until = 0.0
        """``time.monotonic()`` until which calls are refused unsent (``TIMEOUT_PAUSE_S``)."""
        self._timeouts = 0
        """Calls timed out since one was last answered."""
        self.prefix = prefix
        self.window_len = window_len
        self.expire_ms = int(expire_s * 1000)
        self._clock = clock
        self.windows = WindowCache(window_len=window_len, expire_ms=self.expire_ms,
                                   cached_points=cached_points)
        """The windows this process merged last (``bot.store_windows``): a warm merge sends
        the new points and reads back two integers per job, not the window."""
        self.texts = TextBook()
        """The log texts this process wrote last (``bot.store_texts``): a warm save appends
        each job's new bytes, not its text."""

    @classmethod
    def from_config(
        cls, section: RedisSection, *, clock: Callable[[], datetime] | None = None,
        password: str | None = None, sentinel_password: str | None = None,
    ) -> RedisStore:
        """A store on ``section`` (one URL, or the primary its sentinels name) that fails fast
        while Redis is down; ``password`` applies when the URL names none."""
        return cls(
            redis_client(section, password=password, sentinel_password=sentinel_password),
            prefix=section.key_prefix,
            window_len=section.window_len,
            expire_s=section.expire_hours * 3600,
            clock=clock or (lambda: datetime.now(UTC)),
        )

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    @asynccontextmanager
    async def _translated(self, what: str) -> AsyncIterator[None]:
        if time.monotonic() < self._paused_until:
            raise StoreUnavailable(f"redis {what}: not sent (a call timed out less than "
                                   f"{TIMEOUT_PAUSE_S:g}s ago)")
        try:
            yield
        except RedisError as exc:
            if isinstance(exc, RedisTimeoutError):
                self._timeouts += 1
                if self._timeouts >= TIMEOUTS_TO_PAUSE:
                    self._paused_until = time.monotonic() + TIMEOUT_PAUSE_S
            raise StoreUnavailable(f"redis {what}: {exc}", reachable=not isinstance(
                exc, RedisConnectionError | RedisTimeoutError)) from exc
        except OSError as exc:  # a socket error that escaped redis-py's own wrapping
            raise StoreUnavailable(f"redis {what}: {exc}") from exc
        self._timeouts = 0

    async def ping(self) -> None:
        async with self._translated("ping"):
            await self._r.ping()

    async def aclose(self) -> None:
        await self._r.aclose()

    # -- SweepState -------------------------------------------------------------------------

    async def load_memory(self) -> SweepMemory:
        from report.memory import SweepMemory

        adapter = TypeAdapter(SweepMemory)
        async with self._translated("load memory"):
            raw = await self._r.get(self.key("memory"))
        if raw is None:
            return SweepMemory()
        return adapter.validate_python(json.loads(raw))

    async def save_memory(self, memory: SweepMemory) -> None:
        from report.memory import SweepMemory

        data = TypeAdapter(SweepMemory).dump_python(memory)
        async with self._translated("save memory"):
            await self._r.set(self.key("memory"), dump_json(data), px=self.expire_ms)

    async def merge_history(
        self, cluster: str, job_id: str, points: Sequence[MetricPoint]
    ) -> list[MetricPoint]:
        """Add ``points`` (a later value for a step replaces the earlier) and return them all."""
        return (await self.merge_histories(cluster, {job_id: points}))[job_id]

    async def merge_histories(
        self, cluster: str, batch: Mapping[str, Sequence[MetricPoint]],
        newest: Mapping[str, int] | None = None, *, read_at: datetime | None = None,
    ) -> dict[str, list[MetricPoint]]:
        """:meth:`merge_history` for every job of a sweep in one pipeline: one round trip and
        O(jobs) commands whatever the number of jobs and points, and bytes that grow with the
        new points only (``bot.store_windows``): a window this process knows is checked, not
        read; one more round trip reads back the windows it does not know or that Redis
        changed behind it. ``newest``: per job, its log's newest step where ``batch`` holds
        only the points that changed (a window above it is a rewound run's: see
        ``bot.store_windows``); by default the batch's own. ``read_at``: when the read began
        (the cluster's ``collected_at``): a read older than the one a window holds leaves that
        window as it is (a merge never moves a window back in time).

        Not a transaction: each job's commands run in order, and a replica merging the same
        step at the same time writes the same value, so interleaving is harmless; a retry
        after a failover re-runs the whole batch, which is idempotent. A failed merge forgets
        the batch's windows (Redis may hold part of it): they are read back next time.
        """
        windows = self.windows
        read_ms = None if read_at is None else int(read_at.timestamp() * 1000)
        plans = [windows.plan(cluster, job_id, self.key("window", cluster, job_id),
                              self.key("window-rev", cluster, job_id), points,
                              newest=(newest or {}).get(job_id), read_ms=read_ms)
                 for job_id, points in batch.items()]
        out: dict[str, list[MetricPoint]] = {}
        try:
            async with self._translated("merge history"):
                answers = await self._merge_calls(plans)
            stale = []
            for plan, (previous, tail, *older) in zip(plans, answers, strict=True):
                # ``older``: the read began before the window's, which it left as it was
                merged = windows.settle(cluster, plan, previous, tail, bool(older))
                if merged is None:
                    stale.append(plan)
                else:
                    out[plan.job_id] = merged
            if stale:
                async with self._translated("read history"), \
                        self._r.pipeline(transaction=False) as p:
                    for plan in stale:
                        p.zrange(plan.key, 0, -1)
                    members = await p.execute()
                for plan, found in zip(stale, members, strict=True):
                    out[plan.job_id] = windows.keep(cluster, plan, found)
        except BaseException:
            for plan in plans:
                windows.forget(cluster, plan.job_id)
            raise
        windows.evict()
        return {job_id: out[job_id] for job_id in batch}

    async def _merge_calls(self, plans: Sequence[Any]) -> list[Any]:
        """Each plan's ``[previous revision, count or members]``: ``bot.store_windows``'s
        script called per :data:`JOBS_PER_CALL` plans, the calls pipelined (one round trip)."""
        windows = self.windows
        calls = []
        for chunk in _chunks(plans, JOBS_PER_CALL):
            keys = [key for plan in chunk for key in (plan.key, plan.rev_key)]
            args: list[Any] = [windows.window_len, windows.expire_ms]
            for plan in chunk:
                args += windows.arguments(plan)
            calls.append((keys, args))
        return await self._script_calls(MERGE_SHA, MERGE_LUA, calls)

    async def _script_calls(self, sha: str, lua: str,
                            calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
                            sent: Sequence[Any] | None = None) -> list[Any]:
        """Each call's answers, concatenated: ``(keys, args)`` calls of one script, pipelined
        (one round trip; none when the caller ``sent`` them by ``EVALSHA`` in its own
        pipeline and passes their results). A Redis without the script cached (restarted,
        failed over, flushed) answers NOSCRIPT before running anything: those calls go again
        with the script itself, once."""
        answers: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for by_sha in (True, False):  # EVALSHA; then EVAL for the calls answered NOSCRIPT
            if not pending:
                break
            if by_sha and sent is not None:
                results = list(sent)
            else:
                async with self._r.pipeline(transaction=False) as p:
                    for n in pending:
                        keys, args = calls[n]
                        if by_sha:
                            p.evalsha(sha, len(keys), *keys, *args)
                        else:
                            p.eval(lua, len(keys), *keys, *args)
                    results = await p.execute(raise_on_error=False)
            missing = []
            for n, result in zip(pending, results, strict=True):
                if by_sha and isinstance(result, NoScriptError):
                    missing.append(n)
                elif isinstance(result, Exception):
                    raise result
                else:
                    answers[n] = result
            pending = missing
        return [answer for chunk in answers for answer in chunk]

    async def load_history(self, cluster: str, job_id: str) -> list[MetricPoint]:
        async with self._translated("load history"):
            members: Any = await self._r.zrange(self.key("window", cluster, job_id), 0, -1)
        return [MetricPoint.model_validate_json(m) for m in members]

    async def load_probe_memory(self, cluster: str) -> Any:
        """A cluster probe's memory of the latest sweep (``bot.sweep.RememberingProbe``), or
        ``None``; kept ``expire_hours`` as every document."""
        return await self.get_doc(f"probe-memory:{cluster}")

    async def save_probe_memory(self, cluster: str, memory: Any) -> None:
        await self.put_doc(f"probe-memory:{cluster}", memory)

    async def load_log_states(self, cluster: str) -> dict[str, LogState]:
        """Every job's stored log state: the jobs' names in one round trip, then their states
        and texts (``bot.store_texts``) as one transaction in a second. A malformed or
        oversized state is deleted (one more trip, only then); a state whose text does not
        match it is skipped and left for the next save to replace: that job is read cold."""
        key = self.key("logs", cluster)
        text_key = functools.partial(self.key, "logtext", cluster)
        self.texts.forget(cluster)
        async with self._translated("load log states"):
            names = [_text(name) for name in await self._r.hkeys(key)]
            if not names:
                return {}
            async with self._r.pipeline(transaction=True) as p:
                p.hgetall(key)
                for job in names:
                    p.lrange(text_key(job), 0, -1)
                raw, *texts = await p.execute(raise_on_error=False)
        if isinstance(raw, Exception):
            raise raw
        # A text key of another type (an earlier build's STRING) is a missing text: that job
        # reads cold and its next save writes the key whole.
        text_of = {job: None if isinstance(text, Exception) else text
                   for job, text in zip(names, texts, strict=True)}
        states: dict[str, LogState] = {}
        bad: list[str] = []
        for field, value in raw.items():
            job_id = _text(field)
            if not store_texts.needs_text(value):
                if (state := decode_state(value)) is not None:
                    states[job_id] = state
                else:
                    bad.append(job_id)
                continue
            stored = store_texts.parse(value)
            if stored is None:
                bad.append(job_id)
                continue
            got = store_texts.decode(stored, text_of.get(job_id))
            if got is not None:
                states[job_id] = got[0]
                self.texts.keep(cluster, job_id, got[1])
        if bad:
            async with self._translated("drop log states"), \
                    self._r.pipeline(transaction=True) as p:
                p.hdel(key, *bad)
                p.delete(*map(text_key, bad))
                await p.execute()
        return states

    async def save_log_states(self, cluster: str, states: Mapping[str, LogState], *,
                              drop: Collection[str] = (), renew: Collection[str] = ()) -> None:
        """Write ``states``, delete the ``drop`` jobs' (and any state over the size bound),
        renew the expiry of the hash and of the ``renew`` jobs' texts (present, unchanged; each
        at most every quarter of the expiry, ``TextBook.due``):
        one round trip, a transaction; one more only for the texts that could not be
        appended to (``bot.store_texts``) or when Redis lost the script. A reader skips a
        job whose state and text disagree in between."""
        key = self.key("logs", cluster)
        # Encoding is CPU work (~0.1 ms a state): a worker thread keeps the event loop free
        # for the merge beside it and for Slack acks.
        encoded = (await asyncio.to_thread(_encode_states, states) if states else {})
        writes = {k: v for k, v in encoded.items() if v is not None}
        gone = [*drop, *(k for k, v in encoded.items() if v is None)]
        book = self.texts
        renew = book.due(cluster, renew, every_s=self.expire_ms / 4000)
        if not writes and not gone and not renew:
            return
        planned = [store_texts.plan(job, states[job], body, book.get(cluster, job))
                   for job, (_, body) in writes.items()]
        book.forget(cluster, [*gone, *writes])  # known again once Redis has answered
        appends = [w for w in planned if w.sent_from is not None]
        text_key = functools.partial(self.key, "logtext", cluster)
        calls = [([text_key(w.job_id) for w in chunk],
                  [self.expire_ms, store_texts.SLACK_BYTES,
                   *(a for w in chunk for a in (store_texts.stream_id(w.stream), w.begin, w.end,
                                                w.sent_from, w.payload))])
                 for chunk in _chunks(appends, JOBS_PER_CALL)]
        async with self._translated("save log states"):
            async with self._r.pipeline(transaction=True) as p:
                if writes:
                    p.hset(key, mapping={k: v for k, (v, _) in writes.items()})
                for w in planned:
                    if w.sent_from is None:
                        self._write_whole(p, text_key(w.job_id), w)
                if gone:
                    p.hdel(key, *gone)
                    p.delete(*map(text_key, gone))
                for job in renew:
                    p.pexpire(text_key(job), self.expire_ms)
                p.pexpire(key, self.expire_ms)
                for keys, args in calls:
                    p.evalsha(APPEND_SHA, len(keys), *keys, *args)
                results = await p.execute(raise_on_error=False)
            for result in results[: len(results) - len(calls)]:
                if isinstance(result, Exception):
                    raise result
            starts = await self._script_calls(APPEND_SHA, APPEND_LUA, calls,
                                              results[len(results) - len(calls):])
            done = [(w, w.begin) for w in planned if w.sent_from is None]
            refused = []
            for w, start in zip(appends, starts, strict=True):
                if start >= 0:
                    done.append((w, start))
                else:  # the key is not as this process saw it: the whole text
                    refused.append(store_texts.whole(w.job_id, states[w.job_id],
                                                     writes[w.job_id][1]))
            if refused:
                async with self._r.pipeline(transaction=True) as p:
                    for w in refused:
                        self._write_whole(p, text_key(w.job_id), w)
                    await p.execute()
        for w, start in (*done, *((w, w.begin) for w in refused)):
            book.keep(cluster, w.job_id, w.held(start))
        book.renewed(cluster, renew)

    def _write_whole(self, p: Any, key: str, write: store_texts.Write) -> None:
        """Queue ``write``'s whole text on pipeline ``p``: the key replaced, with its expiry."""
        p.delete(key)
        p.rpush(key, *write.items())
        p.pexpire(key, self.expire_ms)

    # -- documents and locks ------------------------------------------------------------------

    async def get_doc(self, name: str) -> Any:
        """The JSON document stored under ``name``, or ``None``."""
        async with self._translated("get"):
            raw = await self._r.get(self.key("doc", name))
        return None if raw is None else json.loads(raw)

    async def put_doc(
        self, name: str, value: Any, *, ttl_s: float | None = None, only_new: bool = False
    ) -> bool:
        """Store ``value``; with ``only_new`` only if absent. True if it was written.

        Without ``ttl_s`` the store's ``expire_hours`` applies: no document lives forever.
        """
        px = int(ttl_s * 1000) if ttl_s else self.expire_ms
        async with self._translated("put"):
            done = await self._r.set(self.key("doc", name), dump_json(value), px=px, nx=only_new)
        return bool(done)

    async def put_doc_if(self, name: str, value: Any, *, expected: Any,
                         ttl_s: float | None = None) -> bool:
        """Store ``value`` only if the document is still ``expected`` (``None``: absent), as
        one step (WATCH/MULTI: a write by anyone in between makes it False). True if written.

        What a replica kept in memory through an outage goes back this way: a newer copy
        another replica wrote meanwhile is not overwritten by an older one."""
        key = self.key("doc", name)
        px = int(ttl_s * 1000) if ttl_s else self.expire_ms
        async with self._translated("put if"), self._r.pipeline(transaction=True) as p:
            try:
                await p.watch(key)
                raw = await p.get(key)
                if (None if raw is None else json.loads(raw)) != expected:
                    return False
                p.multi()  # type: ignore[no-untyped-call]
                p.set(key, dump_json(value), px=px)
                await p.execute()
            except WatchError:
                return False
        return True

    async def delete_doc(self, name: str) -> None:
        async with self._translated("delete"):
            await self._r.delete(self.key("doc", name))

    async def acquire(self, name: str, holder: Mapping[str, Any], *, ttl_s: float) -> bool:
        """Take lock ``name`` (SET NX PX) for ``holder``; False if someone else holds it."""
        async with self._translated("lock"):
            done = await self._r.set(
                self.key("lock", name), dump_json(dict(holder)), nx=True, px=int(ttl_s * 1000)
            )
        return bool(done)

    async def holder(self, name: str) -> dict[str, Any] | None:
        async with self._translated("lock holder"):
            raw = await self._r.get(self.key("lock", name))
        return None if raw is None else dict(json.loads(raw))

    async def update_lock(self, name: str, holder: Mapping[str, Any], *, ttl_s: float) -> None:
        """Rewrite a held lock's record (e.g. ``in progress`` -> ``done``), resetting its expiry."""
        async with self._translated("lock update"):
            await self._r.set(self.key("lock", name), dump_json(dict(holder)), px=int(ttl_s * 1000))

    async def release(self, name: str) -> None:
        async with self._translated("unlock"):
            await self._r.delete(self.key("lock", name))

    async def locks(self, pattern: str) -> list[tuple[str, dict[str, Any]]]:
        """Every held lock whose name matches the glob ``pattern``, with its record."""
        found = []
        start = len(self.key("lock", ""))
        async with self._translated("scan locks"):
            async for key in self._r.scan_iter(match=self.key("lock", pattern), count=500):
                raw = await self._r.get(key)
                if raw is not None:
                    found.append((_text(key)[start:], dict(json.loads(raw))))
        return found

    async def claim_tick(self, tick: int, *, ttl_s: float, owner: str) -> bool:
        """True for exactly one replica per interval number ``tick``."""
        async with self._translated("tick lock"):
            done = await self._r.set(
                self.key("tick", str(tick)), owner, nx=True, px=int(ttl_s * 1000)
            )
        return bool(done)

    # -- sweep cache ---------------------------------------------------------------------------

    async def save_cache(self, payload: str, *, stamp: Any, ttl_s: float) -> None:
        """The sweep cache and the JSON ``stamp`` naming it, as one MULTI/EXEC transaction:
        two replicas writing at once never leave one's stamp beside the other's sweep."""
        px = max(1, int(ttl_s * 1000))
        async with self._translated("save cache"), self._r.pipeline(transaction=True) as p:
            p.set(self.key("sweep-cache"), payload, px=px)
            p.set(self.key("sweep-cache-stamp"), dump_json(stamp), px=px)
            await p.execute()

    async def load_cache_stamp(self) -> Any:
        """The stamp of the sweep cache (small: whether the cache is still the one in
        memory), or ``None``."""
        async with self._translated("load cache stamp"):
            raw = await self._r.get(self.key("sweep-cache-stamp"))
        return None if raw is None else json.loads(raw)

    async def load_stamped_cache(self) -> tuple[Any, str] | None:
        """(stamp or ``None``, sweep cache) read as one (``MGET``), or ``None`` without one."""
        async with self._translated("load cache"):
            stamp, raw = await self._r.mget(self.key("sweep-cache-stamp"), self.key("sweep-cache"))
        if raw is None:
            return None
        return (None if stamp is None else json.loads(stamp)), _text(raw)

    async def load_cache(self) -> str | None:
        """The sweep cache alone."""
        loaded = await self.load_stamped_cache()
        return None if loaded is None else loaded[1]

    # -- audit trail ---------------------------------------------------------------------------

    async def audit(self, entry: Mapping[str, Any]) -> None:
        """Append one audit entry (timestamped here) to the capped stream."""
        fields: dict[Any, Any] = {
            k: v if isinstance(v, str) else dump_json(v) for k, v in entry.items()
        }
        fields.setdefault("at", self._clock().isoformat())
        async with self._translated("audit"):
            await self._r.xadd(self.key("audit"), fields, maxlen=AUDIT_MAXLEN, approximate=True)

    async def audit_entries(self, count: int = 100) -> list[dict[str, str]]:
        """The latest ``count`` audit entries, oldest first."""
        async with self._translated("audit read"):
            rows: Any = await self._r.xrevrange(
                self.key("audit"), count=count
            )
        return [{_text(k): _text(v) for k, v in fields.items()} for _, fields in reversed(rows)]

    async def delete_prefix(self) -> int:
        """Delete every key under this store's prefix (tests and decommissioning)."""
        deleted = 0
        async with self._translated("delete prefix"):
            async for key in self._r.scan_iter(match=self.prefix + "*", count=500):
                deleted += await self._r.delete(key)
        return deleted


# -- the client --------------------------------------------------------------------------------

FAST_FAIL: dict[str, Any] = {
    "socket_timeout": 2.0,
    "socket_connect_timeout": 2.0,
    "retry": Retry(NoBackoff(), 1),
}
"""One immediate retry: after a failover the retry is what reconnects to the new primary
(redis-py's Sentinel pool re-asks the sentinels on every new connection)."""


def redis_client(
    section: RedisSection, *, password: str | None = None, sentinel_password: str | None = None,
) -> aioredis.Redis:
    """The client for ``[redis]``: redis-py's own URL parsing, TLS and Sentinel support.

    With ``sentinels``, ``Sentinel.master_for`` returns a client whose pool asks the sentinels
    for the primary whenever it connects, and drops a connection whose server answers
    ``READONLY`` (a demoted primary), so writes follow a failover without a restart.
    """
    # The CA file only means something on a TLS connection (plain ones refuse the keyword).
    secure = section.tls if section.sentinels else section.url.startswith("rediss://")
    tls: dict[str, Any] = {}
    if secure and section.tls_ca_file:
        tls["ssl_ca_certs"] = section.tls_ca_file
    if not section.sentinels:
        return aioredis.Redis.from_url(
            section.url, password=password, username=section.username,
            health_check_interval=10, **FAST_FAIL, **tls,
        )
    if secure:
        tls["ssl"] = True
    sentinel = Sentinel(
        [sentinel_address(a) for a in section.sentinels],
        sentinel_kwargs={"password": sentinel_password, "socket_timeout": 2.0,
                         "socket_connect_timeout": 2.0, **tls},
        username=section.username, password=password, db=section.db,
        health_check_interval=10, **FAST_FAIL, **tls,
    )
    assert section.service_name is not None  # RedisSection refuses sentinels without it
    client: aioredis.Redis = sentinel.master_for(section.service_name)
    return client


# -- sweep cache encoding -----------------------------------------------------------------------


def encode_sweep(result: SweepResult) -> str:
    """The parts of a sweep that answer commands (no raw facts: logs stay out of Redis)."""
    report = result.report
    return dump_json({
        "report": report.model_dump(),
        "grid": [g.model_dump() for g in report.grid],
        "details": [d.model_dump() for d in result.details.values()],
        "started_at": result.started_at,
        "duration_s": result.duration_s,
        "degraded": result.degraded,
    })


def decode_sweep(text: str) -> SweepResult:
    from bot.sweep import SweepResult
    from report.models import JobDetail, Report

    data = json.loads(text)
    report = Report.model_validate({**data["report"], "grid": data.get("grid", [])})
    details = [JobDetail.model_validate(d) for d in data["details"]]
    return SweepResult(
        report=report,
        details={(d.report.cluster, d.report.job_id): d for d in details},
        facts=(),
        started_at=datetime.fromisoformat(data["started_at"]),
        duration_s=float(data["duration_s"]),
        degraded=data.get("degraded"),
    )
