"""Windows kept in memory between merges (``bot.store_windows``), against a real Redis.

A warm merge sends the new points and reads back two integers per job, never the window;
whatever happens to Redis behind a store (another replica merging, a deleted or trimmed key)
every merge still returns exactly the window Redis holds, and the kept points stay bounded.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, ConnectionPool

from bot.store import RedisStore, StoreUnavailable
from bot.store_windows import JOBS_PER_CALL
from probes.models import MetricPoint
from tests.bot.conftest import make_store


def points(*steps: int, loss: float = 1.0) -> list[MetricPoint]:
    return [MetricPoint(step=s, values={"loss": loss, "grad_norm": 0.1 * s}) for s in steps]


class Measured(Connection):
    """Counts the bytes of every string Redis answers (the payload a reply moves) and names
    the commands sent (each of a pipeline's too: it packs them one by one)."""

    received = 0
    commands: ClassVar[list[str]] = []

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        reply = await super().read_response(*args, **kwargs)
        Measured.received += _payload(reply)
        return reply

    def pack_command(self, *args: Any) -> Any:
        Measured.commands.append(str(args[0]))
        return super().pack_command(*args)


def _payload(reply: Any) -> int:
    if isinstance(reply, bytes | str):
        return len(reply)
    if isinstance(reply, list | tuple):
        return sum(_payload(item) for item in reply)
    return 0


@pytest.fixture
async def measured(redis_server: str, prefix: str) -> AsyncIterator[RedisStore]:
    pool = ConnectionPool.from_url(redis_server, connection_class=Measured)
    instance = RedisStore(aioredis.Redis(connection_pool=pool), prefix=prefix, window_len=200)
    try:
        yield instance
    finally:
        await instance.delete_prefix()
        await instance.aclose()


async def test_a_warm_merge_moves_the_new_points_not_the_window(measured: RedisStore) -> None:
    """First merge of 100 jobs reads their windows back (nothing known yet); the next merge
    of 3 new steps each gets back a revision token and a count per job, no point, and
    returns what Redis holds."""
    jobs = [str(n) for n in range(100)]
    await measured.merge_histories("alpha", {j: points(*range(1, 201)) for j in jobs})
    Measured.received = 0
    first_reads = measured.windows.read_back
    merged = await measured.merge_histories("alpha", {j: points(201, 202, 203) for j in jobs})
    assert Measured.received <= 32 * len(jobs)  # a token each: one point's JSON is ~60 bytes
    assert measured.windows.read_back == first_reads
    for job in (jobs[0], jobs[-1]):
        assert [p.step for p in merged[job]] == list(range(4, 204))
        assert merged[job] == await measured.load_history("alpha", job)


async def test_a_merge_is_one_script_call_per_chunk_of_jobs(measured: RedisStore) -> None:
    """The per-job edits run in Redis (one script call per ``JOBS_PER_CALL`` jobs, the calls
    pipelined), not as six or more commands per job packed by the client; a Redis that lost
    the script (restart, failover, SCRIPT FLUSH) is sent it again and the merge still returns
    Redis's windows."""
    jobs = [str(n) for n in range(JOBS_PER_CALL + 20)]
    await measured.merge_histories("alpha", {j: points(1, 2) for j in jobs})
    Measured.commands = []
    merged = await measured.merge_histories("alpha", {j: points(3, 5, 6) for j in jobs})
    assert Measured.commands == ["EVALSHA", "EVALSHA"]
    assert [p.step for p in merged[jobs[-1]]] == [1, 2, 3, 5, 6]
    await measured._r.script_flush()
    Measured.commands = []
    merged = await measured.merge_histories("alpha", {j: points(7) for j in jobs})
    assert Measured.commands == ["EVALSHA", "EVALSHA", "EVAL", "EVAL"]
    assert measured.windows.read_back == len(jobs)  # the first merge's only: none read again
    for job in (jobs[0], jobs[-1]):
        assert [p.step for p in merged[job]] == [1, 2, 3, 5, 6, 7]
        assert merged[job] == await measured.load_history("alpha", job)
    # More new points than one ZADD of the script takes (Lua's unpack is bounded): all go,
    # then the window is trimmed to its length.
    long = (await measured.merge_histories("alpha", {"x": points(*range(1, 701))}))["x"]
    assert [p.step for p in long] == list(range(501, 701))
    assert long == await measured.load_history("alpha", "x")


async def test_merged_points_are_the_callers_own(store: RedisStore) -> None:
    """The window a merge returns holds the caller's point objects for the steps it wrote:
    a sweep's kept history shares them with its facts (memory per job)."""
    first = points(1, 2, 3)
    merged = (await store.merge_histories("alpha", {"1": first}))["1"]
    assert all(kept is mine for kept, mine in zip(merged, first, strict=True))
    new = points(4)
    merged = (await store.merge_histories("alpha", {"1": new}))["1"]
    assert merged[0] is first[0] and merged[-1] is new[0]


async def test_a_window_changed_behind_the_store_is_read_back(store: RedisStore) -> None:
    """A deleted key (flush, failover that lost writes) and steps another replica merged are
    noticed by the counts, and the merge returns Redis's window."""
    await store.merge_histories("alpha", {"1": points(1, 2, 3), "2": points(1, 2)})
    await store._r.delete(store.key("window", "alpha", "1"))
    other = make_store(store.prefix)
    try:
        await other.merge_histories("alpha", {"2": points(3, 4)})  # behind this store
        merged = await store.merge_histories("alpha", {"1": points(4), "2": points(5)})
    finally:
        await other.aclose()
    assert [p.step for p in merged["1"]] == [4]
    assert [p.step for p in merged["2"]] == [1, 2, 3, 4, 5]
    for job in ("1", "2"):
        assert merged[job] == await store.load_history("alpha", job)


async def test_another_replicas_value_for_a_kept_step_is_seen(store: RedisStore) -> None:
    """Another replica rewrote a step this store keeps (same count, same steps): the
    revision tells, and the merge returns the other value."""
    await store.merge_histories("alpha", {"1": points(3, loss=0.5)})
    other = make_store(store.prefix)
    try:
        await other.merge_histories("alpha", {"1": points(3, loss=0.75)})
    finally:
        await other.aclose()
    merged = (await store.merge_histories("alpha", {"1": points(4)}))["1"]
    assert [p.values["loss"] for p in merged] == [0.75, 1.0]
    assert merged == await store.load_history("alpha", "1")


async def test_kept_points_stay_within_the_bound(redis_server: str, prefix: str) -> None:
    """Past the bound the least recently merged windows go (after the batch, so the same jobs
    stay kept sweep after sweep); every merge still returns Redis's window."""
    client = aioredis.Redis.from_url(redis_server)
    small = RedisStore(client, prefix=prefix, window_len=10, cached_points=25)
    try:
        for sweep in range(3):
            batch = {str(n): points(sweep * 5 + 1, sweep * 5 + 2) for n in range(6)}
            merged = await small.merge_histories("alpha", batch)
            assert small.windows.points <= 25
            for job in batch:
                assert merged[job] == await small.load_history("alpha", job)
        kept = small.windows.read_back
        await small.merge_histories("alpha", {"5": points(20)})  # the last merged: kept
        assert small.windows.read_back == kept
    finally:
        await small.delete_prefix()
        await small.aclose()


async def test_a_failed_merge_forgets_the_batch(store: RedisStore) -> None:
    """A merge that fails part-way leaves Redis unknown: those windows are read back next."""
    await store.merge_histories("alpha", {"1": points(1, 2)})
    reads = store.windows.read_back
    await store._r.aclose()
    broken = store._r
    store._r = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    with pytest.raises(StoreUnavailable):
        await store.merge_histories("alpha", {"1": points(3)})
    await store._r.aclose()
    store._r = broken
    merged = await store.merge_histories("alpha", {"1": points(3)})
    assert store.windows.read_back == reads + 1
    assert [p.step for p in merged["1"]] == [1, 2, 3]


STEP = st.integers(min_value=1, max_value=10)
ACTION = st.one_of(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["1", "2"]),
              st.lists(STEP, max_size=6), st.sampled_from([0.5, 0.25, float("nan")])),
    st.tuples(st.sampled_from(["drop", "flush"]), st.sampled_from(["1", "2"]), st.just([]),
              st.just(0.0)),
)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(ACTION, min_size=1, max_size=12))
async def test_two_replicas_always_return_what_redis_holds(
    redis_server: str, actions: list[tuple[str, str, list[int], float]],
) -> None:
    """Two stores on one prefix merge in any interleaving (repeated steps, another value for
    a step, a window key lost alone or with its revision): each merge returns Redis's
    window, point by point."""
    prefix = f"jt-test-{uuid.uuid4().hex[:10]}:"
    replicas = {"a": make_store(prefix, url=redis_server, window_len=8),
                "b": make_store(prefix, url=redis_server, window_len=8)}
    try:
        for who, job, steps, loss in actions:
            if who in ("drop", "flush"):
                keys = [replicas["a"].key("window", "alpha", job)]
                if who == "flush":
                    keys.append(replicas["a"].key("window-rev", "alpha", job))
                await replicas["a"]._r.delete(*keys)
                continue
            store = replicas[who]
            merged = (await store.merge_histories("alpha", {job: points(*steps, loss=loss)}))[job]
            stored = await store.load_history("alpha", job)
            assert [p.model_dump_json() for p in merged] == [p.model_dump_json() for p in stored]
    finally:
        await replicas["a"].delete_prefix()
        for store in replicas.values():
            await store.aclose()


