"""A job's stored log text is written by its new bytes only, and never read back wrong
(``bot.store_texts``), in a real Redis: real trainer logs grown sweep by sweep through the
collector and the fold, each save loaded again by a second store (a restarted bot)."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, ConnectionPool

from bot import store_texts
from bot.store import RedisStore
from probes.slurm.cursors import RECENT_CHARS, LogState, fold_job
from tests.bot.conftest import make_store
from tests.bot.test_store_logs import log_state
from tests.probes.slurm.test_incremental_fold import FIX, MTIME, RECORD, read


class ByteCounting(Connection):
    """A real connection that counts the bytes it sends."""

    sent = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        packed = [command] if isinstance(command, bytes | str) else command
        ByteCounting.sent += sum(len(part) for part in packed)
        await super().send_packed_command(command, check_health)


@pytest.fixture
async def counted(redis_server: str, prefix: str) -> AsyncIterator[RedisStore]:
    pool = ConnectionPool.from_url(redis_server, connection_class=ByteCounting)
    store = RedisStore(aioredis.Redis(connection_pool=pool), prefix=prefix)
    await store.ping()
    try:
        yield store
    finally:
        await store.delete_prefix()
        await store.aclose()


@pytest.fixture
async def other(redis_server: str, prefix: str) -> AsyncIterator[RedisStore]:
    """A second store on the same keys: a restarted bot, or another replica."""
    store = make_store(prefix, url=redis_server)
    try:
        yield store
    finally:
        await store.aclose()


def sweep(log: Path, prior: LogState | None) -> LogState:
    """One warm sweep's fold of ``log`` (the collector's tracked read), its new state."""
    record = RECORD.model_copy(update={"stdout_path": str(log)})
    _, state = fold_job(record, read(log, prior), prior, aliases={}, benign_patterns=())
    assert state is not None
    return state


def grown(log: Path, data: bytes, cuts: list[int]) -> list[LogState]:
    """``data`` written to ``log`` up to each cut in turn, and each sweep's state."""
    states: list[LogState] = []
    start = 0
    for end in [*cuts, len(data)]:
        with log.open("ab") as fh:
            fh.write(data[start:end])
        os.utime(log, (MTIME, MTIME))
        states.append(sweep(log, states[-1] if states else None))
        start = end
    return states


def same(loaded: dict[str, LogState], states: dict[str, LogState]) -> bool:
    """The states' fields equal (what a process keeps beside them, e.g. its last summary,
    is never stored); compared by repr, so a NaN equals a NaN."""
    return {k: repr(v) for k, v in loaded.items()} == {k: repr(v) for k, v in states.items()}


async def text_of(store: RedisStore, job: str = "7") -> bytes:
    raw = await store._r.get(store.key("logtext", "alpha", job))
    assert isinstance(raw, bytes)
    return raw


@pytest.mark.parametrize("name", ["verl-0.9.1/console.log", "trl-1.16.0/grpo_healthy.out",
                                  "hf-transformers-5.24.0/sft_nan.out"])
async def test_every_save_loads_back_as_the_state_in_memory(
        store: RedisStore, other: RedisStore, tmp_path: Path, name: str) -> None:
    """A real log grown at 40 random cuts (seeded), each sweep's state saved: a second store
    loads exactly that state every time (text, offset, line), though most saves appended."""
    data = (FIX / name).read_bytes()
    cuts = sorted(random.Random(name).sample(range(1, len(data)), 40))
    log = tmp_path / "run.out"
    start, tokens = 0, set()
    prior: LogState | None = None
    for end in [*cuts, len(data)]:
        with log.open("ab") as fh:
            fh.write(data[start:end])
        os.utime(log, (MTIME, MTIME))
        state = sweep(log, prior)
        await store.save_log_states("alpha", {"7": state})
        assert same(await other.load_log_states("alpha"), {"7": state})
        tokens.add((await text_of(store))[:32])
        prior, start = state, end
    assert len(tokens) < 20  # most saves appended (a whole write takes a new token)
    stored = await text_of(store)
    assert len(stored) <= len(prior.recent.encode()) + store_texts.SLACK_BYTES + 64


async def test_a_warm_save_sends_the_new_bytes_not_the_text(
        counted: RedisStore, tmp_path: Path) -> None:
    """Forty jobs with 16 KB of recent text each, then 300 more bytes each: the warm save
    sends each state's JSON (a few KB: cursor, carry) and its 300 new bytes, not its text."""
    data = (FIX / "verl-0.9.1/console.log").read_bytes()
    states: dict[str, list[LogState]] = {}
    for n in range(40):
        log = tmp_path / f"{n}.out"
        states[str(n)] = grown(log, data, [len(data) - 300 - n])
    before = ByteCounting.sent
    await counted.save_log_states("alpha", {job: s[0] for job, s in states.items()})
    cold = ByteCounting.sent - before
    before = ByteCounting.sent
    await counted.save_log_states("alpha", {job: s[1] for job, s in states.items()})
    warm = ByteCounting.sent - before
    assert cold > 40 * RECENT_CHARS
    states_json = sum(len(encoded[0]) for s in states.values()
                      if (encoded := store_texts.encode(s[1])) is not None)
    assert warm < states_json + 40 * (300 + 200)  # 200: each job's keys and arguments
    assert same(await counted.load_log_states("alpha"), {job: s[1] for job, s in states.items()})


