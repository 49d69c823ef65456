"""The metric windows of a sweep's jobs: kept in memory, merged into Redis by new points only.

Policy (issue 12, "cost bounded by what changed"): Redis holds each job's window (``P
window:{cluster}:{job}``, a ZSET step -> point JSON) as the durable copy, and beside it a
revision (``P window-rev:{cluster}:{job}``, a counter every merge increments, same expiry). A
process keeps the windows it merged last in memory, as points by step, each with the
revision its merge got. A warm merge moves only the new points: per job, one
ZREMRANGEBYSCORE per run of consecutive new steps, one ZADD, the trim and the expiries, then
INCR of the revision, ZCARD and ZCOUNT over the window it expects (three integers back). The
window in memory after the same edits is Redis's when the revision is the kept one plus one
(no other merge ran since: another replica's, a lost write after a failover or a flush all
change it) and both counts match (a window key lost alone). Otherwise the job's whole window
is read back, in one more pipelined round trip for those jobs only; a job this process has
not merged yet (its first sweep) is read back whole in the same round trip as its commands.
So a warm sweep of n jobs costs one round trip and O(n) commands, and its bytes grow with
the new points only, not with the windows.

What is kept: the points themselves, by step; the points a merge writes are the caller's own
objects (the sweep's log summary), so the history a sweep judges and keeps shares them with
its facts. Kept windows are bounded by :data:`CACHED_POINTS` in all (about 1 KB a point);
past that, the jobs merged least recently are dropped after each merge and read from Redis
again when next merged (a cluster larger than the bound reads the same jobs back every
sweep and never thrashes the rest: eviction runs after a batch, oldest first).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from probes.models import MetricPoint

CACHED_POINTS = 100_000
"""Points kept in memory across every job's window (~1 KB each: ~100 MB, 500 full windows of
200 points); the rest are read back from Redis when merged."""


def point_json(point: MetricPoint) -> str:
    """A window member: the point's JSON as the store writes every value (NaN/Infinity kept,
    a NaN loss is evidence; times in ISO 8601)."""
    return json.dumps(point.model_dump(), allow_nan=True, separators=(",", ":"),
                      default=_iso)


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


def _capped(window: dict[int, MetricPoint], cap: int) -> dict[int, MetricPoint]:
    """``window`` (any order) sorted by step, only its last ``cap`` steps (ZREMRANGEBYRANK)."""
    steps = sorted(window)[-cap:] if cap > 0 else []
    return {step: window[step] for step in steps}


@dataclass
class _Plan:
    """One job's part of a merge pipeline."""

    job_id: str
    key: str
    rev_key: str
    latest: dict[int, MetricPoint]
    """The new points by step (a later one for a step wins)."""
    expected: dict[int, MetricPoint] | None
    """The window after the merge as this process knows it (``None``: not known, read it)."""
    rev: int = 0
    """The revision this process's window has (its last merge's)."""
    replies: int = 0
    """Replies of this job's commands in the pipeline (the last three are checked)."""


class WindowCache:
    """The windows this process merged last, and the pipelined merge that keeps them true."""

    def __init__(self, *, window_len: int, expire_ms: int,
                 cached_points: int = CACHED_POINTS) -> None:
        self.window_len = window_len
        self.expire_ms = expire_ms
        self.cached_points = cached_points
        self._windows: OrderedDict[tuple[str, str], tuple[int, dict[int, MetricPoint]]] = \
            OrderedDict()
        """Per job, least recently merged first: (revision, window by step in step order)."""
        self._points = 0
        self.read_back = 0
        """Windows read back whole so far (a process's first sweep, or a mismatch)."""

    def plan(self, cluster: str, job_id: str, key: str, rev_key: str,
             points: Sequence[MetricPoint]) -> _Plan:
        latest = {point.step: point for point in points}  # the later wins
        known = self._windows.get((cluster, job_id))
        if known is None:
            return _Plan(job_id, key, rev_key, latest, None)
        rev, window = known
        return _Plan(job_id, key, rev_key, latest, _capped({**window, **latest},
                                                            self.window_len), rev)

    def queue(self, pipe: Any, plan: _Plan) -> None:
        """Add ``plan``'s commands to the pipeline ``pipe`` (noting how many replies)."""
        spans = runs(sorted(plan.latest))
        for lo, hi in spans:  # steps are whole: exactly those go
            pipe.zremrangebyscore(plan.key, lo, hi)
        if plan.latest:
            pipe.zadd(plan.key, {point_json(point): step for step, point in plan.latest.items()})
            pipe.zremrangebyrank(plan.key, 0, -(self.window_len + 1))
        pipe.pexpire(plan.key, self.expire_ms)
        pipe.incr(plan.rev_key)
        pipe.pexpire(plan.rev_key, self.expire_ms)
        if plan.expected is None:
            pipe.zrange(plan.key, 0, -1)
        else:
            pipe.zcard(plan.key)
            steps = list(plan.expected)
            pipe.zcount(plan.key, steps[0] if steps else 0, steps[-1] if steps else -1)
        plan.replies = len(spans) + (2 if plan.latest else 0) + (4 if plan.expected is None
                                                                  else 5)

    def settle(self, cluster: str, plan: _Plan, replies: Sequence[Any]
               ) -> list[MetricPoint] | None:
        """The job's window after its commands' ``replies``; ``None`` when the window in
        memory may differ from Redis's (read it back whole, then :meth:`keep`)."""
        if plan.expected is None:
            return self.keep(cluster, plan, replies[-3], replies[-1])
        rev, card, count = int(replies[-4]), int(replies[-2]), int(replies[-1])
        if rev != plan.rev + 1 or card != len(plan.expected) or count != card:
            plan.rev = rev
            return None
        return self._store(cluster, plan.job_id, rev, plan.expected)

    def keep(self, cluster: str, plan: _Plan, rev: Any, members: Sequence[bytes | str],
             ) -> list[MetricPoint]:
        """A window read back whole (``members``, in score order) after revision ``rev``,
        kept; a step this merge wrote keeps the caller's point when Redis holds its value
        (shared, not a copy)."""
        self.read_back += 1
        window: dict[int, MetricPoint] = {}
        for member in members:
            # Parsed by pydantic from JSON: its string cache shares the metric names between
            # points (~30 % of a kept window) and it is ~10x faster than json.loads.
            point = MetricPoint.model_validate_json(member)
            mine = plan.latest.get(point.step)
            window[point.step] = mine if mine is not None and mine == point else point
        # The window was read after the revision: it may hold a later merge too, which the
        # next merge's revision then shows (read back again), never the other way round.
        return self._store(cluster, plan.job_id, int(rev), window)

    def _store(self, cluster: str, job_id: str, rev: int, window: dict[int, MetricPoint]
               ) -> list[MetricPoint]:
        self.forget(cluster, job_id)
        self._windows[cluster, job_id] = (rev, window)
        self._points += len(window)
        return list(window.values())

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
