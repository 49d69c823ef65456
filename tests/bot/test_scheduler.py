"""Scheduled sweeps: interval maths as a table, skipped ticks, one post per interval."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.scheduled import make_scheduler
from bot.scheduler import (
    Scheduler,
    interval_number,
    next_tick_at,
    retry_delay,
    seconds_until_next_tick,
)
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "every_s", "number", "next_at"),
    [
        ("2026-11-30T16:00:00", 1800, 997_808, "2026-11-30T16:30:00"),   # on a boundary
        ("2026-11-30T16:29:59.999", 1800, 997_808, "2026-11-30T16:30:00"),  # just before one
        ("2026-11-30T16:30:00", 1800, 997_809, "2026-11-30T17:00:00"),   # the next one
        ("2026-11-30T16:07:00", 300, 5_986_849, "2026-11-30T16:10:00"),  # 5-minute sweeps
        ("2026-11-30T23:59:00", 3600, 498_911, "2026-12-01T00:00:00"),   # across midnight
        ("2026-12-31T23:45:00", 1800, 999_311, "2027-01-01T00:00:00"),   # across new year
        ("2026-11-30T16:00:30", 45, 39_912_320, "2026-11-30T16:00:45"),  # uneven interval
    ],
)
def test_interval_table(now: str, every_s: float, number: int, next_at: str) -> None:
    """Interval numbers are epoch-aligned, so every replica agrees on them."""
    assert interval_number(at(now), every_s) == number
    assert next_tick_at(at(now), every_s) == at(next_at)


def test_slow_sweep_skips_missed_ticks() -> None:
    """After a sweep that overran two intervals, the next run is the next boundary, once."""
    finished = at("2026-11-30T17:10:00")  # started 16:00, 30-min interval: 16:30/17:00 missed
    assert next_tick_at(finished, 1800) == at("2026-11-30T17:30:00")
    assert seconds_until_next_tick(finished, 1800) == 1200


def test_non_positive_interval_is_an_error() -> None:
    """A zero interval is refused rather than looping."""
    with pytest.raises(ValueError, match="positive"):
        interval_number(at("2026-11-30T16:00:00"), 0)


async def test_loop_sweeps_once_per_interval_with_a_slow_sweep() -> None:
    """The loop never piles up ticks: a sweep that overruns costs the intervals it overran."""
    clock = FakeClock(at("2026-11-30T16:00:00"))
    ran: list[int] = []
    sleeps: list[float] = []

    async def run(number: int, retry: bool) -> None:
        ran.append(number)
        clock.advance(3900 if len(ran) == 1 else 10)  # the first sweep takes 65 minutes

    async def claim(number: int, ttl_s: float) -> bool:
        return True

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        if len(sleeps) == 3:
            raise asyncio.CancelledError

    scheduler = Scheduler(every_s=lambda: 1800.0, claim=claim, run=run, clock=clock, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await scheduler.run_forever()
    assert ran == [997_808, 997_811, 997_812]  # 16:00, then 17:30: 16:30 and 17:00 skipped
    assert sleeps == [1500.0, 1790.0, 1790.0]


@pytest.mark.parametrize(("every_s", "delay"), [
    (1800, 60.0),   # 30-minute sweeps: a minute later
    (300, 30.0),    # 5-minute sweeps: half a minute
    (60, 6.0),      # 1-minute sweeps: well inside the interval
    (604800, 60.0),  # weekly: still a minute, not a tenth of a week
])
def test_retry_delay_is_soon_and_bounded(every_s: float, delay: float) -> None:
    """A failed sweep's retry waits a tenth of the interval, never more than a minute."""
    assert retry_delay(every_s) == delay


