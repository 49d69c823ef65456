"""A job that flaps between stalled and recovered DMs its owner once, not at every stall
(fake Slack, real Redis).

An eval whose trials finish about once an hour reads stalled (no new result.json for 60+
min) and recovered by turns; each stall was a 'stalled' change and each a job-end DM: with
sweeps every 30 minutes, one DM an hour for the same run. A job's stall is now DMed once a
:data:`bot.notify.STALL_DM_QUIET_HOURS`; the day's thread tells the first stall and no later
turn within as long (``bot.repeats``, ``tests/bot/test_quiet_day.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis


def dms(slack: FakeSlack) -> list[str]:
    return [c.params["text"] for c in slack.to("/api/chat.postMessage")
            if c.params["channel"].startswith("D")]


def eval_row(stalled: bool) -> JobDetail:
    return detail(job("6100", "eval-qwen-swe", bucket="eval",
                      verdict="stalled" if stalled else "healthy",
                      flags=("stall",) if stalled else ()))


async def test_a_flapping_stall_is_dmed_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """Healthy, then stalled and recovered by turns over six sweeps: one DM; the thread has
    the first stall. A stall past the quiet window is DMed again."""
    await notify_on(store)  # alice asked for job-end DMs
    rows = [eval_row(False)]
    sweeper = FakeSweeper(make=lambda: build_result(rows, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        for n in range(1, 7):
            rows[0] = eval_row(stalled=n % 2 == 1)
            clock.advance(1800)
            await scheduled_sweep(h.bot, n)
        assert len(dms(slack)) == 1 and "is stalled" in dms(slack)[0]
        thread = [blocks_text(c.params.get("blocks") or []) for c in
                  slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]
        assert sum("stalled: eval-qwen-swe" in t for t in thread) == 1, thread
        rows[0] = eval_row(False)
        clock.advance(24 * 3600)  # bot.notify.STALL_DM_QUIET_HOURS
        await scheduled_sweep(h.bot, 100)
        rows[0] = eval_row(True)
        clock.advance(1800)
        await scheduled_sweep(h.bot, 101)
    assert len(dms(slack)) == 2


@pytest.mark.parametrize("kept", ["garbage", "2026-12-04T00:00:00", 42])
async def test_a_malformed_stall_mark_is_no_mark(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock,
        kept: object) -> None:
    """A stall mark in Redis that is not an aware ISO time (written by hand, an older bot, a
    cut value) does not stop the sweep's job-end DMs (found by review of 0456857: it raised
    out of the notifier): the stall is DMed, and the mark rewritten."""
    await notify_on(store)  # alice asked for job-end DMs
    rows = [eval_row(False)]
    sweeper = FakeSweeper(make=lambda: build_result(rows, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        await store.put_doc("notify:stalled:alpha:6100", {"at": kept}, ttl_s=3600)
        rows[0] = eval_row(stalled=True)
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
        assert len(dms(slack)) == 1 and "is stalled" in dms(slack)[0]
        doc = await store.get_doc("notify:stalled:alpha:6100")
        assert isinstance(doc, dict) and doc["at"] == clock().isoformat()