async def test_another_writer_between_two_saves_makes_the_next_one_whole(
        store: RedisStore, other: RedisStore, tmp_path: Path) -> None:
    """Another replica's save (its own token), a write lost in a failover (the key gone) or
    a double append: the compare-and-append refuses, the text is written whole, and what
    loads is the state saved last."""
    data = (FIX / "trl-1.16.0/grpo_healthy.out").read_bytes()
    cuts = sorted(random.Random(3).sample(range(1, len(data)), 5))
    states = grown(tmp_path / "run.out", data, cuts)
    await store.save_log_states("alpha", {"7": states[0]})
    await other.save_log_states("alpha", {"7": states[1]})  # another replica's whole write
    await store.save_log_states("alpha", {"7": states[2]})
    assert same(await other.load_log_states("alpha"), {"7": states[2]})
    await store._r.delete(store.key("logtext", "alpha", "7"))  # lost in a failover
    await store.save_log_states("alpha", {"7": states[3]})
    assert same(await other.load_log_states("alpha"), {"7": states[3]})
    await store._r.append(store.key("logtext", "alpha", "7"), b"x")  # not as it was left
    await store.save_log_states("alpha", {"7": states[4]})
    assert same(await other.load_log_states("alpha"), {"7": states[4]})


async def test_a_flushed_script_cache_still_appends(
        store: RedisStore, other: RedisStore, tmp_path: Path) -> None:
    """A Redis that lost its scripts (restart, failover) answers NOSCRIPT: the append goes
    again with the script itself, and the text is still appended, not rewritten."""
    data = (FIX / "verl-0.9.1/console.log").read_bytes()
    states = grown(tmp_path / "run.out", data, [len(data) - 500])
    await store.save_log_states("alpha", {"7": states[0]})
    token = (await text_of(store))[:32]
    await store._r.script_flush()
    await store.save_log_states("alpha", {"7": states[1]})
    assert (await text_of(store))[:32] == token
    assert same(await other.load_log_states("alpha"), {"7": states[1]})


async def test_a_new_stream_is_written_whole(
        store: RedisStore, other: RedisStore, tmp_path: Path) -> None:
    """A log replaced by another (a fresh read: another stream) never has its bytes appended
    to the old one's text, even where its offsets would allow it."""
    log = tmp_path / "run.out"
    first = grown(log, b"step 1 loss 0.5\n" * 50, [])[-1]
    log.unlink()  # replaced: a new file, read from nothing
    log.write_bytes(b"step 1 loss 0.9\n" * 60)
    os.utime(log, (MTIME, MTIME))
    second = sweep(log, first)
    assert second.stream != first.stream
    await store.save_log_states("alpha", {"7": first})
    token = (await text_of(store))[:32]
    await store.save_log_states("alpha", {"7": second})
    assert (await text_of(store))[:32] != token
    assert same(await other.load_log_states("alpha"), {"7": second})


@pytest.mark.parametrize("damage", ["missing", "short", "long", "start_after", "token",
                                    "no_header", "bad_utf8"])
async def test_a_text_that_does_not_match_its_state_is_dropped(
        store: RedisStore, other: RedisStore, damage: str) -> None:
    """The job is not returned (it reads cold), both keys are deleted, the others stand."""
    state = log_state("/a", text="{'loss': 0.5}\n" * 30)
    await store.save_log_states("alpha", {"1": state, "2": log_state("/b")})
    key = store.key("logtext", "alpha", "1")
    raw = await text_of(store, "1")
    header, _, body = raw.partition(b"\n")
    broken = {"missing": None, "short": raw[:-1], "long": raw + b"x",
              "start_after": header[:33] + b"5\n" + body[5:] + b"12345",
              "token": b"zz" + raw[2:], "no_header": body,
              "bad_utf8": raw[:-2] + b"\xff\n"}[damage]
    if broken is None:
        await store._r.delete(key)
    else:
        await store._r.set(key, broken)
    assert same(await other.load_log_states("alpha"), {"2": log_state("/b")})
    assert await store._r.hkeys(store.key("logs", "alpha")) == [b"2"]
    assert await store._r.exists(key) == 0


async def test_a_state_stored_whole_by_an_earlier_version_still_loads(
        store: RedisStore) -> None:
    """A hash value holding the whole state, text and all (before texts were kept apart)."""
    state = log_state("/a", text="{'loss': 0.5}\n" * 30)
    await store._r.hset(store.key("logs", "alpha"), "1", state.model_dump_json())
    assert same(await store.load_log_states("alpha"), {"1": state})


async def test_pruned_jobs_lose_their_text_and_texts_expire(store: RedisStore) -> None:
    await store.save_log_states("alpha", {"1": log_state("/a"), "2": log_state("/b")})
    ttl = await store._r.pttl(store.key("logtext", "alpha", "1"))
    assert 0 < ttl <= store.expire_ms
    await store.save_log_states("alpha", {}, drop=["1"])
    assert await store._r.exists(store.key("logtext", "alpha", "1")) == 0
    assert await store._r.exists(store.key("logtext", "alpha", "2")) == 1


def test_the_append_plan() -> None:
    """Appended only on the same stream, after what is held, within the slack."""
    body = b"x" * 1000
    state = log_state("/a").model_copy(update={"recent_offset": 5000, "stream": "s"})
    held = store_texts.Held(stream="s", token="t" * 32, start=4000, end=5600)
    write = store_texts.plan("1", state, body, held)
    assert write.want == len(held.header()) + 1600 and write.payload == body[600:]
    assert write.held.end == 6000 and write.held.token == held.token
    for changed in ({"stream": "other"}, {"start": 5001}, {"end": 4999}, {"end": 6001},
                    {"start": 5000 - store_texts.SLACK_BYTES - 1}):
        fresh = store_texts.plan("1", state, body,
                                 store_texts.Held(**{**held.__dict__, **changed}))
        assert fresh.want is None and fresh.payload.endswith(b"\n" + body)
        assert fresh.held.start == 5000 and fresh.held.token != held.token