@pytest.mark.parametrize("failure", ["returns False", "raises"])
async def test_a_failed_sweep_is_tried_once_more_soon(failure: str) -> None:
    """A sweep that failed runs once more a minute later, under the same interval's claim
    (not claimed again), then not again before the next interval."""
    clock = FakeClock(at("2026-11-30T16:00:00"))
    ran: list[tuple[int, bool, str]] = []
    claims: list[int] = []
    sleeps: list[float] = []

    async def run(number: int, retry: bool) -> bool:
        ran.append((number, retry, f"{clock():%H:%M:%S}"))
        clock.advance(5)
        if failure == "raises":
            raise ConnectionError("cluster unreachable")
        return False  # every try fails: one retry, no more

    async def claim(number: int, ttl_s: float) -> bool:
        claims.append(number)
        return True

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)
        if len(sleeps) == 4:
            raise asyncio.CancelledError

    scheduler = Scheduler(every_s=lambda: 1800.0, claim=claim, run=run, clock=clock, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await scheduler.run_forever()
    assert ran == [(997_808, False, "16:00:00"), (997_808, True, "16:01:05"),
                   (997_809, False, "16:30:00"), (997_809, True, "16:31:05")]
    assert claims == [997_808, 997_809]
    assert sleeps == [60.0, 1730.0, 60.0, 1730.0]


async def test_a_sweep_that_succeeds_is_not_retried_and_a_late_failure_waits() -> None:
    """No retry after a good sweep; a failure too close to the next interval leaves the retry
    to that interval's own sweep (one sweep per interval, never two back to back)."""
    clock = FakeClock(at("2026-11-30T16:00:00"))
    ran: list[tuple[int, bool]] = []

    async def run(number: int, retry: bool) -> bool:
        ran.append((number, retry))
        clock.advance(1780 if number == 997_809 else 5)  # the second sweep ends at 16:59:40
        return number != 997_809

    async def claim(number: int, ttl_s: float) -> bool:
        return True

    scheduler = Scheduler(every_s=lambda: 1800.0, claim=claim, run=run, clock=clock)
    assert await scheduler.tick()
    clock.advance(60)
    assert not await scheduler.tick()  # it succeeded: nothing to retry
    clock.now = at("2026-11-30T16:30:00")
    assert await scheduler.tick()  # fails at 16:59:40: a retry at 17:00:40 is too late
    assert scheduler.retry_at is None
    assert scheduler.seconds_to_wake() == 20.0
    assert ran == [(997_808, False), (997_809, False)]


async def test_no_retry_that_would_overrun_into_the_next_interval() -> None:
    """A failed 40-second sweep of a one-minute interval: its retry (6 s later) would end
    past the next minute and cost that minute's tick, so it is left to it."""
    clock = FakeClock(at("2026-11-30T16:00:00"))

    async def run(number: int, retry: bool) -> bool:
        clock.advance(40)
        return False

    async def claim(number: int, ttl_s: float) -> bool:
        return True

    scheduler = Scheduler(every_s=lambda: 60.0, claim=claim, run=run, clock=clock)
    assert await scheduler.tick()
    assert scheduler.retry_at is None
    clock.now = at("2026-11-30T16:01:00")
    assert await scheduler.tick()  # 16:01 swept as usual


async def test_two_replicas_post_one_sweep_per_interval(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Two bots sharing one Redis, driven by one fake clock, post exactly one thread each tick."""
    config = make_config(prefix, tmp_path)
    healthy = detail(job("4100", "rl-ppo-llama-8b"))
    sweeper = FakeSweeper(make=lambda: sweep_result([healthy], at=clock()), conf=config)
    async with running_bot(slack, store, sweeper, clock) as one, \
            running_bot(slack, store, sweeper, clock) as two:
        first, second = make_scheduler(one.bot), make_scheduler(two.bot)
        swept, again = [], []
        for _ in range(3):
            swept.append(sorted(await asyncio.gather(first.tick(), second.tick())))
            clock.advance(600)  # later in the same interval: nobody sweeps again
            again.append(list(await asyncio.gather(first.tick(), second.tick())))
            clock.advance(1200)
    # One sweep per interval: the day's parent is posted once, then edited in place.
    parents = [c for c in slack.to("/api/chat.postMessage") if "thread_ts" not in c.params]
    assert len(parents) == 1
    assert len(slack.to("/api/chat.update")) == 2
    assert swept == [[False, True]] * 3
    assert again == [[False, False]] * 3


async def test_sweep_thread_has_summary_parent_and_table_replies(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The parent lists buckets; tables go in the thread as code blocks within Slack's limits."""
    config = make_config(prefix, tmp_path)
    many = [detail(job(str(5000 + i), f"rl-grpo-run-{i:03d}")) for i in range(120)]
    sweeper = FakeSweeper(make=lambda: sweep_result([*many, collapsing()], at=clock()),
                          conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
    posts = slack.to("/api/chat.postMessage")
    # The collapse DM goes first (before the channel's tables), then the parent.
    assert posts[0].params["channel"] == "DALICE"
    parent, replies = posts[1], [p for p in posts if p.params.get("thread_ts")]
    assert parent.params["channel"] == "C0SWEEP" and "RL" in parent.params["text"]
    assert len(replies) >= 2
    assert {r.params["thread_ts"] for r in replies} == {parent.answer["ts"]}  # was the 1st post
    for reply in replies:
        blocks = reply.params.get("blocks") or []
        assert len(blocks) <= 50
        assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    dms = [p for p in posts if p.params["channel"] == "DALICE"]
    assert len(dms) == 1
