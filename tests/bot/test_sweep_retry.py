"""A scheduled sweep that failed (a cluster unreachable, Slack's 5xx on a reply) is tried once
more soon, by the replica that won the interval: the interval still gets one parent, its
retry tells what the failed try could not, and nothing is posted twice."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import (
    FakeClock,
    FakeSweeper,
    blocks_text,
    collapsing,
    detail,
    job,
    sweep_result,
)
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack


def parents(slack: FakeSlack) -> list[str]:
    return [c.params["text"] for c in slack.to("/api/chat.postMessage")
            if c.params["channel"] == "C0SWEEP" and not c.params.get("thread_ts")]


def change_replies(slack: FakeSlack) -> list[str]:
    """Each change reply's text and blocks."""
    return [c.params["text"] + "\n" + blocks_text(_blocks(c.params.get("blocks")))
            for c in slack.to("/api/chat.postMessage")
            if c.params.get("thread_ts") and c.params["text"].startswith("Changes")]


def _blocks(blocks: Any) -> list[dict[str, Any]]:
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks or [])


async def test_an_unreachable_cluster_is_swept_again_within_the_interval(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """16:00: alpha unreachable (an SSH blip). 16:01: the winner sweeps again and edits the
    day's parent with alpha's jobs; the other replica sweeps nothing; no second parent."""
    world = {"down": True}

    def make():  # type: ignore[no-untyped-def]
        if world["down"]:
            return sweep_result([], at=clock(), clusters=(), unreachable=("alpha",))
        return sweep_result([detail(job("4100", "rl-ppo-llama-8b"))], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as one, \
            running_bot(slack, store, sweeper, clock) as two:
        first, second = make_scheduler(one.bot), make_scheduler(two.bot)
        swept = sorted(await asyncio.gather(first.tick(), second.tick()))
        assert swept == [False, True] and sweeper.sweeps == 1
        world["down"] = False
        clock.advance(59)
        assert list(await asyncio.gather(first.tick(), second.tick())) == [False, False]
        clock.advance(1)
        retried = list(await asyncio.gather(first.tick(), second.tick()))
        clock.advance(600)
        later = list(await asyncio.gather(first.tick(), second.tick()))
    assert sorted(retried) == [False, True] and later == [False, False]
    assert sweeper.sweeps == 2  # the one retry, by the winner only
    assert len(parents(slack)) == 1
    (edit,) = slack.to("/api/chat.update")
    assert "RL: 1 job" in edit.params["text"] and "unreachable" not in edit.params["text"]


async def test_a_change_reply_refused_with_a_5xx_is_posted_by_the_retry_once(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack answers 500 to the 16:30 change reply: the 16:31 retry posts it, once; the
    job-end DM that did go out is not sent again, and 17:00 repeats nothing."""
    await notify_on(store)  # alice asked for job-end DMs
    world = {"sft": "RUNNING"}

    def make():  # type: ignore[no-untyped-def]
        sft = detail(job("4300", "sft-mistral-7b", bucket="sft", state=world["sft"],
                         verdict="failed" if world["sft"] == "FAILED" else "healthy"))
        return sweep_result([detail(job("4100", "rl-ppo-llama-8b")), sft], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00: the baseline, the parent and its tables
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack.fail("chat.postMessage", "internal_error", status=500, target="C0SWEEP")
        assert await scheduler.tick()
        assert change_replies(slack) == []
        refused = [c for c in slack.calls if c.status == 500]
        assert len(refused) == 1 and refused[0].params["text"].startswith("Changes")
        clock.advance(60)
        assert await scheduler.tick()  # the retry
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00: nothing new
    (reply,) = change_replies(slack)
    assert "sft-mistral-7b" in reply and "failed" in reply
    dms = [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE"]
    assert len(dms) == 1
    assert len(parents(slack)) == 1


async def test_a_collapse_dm_slack_refused_is_sent_by_the_retry(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack answers 500 to the 16:30 collapse alert (the DM and its channel fallback), the
    thread's change reply going through: the DM goes out with the 16:31 retry, not half an
    hour later, and once."""
    world = {"collapsing": False}

    def make():  # type: ignore[no-untyped-def]
        rows = [detail(job("4100", "rl-ppo-llama-8b"))]
        return sweep_result([*rows, collapsing()] if world["collapsing"] else rows, at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00
        clock.advance(1800)
        world["collapsing"] = True
        slack.fail("chat.postMessage", "internal_error", status=500, times=2,
                   when=lambda params: "cancel_salvage" in str(params.get("blocks")))
        assert await scheduler.tick()  # 16:30: the alert refused, the change reply posted
        assert alerts(slack) == []
        slack.failures.clear()
        clock.advance(60)
        assert await scheduler.tick()  # 16:31: the retry
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00
    (dm,) = alerts(slack)
    assert dm.params["channel"] == "DALICE"


async def test_a_parent_edit_slack_refused_is_made_by_the_retry(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack answers 500 to the 16:30 edit of the day's parent: the retry edits it, so the
    parent does not show 16:00's summary for half an hour."""
    world = {"state": "RUNNING"}

    def make():  # type: ignore[no-untyped-def]
        return sweep_result([detail(job("4300", "sft-mistral-7b", bucket="sft",
                                        state=world["state"]))], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00
        clock.advance(1800)
        world["state"] = "COMPLETED"
        slack.fail("chat.update", "internal_error", status=500)
        assert await scheduler.tick()
        clock.advance(60)
        assert await scheduler.tick()  # the retry
    (edit,) = slack.to("/api/chat.update")
    assert "1 completed" in edit.params["text"] and "as of 16:31Z" in edit.params["text"]
    assert len(parents(slack)) == 1


def alerts(slack: FakeSlack) -> list[Any]:
    return [c for c in slack.to("/api/chat.postMessage")
            if "cancel_salvage" in json.dumps(_blocks(c.params.get("blocks")))]


async def test_a_job_end_dm_slack_refused_is_sent_by_the_retry(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack answers 500 to the 16:30 job-end DM (the thread's change reply going through):
    the owner hears of the failure with the 16:31 retry, once; the change is not told twice."""
    await notify_on(store)  # alice asked for job-end DMs
    world = {"state": "RUNNING"}

    def make():  # type: ignore[no-untyped-def]
        sft = detail(job("4300", "sft-mistral-7b", bucket="sft", state=world["state"],
                         verdict="failed" if world["state"] == "FAILED" else "healthy"))
        return sweep_result([sft], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00
        clock.advance(1800)
        world["state"] = "FAILED"
        slack.fail("chat.postMessage", "internal_error", status=500, target="DALICE")
        assert await scheduler.tick()
        clock.advance(60)
        assert await scheduler.tick()  # the retry
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00
    dms = [c.params["text"] for c in slack.to("/api/chat.postMessage")
           if c.params["channel"] == "DALICE"]
    assert len(dms) == 1 and "sft-mistral-7b" in dms[0]
    assert len(change_replies(slack)) == 1


async def test_a_retry_is_not_counted_as_another_sweep_of_the_period(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The parent's 'sweep N of this period' counts intervals: the 16:30 sweep and its retry
    (its parent edit refused with a 500) are sweep 2, and 17:00 is sweep 3."""
    sweeper = FakeSweeper(make=lambda: sweep_result([detail(job("4100", "rl-ppo-llama-8b"))],
                                                    at=clock()),
                          conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00, sweep 1
        clock.advance(1800)
        slack.fail("chat.update", "internal_error", status=500)
        assert await scheduler.tick()
        clock.advance(60)
        assert await scheduler.tick()  # the retry
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00
    counts = [re.search(r"sweep (\d+) of this period", c.params["text"]).group(1)  # type: ignore[union-attr]
              for c in slack.to("/api/chat.update")]
    assert counts == ["2", "3"]
