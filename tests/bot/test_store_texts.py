"""A job's stored log text is written by its new bytes only, and never read back wrong
(``bot.store_texts``), in a real Redis: real trainer logs grown sweep by sweep through the
collector and the fold, each save loaded again by a second store (a restarted bot)."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot import store_texts
from bot.store import RedisStore
from probes.slurm.cursors import RECENT_CHARS, LogState, fold_job
from tests.bot.conftest import counts, make_store
from tests.bot.test_store_logs import log_state
from tests.probes.slurm.test_incremental_fold import FIX, MTIME, RECORD, read


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
    """The job's text key as one string: its header line, then its bytes."""
    items = await store._r.lrange(store.key("logtext", "alpha", job), 0, -1)
    assert items
    return bytes(items[0]) + b"\n" + b"".join(items[1:])


async def set_text(store: RedisStore, raw: bytes, job: str = "7") -> None:
    """Write ``raw`` (as :func:`text_of` shows a key) as the job's text key."""
    key = store.key("logtext", "alpha", job)
    header, _, body = raw.partition(b"\n")
    await store._r.delete(key)
    await store._r.rpush(key, header, *([body] if body else []))


@pytest.mark.parametrize("name", ["verl-0.9.1/console.log", "trl-1.16.0/grpo_healthy.out",
                                  "hf-transformers-5.24.0/sft_nan.out"])
async def test_every_save_loads_back_as_the_state_in_memory(
        store: RedisStore, other: RedisStore, tmp_path: Path, name: str) -> None:
    """A real log grown at 40 random cuts (seeded), each sweep's state saved: a second store
    loads exactly that state every time (text, offset, line), though most saves appended."""
    data = (FIX / name).read_bytes()
    cuts = sorted(random.Random(name).sample(range(1, len(data)), 40))
    log = tmp_path / "run.out"
    start, headers = 0, set()
    prior: LogState | None = None
    for end in [*cuts, len(data)]:
        with log.open("ab") as fh:
            fh.write(data[start:end])
        os.utime(log, (MTIME, MTIME))
        state = sweep(log, prior)
        await store.save_log_states("alpha", {"7": state})
        assert same(await other.load_log_states("alpha"), {"7": state})
        headers.add((await text_of(store)).partition(b"\n")[0].rsplit(b":", 1)[0])
        prior, start = state, end
    assert len(headers) < 20  # most saves appended (a whole write starts a new header)
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
    before = counts(counted)[1]
    await counted.save_log_states("alpha", {job: s[0] for job, s in states.items()})
    cold = counts(counted)[1] - before
    before = counts(counted)[1]
    await counted.save_log_states("alpha", {job: s[1] for job, s in states.items()})
    warm = counts(counted)[1] - before
    assert cold > 40 * RECENT_CHARS
    states_json = sum(len(encoded[0]) for s in states.values()
                      if (encoded := store_texts.encode(s[1])) is not None)
    assert warm < states_json + 40 * (300 + 200)  # 200: each job's keys and arguments
    assert same(await counted.load_log_states("alpha"), {job: s[1] for job, s in states.items()})


