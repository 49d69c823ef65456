"""A config edited into an invalid state while the bot runs: the bot goes on with the last good
one, and says once what is wrong.

The config is re-read at the start of every sweep (CONTRACT §2). Before, a bad edit made every
sweep raise: the scheduled sweeps were only logged as failed ("scheduled sweep failed" with a
traceback) and nothing reached the channel until someone fixed the file; ``/jobs`` failed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING
from bot.config import Config, ConfigError
from bot.config_file import load_config
from bot.config_file import parse_config as load_config_text
from bot.config_source import ConfigSource
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from bot.sweep import Sweeper
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack

GOOD = f'[[clusters]]\nname = "snapshot"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n'


async def test_a_bad_edit_keeps_the_last_good_config(tmp_path: Path) -> None:
    path = tmp_path / "jobtables.toml"
    path.write_text(GOOD)
    source = ConfigSource(lambda: load_config(path))
    first = source.load()
    assert source.error is None
    path.write_text(GOOD + "recent_hours = -3\n")
    again = source.load()
    assert again is first
    assert source.error is not None and "recent_hours" in source.error
    sweeper = Sweeper(source.load)
    result = await sweeper.sweep()
    assert [c.status for c in result.facts] == ["ok"]
    path.write_text(GOOD.replace("snapshot", "snap2"))
    fixed = source.load()
    assert fixed.clusters[0].name == "snap2" and source.error is None


def test_a_bad_file_at_start_still_fails_fast(tmp_path: Path) -> None:
    path = tmp_path / "jobtables.toml"
    path.write_text(GOOD + "recent_hours = -3\n")
    with pytest.raises(ConfigError):
        ConfigSource(lambda: load_config(path)).load()


async def test_the_channel_hears_of_a_refused_edit_once(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, *,
        clock: FakeClock) -> None:
    """The period's thread gets one reply naming the refused edit (escaped: the reason may
    quote the file), not one per sweep; a new reason is told again."""
    conf = make_config(prefix, tmp_path)
    reasons = iter([None, "jobtables.toml:5: clusters.0.name: <!channel> & `x`",
                    "jobtables.toml:5: clusters.0.name: <!channel> & `x`", "other reason"])

    def loader() -> Config:
        reason = next(reasons)
        if reason is None:
            return conf
        raise ConfigError(reason)

    source = ConfigSource(loader)
    source.load()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()), conf=conf)
    async with running_bot(slack, store, sweeper, clock, config=source) as h:
        def notes() -> list[str]:  # the sweep's one reply carries the line (its blocks)
            texts = [blocks_text(c.params.get("blocks") or []) for c in
                     slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]
            return [t for t in texts if "config" in t]

        for interval in range(3):
            source.load()  # the sweep's re-read (the fake sweeper reads no file)
            await scheduled_sweep(h.bot, interval)
            clock.advance(60)
        told = notes()
        assert len(told) == 2, told
        assert "&lt;!channel&gt; &amp;" in told[0] and "<!channel>" not in told[0]
        assert "other reason" in told[1]


def test_the_same_bad_edit_made_again_after_a_fix_is_told_again(tmp_path: Path) -> None:
    """A bad edit told, the file fixed, then the same bad edit made again (the same typo next
    week): the channel is told again. Before, the reason last told was kept through the fix,
    so the second refusal was never said (review of 093e4f0)."""
    path = tmp_path / "jobtables.toml"
    path.write_text(GOOD)
    source = ConfigSource(lambda: load_config(path))
    source.load()
    path.write_text(GOOD + "recent_hours = -3\n")
    source.load()
    told = source.news()
    assert told is not None and "recent_hours" in told
    source.load()
    assert source.news() is None  # once per reason
    path.write_text(GOOD)
    source.load()
    assert source.error is None and source.news() is None
    path.write_text(GOOD + "recent_hours = -3\n")
    source.load()
    assert source.news() == told


async def test_a_config_swapped_for_a_fifo_keeps_the_last_good_and_the_loop_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The config file replaced by a FIFO nobody writes to: the sweep's re-read (CONTRACT §2)
    blocked in open() on the event loop for ever (no Slack ack, no /healthz). Now the read
    waits in a worker thread up to its bound, the sweep runs on the last good config, and the
    refusal is told as a bad edit is."""
    monkeypatch.setattr("bot.config_file.CONFIG_READ_TIMEOUT_S", 1.0)
    path = tmp_path / "jobtables.toml"
    path.write_text(GOOD)
    source = ConfigSource(lambda: load_config(path))
    source.load()
    sweeper = Sweeper(source.load)
    path.unlink()
    os.mkfifo(path)
    try:
        started = time.monotonic()
        sweep = asyncio.create_task(sweeper.sweep())
        await asyncio.sleep(0)  # the sweep starts: its config read is under way
        await asyncio.sleep(0.05)
        assert time.monotonic() - started < 0.6, "the event loop was blocked by the config read"
        result = await asyncio.wait_for(sweep, 30)
    finally:
        with contextlib.suppress(OSError):  # a reader blocked in open() (old code): let go
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        await asyncio.gather(sweep, return_exceptions=True)
    assert [c.name for c in result.facts] == ["snapshot"]
    assert [c.status for c in result.facts] == ["ok"]
    assert source.error is not None and "no writer" in source.error


async def test_a_config_read_that_never_returns_keeps_the_last_good(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read stuck in the kernel (a hung NFS mount: no poll bound helps) does not hold the
    sweeps: each goes on with the last good config, and no second read piles up behind it."""
    monkeypatch.setattr("bot.config_file.CONFIG_READ_TIMEOUT_S", 0.2)
    good = load_config_text(GOOD)
    release = threading.Event()
    calls: list[int] = []

    def loader() -> Config:
        calls.append(1)
        if len(calls) > 1:
            release.wait(30)
        return good

    sweeper = Sweeper(loader)
    try:
        await sweeper.sweep()
        for _ in range(2):
            result = await asyncio.wait_for(sweeper.sweep(), 10)
            assert [c.status for c in result.facts] == ["ok"]
        assert len(calls) == 2  # the stuck read is not started again
    finally:
        release.set()
        await sweeper.aclose()
