"""Slack unreachable across a whole sweep and its retry: the endings that sweep saw are told
once Slack answers again (the day's thread and the owner's job-end DM), once, with their own
time; and what Slack keeps refusing is not kept for ever."""

from __future__ import annotations

from pathlib import Path

from bot.digest_posting import UNDELIVERED_KEPT_S
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, detail, job, sweep_result
from tests.bot.conftest import make_config, make_store, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_sweep_retry import change_replies

SLACK_CALLS = ("chat.postMessage", "chat.update", "conversations.open")


def slack_down(slack: FakeSlack) -> None:
    """Every post, edit and DM open answers 500 (Slack's outage) until cleared."""
    for method in SLACK_CALLS:
        slack.fail(method, "internal_error", status=500, times=1000)


def failing_sft(clock: FakeClock, world: dict[str, str], prefix: str,
                tmp_path: Path) -> FakeSweeper:
    def make():  # type: ignore[no-untyped-def]
        sft = detail(job("4300", "sft-mistral-7b", bucket="sft", state=world["sft"],
                         verdict="failed" if world["sft"] == "FAILED" else "healthy"))
        return sweep_result([detail(job("4100", "rl-ppo-llama-8b")), sft], at=clock())

    return FakeSweeper(make=make, conf=make_config(prefix, tmp_path))


async def test_an_ending_seen_while_slack_was_down_is_told_when_it_returns(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """16:30 sees sft-mistral-7b fail while Slack answers 500 to everything, and so does the
    16:31 retry; Slack is back at 17:00: the thread tells the failure (dated 16:30) and alice,
    who asked for job-end DMs, hears of it; once each, also after 17:30."""
    await notify_on(store)
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00: the baseline, the parent, its tables
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack_down(slack)
        assert await scheduler.tick()  # 16:30: nothing delivered
        clock.advance(60)
        assert await scheduler.tick()  # 16:31: the retry, nothing delivered either
        assert change_replies(slack) == []
        slack.failures.clear()
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00: Slack answers
        clock.advance(1800)
        assert await scheduler.tick()  # 17:30: nothing new
    (reply,) = change_replies(slack)
    assert "sft-mistral-7b" in reply and "failed" in reply and "as of 16:30Z" in reply
    dms = [c.params["text"] for c in slack.to("/api/chat.postMessage")
           if c.params["channel"] == "DALICE"]
    assert len(dms) == 1 and "sft-mistral-7b" in dms[0]


async def test_what_slack_keeps_refusing_is_dropped_after_a_while(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack refuses everything for longer than the bot keeps undelivered replies: the sweeps
    after stop trying the old ones (an outage of a day does not end in a day of stale news),
    and the bot does not call every sweep undelivered for ever."""
    await notify_on(store)
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack_down(slack)
        assert await scheduler.tick()  # 16:30: kept
        assert h.bot.digest.undelivered and h.bot.notifier.undelivered
        clock.advance(UNDELIVERED_KEPT_S + 1800)
        slack.failures.clear()
        assert await scheduler.tick()  # much later: Slack answers, the old news is dropped
        assert not h.bot.digest.undelivered and not h.bot.notifier.undelivered
    assert change_replies(slack) == []
    assert [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE"] \
        == []


async def test_another_replica_tells_the_ending_when_slack_returns(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock, *,
        redis_server: str) -> None:
    """Replica one sweeps 16:30 and its retry while Slack is down; replica two (one Redis)
    wins 17:00, when Slack answers: it tells the failure in the thread and DMs alice, once
    (before: what one kept lived in its process only, lost to the other replica or a
    restart, as the saved snapshots tell the ending to no later diff)."""
    await notify_on(store)
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, store.prefix, tmp_path)
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweeper, clock) as one, \
                running_bot(slack, other, sweeper, clock) as two:
            first, second = make_scheduler(one.bot), make_scheduler(two.bot)
            assert await first.tick()  # 16:00
            clock.advance(1800)
            world["sft"] = "FAILED"
            slack_down(slack)
            assert await first.tick()  # 16:30
            clock.advance(60)
            assert await first.tick()  # 16:31: the retry
            slack.failures.clear()
            clock.advance(1740)
            assert await second.tick()  # 17:00, won by replica two
            told_at_17 = len(change_replies(slack)), len(
                [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE"])
            clock.advance(1800)
            assert await first.tick()  # 17:30, replica one again: nothing twice
    finally:
        await other.aclose()
    assert told_at_17 == (1, 1)  # the reply and the DM, by replica two
    (reply,) = change_replies(slack)
    assert "sft-mistral-7b" in reply and "as of 16:30Z" in reply
    dms = [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "DALICE"]
    assert len(dms) == 1