async def test_replicas_taking_turns_append_and_a_lost_key_is_written_whole(
        counted: RedisStore, other: RedisStore, tmp_path: Path) -> None:
    """Two replicas saving one job's stream in turn each append only the bytes the key
    lacks (the other replica's save came between); a key lost in a failover, or holding
    another stream at the same length, is written whole; a save applied twice (a retry)
    leaves its bytes once. What loads is always the state saved last."""
    data = (FIX / "trl-1.16.0/grpo_healthy.out").read_bytes()
    cuts = [len(data) - 2000, len(data) - 1500, len(data) - 1000, len(data) - 500,
            len(data) - 250]
    states = grown(tmp_path / "run.out", data, cuts)
    await counted.save_log_states("alpha", {"7": states[0]})
    assert same(await other.load_log_states("alpha"), {"7": states[0]})
    await other.save_log_states("alpha", {"7": states[1]})  # the other replica's turn
    before = counts(counted)[1]
    await counted.save_log_states("alpha", {"7": states[2]})  # and this one's again
    sent = counts(counted)[1] - before
    encoded = store_texts.encode(states[2])
    assert encoded is not None and sent < len(encoded[0]) + 1500
    assert same(await other.load_log_states("alpha"), {"7": states[2]})
    key = counted.key("logtext", "alpha", "7")
    await counted._r.delete(key)  # lost in a failover
    await counted.save_log_states("alpha", {"7": states[3]})
    assert same(await other.load_log_states("alpha"), {"7": states[3]})
    raw = await text_of(counted)
    header, _, body = raw.partition(b"\n")  # another stream's bytes, same length
    await set_text(counted, b"f" * 32 + header[32:] + b"\n" + b"x" * len(body))
    await counted.save_log_states("alpha", {"7": states[4]})
    assert same(await other.load_log_states("alpha"), {"7": states[4]})
    held = counted.texts.get("alpha", "7")
    await counted.save_log_states("alpha", {"7": states[5]})
    once = await text_of(counted)
    assert held is not None and once.endswith(data[held.end:states[5].cursor.offset])
    counted.texts.keep("alpha", "7", held)  # as if its answer was lost: the save is retried
    await counted.save_log_states("alpha", {"7": states[5]})
    assert await text_of(counted) == once
    assert same(await other.load_log_states("alpha"), {"7": states[5]})


async def test_a_key_short_of_what_was_seen_or_starting_after_the_text_is_written_whole(
        store: RedisStore, other: RedisStore, tmp_path: Path) -> None:
    """An append lost in a failover (the key ends before what this process saw there): the
    bytes sent would leave a gap, so the text is written whole. A key of the stream that
    starts after the state's text (a later whole write): it cannot hold that text either."""
    data = (FIX / "verl-0.9.1/console.log").read_bytes()
    cuts = [len(data) - 900, len(data) - 600, len(data) - 300]
    states = grown(tmp_path / "run.out", data, cuts)
    await store.save_log_states("alpha", {"7": states[0]})
    first = await text_of(store)
    await store.save_log_states("alpha", {"7": states[1]})
    await set_text(store, first)  # the second save's append lost
    await store.save_log_states("alpha", {"7": states[2]})
    assert same(await other.load_log_states("alpha"), {"7": states[2]})
    header, _, body = (await text_of(store)).partition(b"\n")
    sid, start_text, end_text = header.split(b":")
    start = int(start_text)
    later = states[3].recent_offset - start + 1  # a start just past the next state's text
    assert 0 < later < len(body)
    await set_text(store, sid + b":" + str(start + later).encode() + b":" + end_text + b"\n"
                   + body[later:])
    await store.save_log_states("alpha", {"7": states[3]})
    assert same(await other.load_log_states("alpha"), {"7": states[3]})


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


@pytest.mark.parametrize("damage", ["missing", "short", "long", "start_after", "stream",
                                    "no_header", "bad_utf8"])
async def test_a_text_that_does_not_match_its_state_is_skipped_until_saved_again(
        store: RedisStore, other: RedisStore, damage: str) -> None:
    """The job is not returned (it reads cold) and the pair is left as it is (a load that
    races a save must not delete the save); the next save of that job replaces it, and the
    others stand throughout."""
    state = log_state("/a", text="{'loss': 0.5}\n" * 30)
    await store.save_log_states("alpha", {"1": state, "2": log_state("/b")})
    key = store.key("logtext", "alpha", "1")
    raw = await text_of(store, "1")
    header, _, body = raw.partition(b"\n")
    sid, start, end = header.split(b":")
    broken = {"missing": None, "short": raw[:-1], "long": raw + b"x",
              "start_after": sid + b":" + str(int(start) + 5).encode() + b":" + end + b"\n"
              + body[5:],
              "stream": b"0" * 32 + raw[32:], "no_header": body.replace(b"\n", b" "),
              "bad_utf8": raw[:-2] + b"\xff\n"}[damage]
    if broken is None:
        await store._r.delete(key)
    else:
        await set_text(store, broken, "1")
    assert same(await other.load_log_states("alpha"), {"2": log_state("/b")})
    assert sorted(await store._r.hkeys(store.key("logs", "alpha"))) == [b"1", b"2"]
    await other.save_log_states("alpha", {"1": state})
    assert same(await store.load_log_states("alpha"), {"1": state, "2": log_state("/b")})


