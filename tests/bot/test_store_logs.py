"""The warm sweeps' log states in a real Redis: one round trip each way whatever the number of
jobs, pruned and expiring, and a malformed or oversized entry never trusted."""

from __future__ import annotations

import asyncio

import pytest

from bot.store import RedisStore
from bot.store_texts import APPEND_LUA
from probes.logs.incremental import parse_increment
from probes.slurm.cursors import MAX_STATE_BYTES, LogCursor, LogState
from tests.bot.conftest import counts


def log_state(path: str, offset: int = 120, text: str = "{'loss': 0.5}\n") -> LogState:
    """A state as a tracked read leaves it (the carry from the real fold)."""
    _, carry = parse_increment(None, text)
    return LogState(cursor=LogCursor(path=path, dev=2049, ino=77, offset=offset,
                                     digest="ab" * 16, dirs=("/ckpts",)),
                    carry=carry, recent=text)


async def round_trips(store: RedisStore, jobs: int) -> tuple[int, int, int]:
    """``(save, save again, load)`` round trips for ``jobs`` states (and as many pruned)."""
    states = {str(n): log_state(f"/logs/{n}.out") for n in range(jobs)}
    # A Redis that has the append script cached (its first use after a restart or a flush
    # costs one more trip: tests/bot/test_store_texts.py).
    await store._r.script_load(APPEND_LUA)
    before = counts(store)[0]
    await store.save_log_states("alpha", states, drop=[f"gone{n}" for n in range(jobs)])
    saved = counts(store)[0] - before
    before = counts(store)[0]
    await store.save_log_states("alpha", states)  # a warm save: the texts appended to
    again = counts(store)[0] - before
    before = counts(store)[0]
    assert await store.load_log_states("alpha") == states
    return saved, again, counts(store)[0] - before


async def test_states_cost_one_round_trip_to_save_and_two_to_load_whatever_the_jobs(
        counted: RedisStore) -> None:
    """Saving (writes, appends, prunes, expiry) is one pipelined round trip, cold or warm;
    loading (a process's first sweep of the cluster) is two, the states then their texts
    (``bot.store_texts``); for one job as for five hundred."""
    assert await round_trips(counted, 1) == (1, 1, 2)
    assert await round_trips(counted, 500) == (1, 1, 2)


async def test_states_round_trip_and_gone_jobs_are_pruned(store: RedisStore) -> None:
    """States come back as saved; ``drop`` deletes the jobs that left the sweep."""
    await store.save_log_states("alpha", {"1": log_state("/a"), "2": log_state("/b")})
    await store.save_log_states("alpha", {"3": log_state("/c")}, drop=["1"])
    assert await store.load_log_states("alpha") == {"2": log_state("/b"), "3": log_state("/c")}
    assert await store.load_log_states("beta") == {}


async def test_the_state_key_expires(store: RedisStore) -> None:
    """The cluster's hash carries the store's expiry, renewed by every save."""
    await store.save_log_states("alpha", {"1": log_state("/a")})
    ttl = await store._r.pttl(store.key("logs", "alpha"))
    assert 0 < ttl <= store.expire_ms


@pytest.mark.parametrize("raw", [
    b"not json", b'{"cursor": {"path": "/a"}}', b'{"cursor": null, "carry": {}}',
    log_state("/a").model_dump_json().replace('"offset":120', '"offset":-1').encode(),
    log_state("/a").model_dump_json().replace('"abab', '"zzab').encode(),
    b" " * (MAX_STATE_BYTES + 1),
], ids=["garbage", "partial", "null_cursor", "negative_offset", "bad_digest", "oversized"])
async def test_a_malformed_or_oversized_state_is_dropped(store: RedisStore, raw: bytes) -> None:
    """Such an entry is not returned (that job reads cold) and is deleted; the others stand."""
    key = store.key("logs", "alpha")
    await store.save_log_states("alpha", {"1": log_state("/a")})
    await store._r.hset(key, "2", raw)
    assert await store.load_log_states("alpha") == {"1": log_state("/a")}
    assert await store._r.hkeys(key) == [b"1"]


async def test_an_oversized_state_is_not_written(store: RedisStore) -> None:
    """A state over the bound is left out (and an older one for that job deleted)."""
    await store.save_log_states("alpha", {"1": log_state("/a")})
    huge = log_state("/a").model_copy(update={"recent": "x" * MAX_STATE_BYTES})
    await store.save_log_states("alpha", {"1": huge, "2": log_state("/b")})
    assert await store.load_log_states("alpha") == {"2": log_state("/b")}


async def test_states_are_encoded_off_the_event_loop(
        store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Encoding (~0.1 ms a state, tens of ms a warm sweep) runs in a worker thread, so the
    merge beside the save and Slack acks are not held up by it; what is stored is the same."""
    import threading

    import bot.store_texts

    threads: set[int] = set()
    encode = bot.store_texts.encode

    def noted(state: LogState) -> tuple[str, bytes] | None:
        threads.add(threading.get_ident())
        return encode(state)

    monkeypatch.setattr(bot.store_texts, "encode", noted)
    states = {str(n): log_state(f"/logs/{n}.out") for n in range(3)}
    await store.save_log_states("alpha", states)
    assert threads and threading.get_ident() not in threads
    assert await store.load_log_states("alpha") == states


async def test_a_new_connections_handshake_is_no_round_trip_of_the_callers(
        counted: RedisStore) -> None:
    """The counter the round-trip tests read counts the caller's commands only: the pool
    opening one more connection (CLIENT SETINFO ... on connect, 4 packets with redis-py 8)
    when commands overlap is timing, and made the real-SLURM sweep count flaky (8 == 4)."""
    before = counts(counted)[0]
    await counted.ping()
    await asyncio.gather(*(counted.ping() for _ in range(5)))  # the pool grows here
    assert counts(counted)[0] - before == 6