async def test_a_run_that_rewound_its_steps_drops_its_stale_later_ones(store: RedisStore) -> None:
    """A run requeued or restarted from its checkpoint logs its steps again from there (verl's
    ``step:21`` after ``step:31``): the window kept the old run's 25-31 beside the new 21-24,
    so the row stayed at step 31 with the old values and the Trend compared the new run's
    values with the stale ones (found by the hostile-cluster dry-run). A merge whose newest
    step is below the window's newest drops every kept step from its first one on; known or
    unknown to this process, the window Redis holds is the same."""
    await store.merge_histories("alpha", {"1": points(*range(1, 32), loss=1.0)})
    merged = await store.merge_histories("alpha", {"1": points(21, 22, 23, 24, loss=9.5)})
    assert [p.step for p in merged["1"]] == list(range(1, 25))
    assert merged["1"][-1].values["loss"] == 9.5 and merged["1"][19].values["loss"] == 1.0
    assert merged["1"] == await store.load_history("alpha", "1")
    other = make_store(store.prefix)  # a process that never merged this window
    try:
        await other.merge_histories("alpha", {"2": points(*range(1, 32))})
        fresh = make_store(store.prefix)
        try:
            again = await fresh.merge_histories("alpha", {"2": points(10, 11, loss=7.0)})
        finally:
            await fresh.aclose()
    finally:
        await other.aclose()
    assert [p.step for p in again["2"]] == list(range(1, 12))
    assert again["2"] == await store.load_history("alpha", "2")
    # A merge repeating recent steps (nothing new) or adding later ones drops nothing.
    same = await store.merge_histories("alpha", {"1": points(23, 24, loss=9.5)})
    assert [p.step for p in same["1"]] == list(range(1, 25))
