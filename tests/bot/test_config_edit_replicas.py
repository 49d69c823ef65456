"""A refused config edit told once across bot replicas (fake Slack, fake clock, real Redis).

Each replica re-reads the shared config file at its sweeps (CONTRACT §2) and remembered on its
own which refusal it had told: with two replicas leading alternate intervals, the day's thread
heard "config edit refused" once from each, and a fix seen only by the other replica left the
first one believing the next identical refusal already told.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING
from bot.config_file import load_config
from bot.config_source import ConfigSource
from bot.refusals import REFUSAL_DOC, refusal_news
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, sweep_result
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

CLUSTER = f'[[clusters]]\nname = "snapshot"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n'


GOOD = "{good}"
BAD = "{good}recent_hours = -3\n"


def good(prefix: str) -> str:
    """A valid file naming the sweep channel and this test's key prefix."""
    return (f'[redis]\nkey_prefix = "{prefix}"\n[slack]\nchannel = "C0SWEEP"\n'
            f'sweep_every_minutes = 30\n{CLUSTER}')


def refusals(slack: FakeSlack) -> list[str]:
    texts = [blocks_text(c.params.get("blocks") or []) for c in
             slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]
    return [t for t in texts if "config edit refused" in t]  # a line of the sweep's reply


async def sweep(h: Harness, interval: int, clock: FakeClock) -> None:
    """One replica leads ``interval``: its sweep re-reads the file, then posts."""
    h.bot.config.load()  # the sweep's re-read (the fake sweeper reads no file)
    await scheduled_sweep(h.bot, interval)
    clock.advance(60)


async def run_replicas(slack: FakeSlack, store: RedisStore, redis_server: str,
                       tmp_path: Path, edits: list[tuple[str, int]]) -> list[str]:
    """Two replicas on one Redis and one Slack, each its own ConfigSource on one file; for
    each ``(text, replica)`` the file is written and that replica leads the next interval."""
    clock = FakeClock()
    path = tmp_path / "jobtables.toml"
    path.write_text(good(store.prefix))
    conf = make_config(store.prefix, tmp_path)
    sources = [ConfigSource(lambda: load_config(path)) for _ in range(2)]
    for source in sources:
        source.load()
    sweepers = [FakeSweeper(make=lambda: sweep_result([], at=clock()), conf=conf)
                for _ in range(2)]
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweepers[0], clock, config=sources[0]) as a, \
                running_bot(slack, other, sweepers[1], clock, config=sources[1]) as b:
            for interval, (text, replica) in enumerate(edits):
                path.write_text(text.format(good=good(store.prefix)))
                await sweep((a, b)[replica], interval, clock)
    finally:
        await other.aclose()
    return refusals(slack)


async def test_two_replicas_tell_one_refused_edit_once(
        slack: FakeSlack, store: RedisStore, redis_server: str, tmp_path: Path) -> None:
    """The file broken, then replica A and replica B each lead a sweep: the thread hears the
    refusal once, not once per replica."""
    told = await run_replicas(slack, store, redis_server, tmp_path,
                              [(GOOD, 0), (BAD, 0), (BAD, 1), (BAD, 0), (BAD, 1)])
    assert len(told) == 1, told
    assert "recent_hours" in told[0]
    # Remembered as told for [redis] expire_hours at most (then told again, README): no key
    # the bot writes lives for ever.
    left_ms = await store._r.pttl(store.key("doc", REFUSAL_DOC))
    assert 0 < left_ms <= store.expire_ms


async def test_a_fix_seen_by_one_replica_lets_the_other_tell_the_next_break(
        slack: FakeSlack, store: RedisStore, redis_server: str, tmp_path: Path) -> None:
    """A tells the refusal, B sweeps the fixed file, the same bad edit is made again and A
    leads: the channel is told again (A never read the fixed file itself)."""
    told = await run_replicas(slack, store, redis_server, tmp_path,
                              [(BAD, 0), (GOOD, 1), (BAD, 0)])
    assert len(told) == 2, told


async def test_a_new_reason_is_told_by_the_replica_that_reads_it(
        slack: FakeSlack, store: RedisStore, redis_server: str, tmp_path: Path) -> None:
    """One refusal told by A; the file broken another way and read by B: told once more."""
    other_bad = "{good}kind_of = 1\n"
    told = await run_replicas(slack, store, redis_server, tmp_path,
                              [(BAD, 0), (BAD, 1), (other_bad, 1), (other_bad, 0)])
    assert len(told) == 2, told
    assert "recent_hours" in told[0] and "kind_of" in told[1]


async def test_while_redis_cannot_answer_the_replica_s_own_memory_decides(
        tmp_path: Path) -> None:
    """Redis unreachable when the refusal is asked for: told once by this replica's memory,
    not every sweep, and never an error out of the sweep."""
    path = tmp_path / "jobtables.toml"
    path.write_text(good("jt-test-down:"))
    source = ConfigSource(lambda: load_config(path))
    source.load()
    path.write_text(BAD.format(good=good("jt-test-down:")))
    down = make_store("jt-test-down:", url="redis://127.0.0.1:1/0")  # nothing listens
    try:
        told = []
        for _ in range(2):
            source.load()
            told.append(await refusal_news(source, down))
    finally:
        await down.aclose()
    assert told[0] is not None and "recent_hours" in told[0]
    assert told[1] is None
