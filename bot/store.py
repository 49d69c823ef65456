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
    P seen:{name}              STRING the signatures of the Slack requests run (bot.replays),
                               and the trigger_ids of the commands and presses run (a
                               Slack retry), kept 11 minutes: a copy played back is refused
    P doc:{name}               STRING JSON documents: alert episodes, the message -> episode
                               index, incidents, signatures, the refused config edit
                               told (bot.refusals), the change replies and job-end DMs
                               Slack refused (digest:undelivered, notify:undelivered, kept
                               6 hours) (always with an expiry)
    P audit                    STREAM append-only audit trail (pruned to AUDIT_MAXLEN)

Every key expires or is pruned: nothing the bot writes grows without bound.

Floats are stored with Python's JSON (``NaN``/``Infinity`` allowed): a NaN loss is evidence.

The store is :class:`RedisStore`, built from parts: ``bot.store_base`` (the client, errors
translated, scripts), ``bot.store_logs`` (log states), ``bot.store_docs`` (documents, locks,
the sweep cache, audit); this module holds sweep memory and metric windows, the client's
construction and the sweep cache's encoding, and every name callers import from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from pydantic import TypeAdapter
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from bot.config import sentinel_address
from bot.store_base import (
    TIMEOUT_PAUSE_S,
    TIMEOUTS_TO_PAUSE,
    StoreBase,
    StoreUnavailable,
    _chunks,
    dump_json,
)
from bot.store_docs import AUDIT_MAXLEN, DocStore
from bot.store_logs import LogStateStore
from bot.store_windows import JOBS_PER_CALL, MERGE_LUA, MERGE_SHA
from probes.models import MetricPoint

if TYPE_CHECKING:
    from bot.config import RedisSection
    from bot.sweep_result import SweepResult
    from report.memory import SweepMemory

__all__ = [
    "AUDIT_MAXLEN", "FAST_FAIL", "TIMEOUTS_TO_PAUSE", "TIMEOUT_PAUSE_S", "RedisStore",
    "StoreBase", "StoreUnavailable", "decode_sweep", "dump_json", "encode_sweep",
    "redis_client",
]


class RedisStore(DocStore, LogStateStore):
    """The bot's Redis state: implements the Sweeper's ``SweepState`` plus locks and audit."""

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

    async def load_history(self, cluster: str, job_id: str) -> list[MetricPoint]:
        async with self._translated("load history"):
            members: Any = await self._r.zrange(self.key("window", cluster, job_id), 0, -1)
        return [MetricPoint.model_validate_json(m) for m in members]

    async def load_probe_memory(self, cluster: str) -> Any:
        """A cluster probe's memory of the latest sweep (``bot.sweep_seams.RememberingProbe``), or
        ``None``; kept ``expire_hours`` as every document."""
        return await self.get_doc(f"probe-memory:{cluster}")

    async def save_probe_memory(self, cluster: str, memory: Any) -> None:
        await self.put_doc(f"probe-memory:{cluster}", memory)



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
    from bot.sweep_result import SweepResult
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
