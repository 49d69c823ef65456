"""The metric windows of a sweep's jobs: kept in memory, merged into Redis by new points only.

Policy (issue 12, "cost bounded by what changed"): Redis holds each job's window (``P
window:{cluster}:{job}``, a ZSET step -> point JSON) as the durable copy, and beside it a
revision (``P window-rev:{cluster}:{job}``, a token each merge sets, new every time, same
expiry). A process keeps the windows it merged last in memory, in step order, each with the
token its merge set. A warm merge moves only the new points: per job, one ZREMRANGEBYSCORE
per run of consecutive new steps, one ZADD, the trim and the expiry, then ``SET token GET``
(the previous token back) and ZCARD. The window in memory after the same edits is Redis's
when the previous token is the one kept (no other merge ran since: another replica's, a
write lost in a failover or a flush all leave another) and the count matches (a window key
lost alone). ``SET ... GET`` needs Redis 6.2. Otherwise the job's whole window
is read back, in one more pipelined round trip for those jobs only; a job this process has
not merged yet (its first sweep) is read back whole in the same round trip as its commands.
Those commands run in Redis itself, one Lua script call (:data:`MERGE_LUA`) per
:data:`JOBS_PER_CALL` jobs: a client packs and parses one command per chunk where it packed
six or more per job (a warm 256-job merge ~100 -> ~20 ms of the sweep's CPU; each call is
atomic, a chunk at a time, so Redis serves others between chunks).
So a warm sweep of n jobs costs one round trip and O(n) commands, and its bytes grow with
the new points only, not with the windows.

A merge whose log's newest step is below the window's newest is a run that rewound (requeued,
or restarted from a checkpoint, logging its steps again from there): every kept step from the
merge's first new one on is stale and dropped, in Redis and in memory alike. The log's newest
step is the caller's (``newest``: the whole summary's, not only the points that changed since
the last merge: a point of an older step that changed, such as prime-rl's trainer line for
step N after its orchestrator's for N+1, is no rewind); by default the new points' newest.

A merge never moves a window backwards in time. Each merge names when its read began
(``read_ms``: the cluster's ``collected_at``), and the revision token carries it
(``{token}@{read_ms}``). A merge whose read began before the one the window holds (a ``/job``
on one replica that read the log before another replica's sweep, or its own, and merged
after it; a slow sweep overtaken by a faster one) changes nothing, not even a step's value:
the script answers the window as it is, and that is what the caller judges. Only a read at
least as new can drop steps as a rewind. A merge that names no time is never stale.

What is kept: the points themselves, by step; the points a merge writes are the caller's own
objects (the sweep's log summary), so the history a sweep judges and keeps shares them with
its facts. Kept windows are bounded by :data:`CACHED_POINTS` in all (about 1 KB a point);
past that, the jobs merged least recently are dropped after each merge and read from Redis
again when next merged (a cluster larger than the bound reads the same jobs back every
sweep and never thrashes the rest: eviction runs after a batch, oldest first).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from probes.models import MetricPoint

MERGE_LUA = """
-- KEYS: per job, its window (ZSET step -> point JSON) and its revision (STRING).
-- ARGV: window length, expiry (ms), then per job: the token to set, "1" to answer the window's
-- members (else its count), when its read began (ms, "" unknown), the log's newest step and
-- the first new step ("" with no new point), the number of runs and each run's first and
-- last step, the number of new points and each one's step and JSON.
-- Answers per job {the revision's previous value (nil: none), the members or the count}, or
-- {the revision, the members, 1} when the read began before the window's (nothing changed).
local cap, px = tonumber(ARGV[1]), ARGV[2]
local out, a = {}, 3
for j = 1, #KEYS, 2 do
  local key, rev, token, whole = KEYS[j], KEYS[j + 1], ARGV[a], ARGV[a + 1] == "1"
  local at, top, floor = ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local runs = tonumber(ARGV[a + 5])
  a = a + 6
  local held = redis.call("GET", rev)
  local held_at = held and tonumber(string.match(held, "@(%d+)$"))
  if at ~= "" and held_at and tonumber(at) < held_at then
    -- an older read than the window's newest: it must not move the window back in time
    a = a + 2 * runs
    a = a + 1 + 2 * tonumber(ARGV[a])
    out[#out + 1] = {held, redis.call("ZRANGE", key, 0, -1), 1}
  else
  if top ~= "" then
    local last = redis.call("ZRANGE", key, -1, -1, "WITHSCORES")
    if #last > 0 and tonumber(last[2]) > tonumber(top) then
      -- the run rewound (restarted from a checkpoint): its kept later steps are stale
      redis.call("ZREMRANGEBYSCORE", key, floor, "+inf")
    end
  end
  for _ = 1, runs do
    redis.call("ZREMRANGEBYSCORE", key, ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  local left = tonumber(ARGV[a])
  a = a + 1
  if left > 0 then
    while left > 0 do  -- ZADD in parts: unpack is bounded by Lua's C stack
      local n, pairs = math.min(left, 256), {}
      for k = 1, 2 * n do pairs[k] = ARGV[a + k - 1] end
      redis.call("ZADD", key, unpack(pairs))
      a, left = a + 2 * n, left - n
    end
    redis.call("ZREMRANGEBYRANK", key, 0, -(cap + 1))
  end
  redis.call("PEXPIRE", key, px)
  if at == "" and held_at then
    token = token .. "@" .. held_at  -- a merge naming no time keeps the window's
  end
  local previous = redis.call("SET", rev, token, "PX", px, "GET")
  if whole then
    out[#out + 1] = {previous, redis.call("ZRANGE", key, 0, -1)}
  else
    out[#out + 1] = {previous, redis.call("ZCARD", key)}
  end
  end
end
return out
"""
"""One merge call: every job's edits, its revision swapped, its count (or members) back."""
MERGE_SHA = hashlib.sha1(MERGE_LUA.encode()).hexdigest()
"""What ``EVALSHA`` names it by; a Redis that lost its script cache (a restart, a failover,
``SCRIPT FLUSH``) answers NOSCRIPT and is sent the script itself (``EVAL``), once."""
JOBS_PER_CALL = 500
"""Jobs per script call: each call is atomic, so a 5,000-job merge lets other clients in
between its ten calls (a few milliseconds each)."""

CACHED_POINTS = 100_000
"""Points kept in memory across every job's window (~1 KB each: ~100 MB, 500 full windows of
200 points); the rest are read back from Redis when merged."""


def point_json(point: MetricPoint) -> str:
    """A window member: the point's JSON as the store writes every value (NaN/Infinity kept,
    a NaN loss is evidence; times in ISO 8601)."""
    return json.dumps(point.model_dump(), allow_nan=True, separators=(",", ":"),
                      default=_iso)


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def runs(steps: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted distinct ``steps`` as inclusive runs of consecutive numbers."""
    out: list[tuple[int, int]] = []
    for step in steps:
        if out and out[-1][1] == step - 1:
            out[-1] = (out[-1][0], step)
        else:
            out.append((step, step))
    return out


Window = tuple[MetricPoint, ...]
"""A kept window: its points in step order, one per step (a tuple: 1.6 KB for 200 points
where a dict by step took 9 KB)."""


def _merged(window: Window, latest: dict[int, MetricPoint], cap: int,
            newest: int | None = None) -> Window:
    """``window`` with ``latest`` merged in (a new point replaces its step's), in step order,
    only its last ``cap`` steps (as ZREMRANGEBYRANK trims); ``newest``: the log's newest step
    (by default ``latest``'s)."""
    if cap <= 0:
        return ()
    if not latest:
        return window[-cap:]
    top = max(latest) if newest is None else newest
    if window and top < window[-1].step:  # a rewound run: its later steps are stale
        floor = min(latest)
        window = tuple(point for point in window if point.step < floor)
    if not window or min(latest) > window[-1].step:  # a log's new steps: appended
        return (*window, *(latest[step] for step in sorted(latest)))[-cap:]
    by_step = {point.step: point for point in window}
    by_step.update(latest)
    return tuple(by_step[step] for step in sorted(by_step)[-cap:])


@dataclass
class _Plan:
    """One job's part of a merge pipeline."""

    job_id: str
    key: str
    rev_key: str
    latest: dict[int, MetricPoint]
    """The new points by step (a later one for a step wins)."""
    expected: Window | None
    """The window after the merge as this process knows it (``None``: not known, read it)."""
    newest: int | None = None
    """The log's newest step (``None``: ``latest``'s)."""
    read_ms: int | None = None
    """When the merged read began (ms since the epoch; ``None``: not known, never stale)."""
    rev: str = ""
    """The token this process's window has (its last merge's)."""
    token: str = ""
    """The token this merge sets."""


class WindowCache:
    """The windows this process merged last, and the pipelined merge that keeps them true."""

    def __init__(self, *, window_len: int, expire_ms: int,
                 cached_points: int = CACHED_POINTS) -> None:
        self.window_len = window_len
        self.expire_ms = expire_ms
        self.cached_points = cached_points
        self._windows: OrderedDict[tuple[str, str], tuple[str, Window]] = OrderedDict()
        """Per job, least recently merged first: (token, window)."""
        self._process = uuid.uuid4().hex[:12]
        self._merges = 0
        self._points = 0
        self.read_back = 0
        """Windows read back whole so far (a process's first sweep, or a mismatch)."""

    def plan(self, cluster: str, job_id: str, key: str, rev_key: str,
             points: Sequence[MetricPoint], *, newest: int | None = None,
             read_ms: int | None = None) -> _Plan:
        """``newest``: the log's newest step, where ``points`` are only the changed ones;
        ``read_ms``: when the read began (an older one than the window's changes nothing)."""
        latest = {point.step: point for point in points}  # the later wins
        self._merges += 1
        token = f"{self._process}-{self._merges}"
        if read_ms is not None:
            token += f"@{read_ms}"
        known = self._windows.get((cluster, job_id))
        if known is None:
            return _Plan(job_id, key, rev_key, latest, None, newest, read_ms, token=token)
        rev, window = known
        return _Plan(job_id, key, rev_key, latest,
                     _merged(window, latest, self.window_len, newest), newest, read_ms, rev,
                     token)

    def arguments(self, plan: _Plan) -> list[str | int | float]:
        """``plan``'s part of :data:`MERGE_LUA`'s ARGV (its keys are ``plan.key`` and
        ``plan.rev_key``)."""
        spans = runs(sorted(plan.latest))
        edges: list[str | int | float] = ["", ""]
        if plan.latest:
            edges = [max(plan.latest) if plan.newest is None else plan.newest, min(plan.latest)]
        out: list[str | int | float] = [plan.token, 1 if plan.expected is None else 0,
                                        "" if plan.read_ms is None else plan.read_ms,
                                        *edges, len(spans)]
        for lo, hi in spans:  # steps are whole: exactly those go
            out += (lo, hi)
        out.append(len(plan.latest))
        for step, point in plan.latest.items():
            out += (step, point_json(point))
        return out

    def settle(self, cluster: str, plan: _Plan, previous: bytes | str | None,
               tail: Any, stale: bool = False) -> list[MetricPoint] | None:
        """The job's window after its edits, from the revision they replaced (``previous``)
        and the window's count (or members, for a window not known: ``tail``); ``None`` when
        the window in memory may differ from Redis's (read it back whole, then :meth:`keep`).
        ``stale``: the read was older than the window's, nothing was edited, ``tail`` is the
        window's members and ``previous`` its revision, kept as they are."""
        if stale:
            return self.keep(cluster, plan, tail, rev=_text(previous) or "")
        if plan.expected is None:
            return self.keep(cluster, plan, tail)
        if _text(previous) != plan.rev or int(tail) != len(plan.expected):
            return None
        return self._store(cluster, plan.job_id, plan.token, plan.expected)

    def keep(self, cluster: str, plan: _Plan, members: Sequence[bytes | str], *,
             rev: str | None = None) -> list[MetricPoint]:
        """A window read back whole (``members``, in score order) after this merge set its
        token (``rev``: the revision it has, when this merge set none), kept; a step this
        merge wrote keeps the caller's point when Redis holds its value (shared, not a
        copy)."""
        self.read_back += 1
        window: dict[int, MetricPoint] = {}
        for member in members:
            # Parsed by pydantic from JSON: its string cache shares the metric names between
            # points (~30 % of a kept window) and it is ~10x faster than json.loads.
            point = MetricPoint.model_validate_json(member)
            mine = plan.latest.get(point.step)
            window[point.step] = mine if mine is not None and mine == point else point
        # The window was read after the token was set: it may hold a later merge too, whose
        # token the next merge then gets back (read back again), never the other way round.
        return self._store(cluster, plan.job_id, plan.token if rev is None else rev,
                           tuple(window.values()))

    def _store(self, cluster: str, job_id: str, rev: str, window: Window) -> list[MetricPoint]:
        self.forget(cluster, job_id)
        self._windows[cluster, job_id] = (rev, window)
        self._points += len(window)
        return list(window)

    def forget(self, cluster: str, job_id: str) -> None:
        old = self._windows.pop((cluster, job_id), None)
        self._points -= len(old[1]) if old is not None else 0

    def evict(self) -> None:
        """Drop the least recently merged windows until the kept points fit the bound."""
        while self._points > self.cached_points and self._windows:
            _, (_, old) = self._windows.popitem(last=False)
            self._points -= len(old)

    @property
    def points(self) -> int:
        """Points kept in memory now (all windows)."""
        return self._points
