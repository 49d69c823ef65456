"""The bot's very first sweep (a fresh store) has no last sweep: its thread reply of what it
found (the collapses it alerted, the failures it filed, the cleanups due) does not claim to be
changes since one (fake Slack, real Redis)."""

from __future__ import annotations

from pathlib import Path

from bot.scheduled import make_scheduler
from bot.store import RedisStore
from report.models import Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.quiet_day import shown


async def test_the_first_sweeps_reply_says_it_is_the_first(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """16:00, empty Redis: a collapse and a failed job already there. The reply heads 'First
    sweep' (before: 'Changes since the last sweep'); 16:30's reply, after a new failure,
    heads 'Changes since 16:00Z'."""
    world = {"failed": False}

    def make():  # type: ignore[no-untyped-def]
        rows = [collapsing(), detail(job("4300", "sft-old", bucket="sft", state="FAILED",
                                         verdict="failed", recommendation=Recommendation(
                                             action="diagnose", why="traceback: boom")))]
        if world["failed"]:
            rows.append(detail(job("4400", "sft-new", bucket="sft", state="FAILED",
                                   verdict="failed", recommendation=Recommendation(
                                       action="diagnose", why="traceback: bang"))))
        return sweep_result(rows, at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        clock.advance(1800)
        world["failed"] = True
        assert await scheduler.tick()
    replies = [shown(c.params) for c in slack.to("/api/chat.postMessage")
               if c.params.get("thread_ts")]
    # The first sweep's findings head the day's full tables (one reply, the time said once).
    assert [r.splitlines()[:2] for r in replies] == [
        ["Full tables as of 16:00Z", "First sweep: what was already there"],
        ["Changes since 16:00Z (as of 16:30Z)", replies[1].splitlines()[1]]]
    assert replies[1].splitlines()[1].startswith("🔥 `alpha:4400` sft-new failed: ")