async def test_a_state_stored_whole_by_an_earlier_version_still_loads(
        store: RedisStore) -> None:
    """A hash value holding the whole state, text and all (before texts were kept apart)."""
    state = log_state("/a", text="{'loss': 0.5}\n" * 30)
    await store._r.hset(store.key("logs", "alpha"), "1", state.model_dump_json())
    assert same(await store.load_log_states("alpha"), {"1": state})


async def test_pruned_jobs_lose_their_text_and_texts_expire(store: RedisStore) -> None:
    """A text expires with its state; a quiet job's (``renew``: present, unchanged) is
    renewed with the hash once a quarter of the expiry has passed since it was set, so it
    outlives the expiry as its state does, and a quiet sweep sends nothing for it before."""
    now = [0.0]
    store.texts = store_texts.TextBook(clock=lambda: now[0])
    await store.save_log_states("alpha", {"1": log_state("/a"), "2": log_state("/b")})
    ttl = await store._r.pttl(store.key("logtext", "alpha", "1"))
    assert 0 < ttl <= store.expire_ms
    text2 = store.key("logtext", "alpha", "2")
    await store._r.pexpire(text2, 5000)
    now[0] += store.expire_ms / 4000 - 1
    await store.save_log_states("alpha", {"1": log_state("/a", offset=130)}, renew=["2"])
    assert await store._r.pttl(text2) <= 5000  # not due yet
    now[0] += 1
    await store.save_log_states("alpha", {"1": log_state("/a", offset=140)}, renew=["2"])
    assert await store._r.pttl(text2) > 5000
    await store.save_log_states("alpha", {}, drop=["1"])
    assert await store._r.exists(store.key("logtext", "alpha", "1")) == 0
    assert await store._r.exists(store.key("logtext", "alpha", "2")) == 1


def test_the_append_plan() -> None:
    """Appended only on the same stream, after what is held, within the slack."""
    body = b"x" * 1000
    state = log_state("/a").model_copy(update={"recent_offset": 5000, "stream": "s"})
    held = store_texts.Held(stream="s", start=4000, end=5600)
    write = store_texts.plan("1", state, body, held)
    assert write.sent_from == 5600 and write.payload == body[600:]
    assert write.held(4000) == store_texts.Held("s", 4000, 6000)
    for changed in ({"stream": "other"}, {"start": 5001}, {"end": 4999}, {"end": 6001},
                    {"start": 5000 - store_texts.SLACK_BYTES - 1}):
        fresh = store_texts.plan("1", state, body,
                                 store_texts.Held(**{**held.__dict__, **changed}))
        assert fresh.sent_from is None and fresh.payload == body
        assert fresh.items() == [f"{store_texts.stream_id('s')}:5000:6000".encode(), body]


async def test_a_text_key_of_another_type_reads_that_job_cold_not_the_cluster(
        store: RedisStore, other: RedisStore) -> None:
    """A STRING where the text's LIST should be (an earlier build's key): the load skips that
    job instead of failing whole (every sweep of the cluster read cold), and its next save
    writes the key whole."""
    state = log_state("/a", text="{'loss': 0.5}\\n" * 30)
    await store.save_log_states("alpha", {"1": state, "2": log_state("/b")})
    await store._r.delete(store.key("logtext", "alpha", "1"))
    await store._r.set(store.key("logtext", "alpha", "1"), b"an earlier build's text")
    assert same(await other.load_log_states("alpha"), {"2": log_state("/b")})
    await other.save_log_states("alpha", {"1": state})
    assert same(await store.load_log_states("alpha"), {"1": state, "2": log_state("/b")})
