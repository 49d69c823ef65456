"""A post Slack refuses for good is dropped (or sent smaller) at once; a passing refusal is
kept and tried again no sooner than Slack's ``Retry-After``.

Before, ``bot.delivery.post`` returned ``None`` for every refusal, so the digest and the
job-end DMs kept a reply Slack would never take (the bot not in the channel, the DM closed to
apps, a message too long) and posted it again at the sweep's retry and at every sweep for six
hours (``UNDELIVERED_KEPT_S``), each sweep reported undelivered; while a 429 asking for two
minutes was tried again a minute later. Fake Slack answering as Slack does, fake clock, real
Redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.delivery import post
from bot.scheduled import make_scheduler
from bot.slack_errors import Refusal
from bot.store import RedisStore
from tests.bot.builders import FakeClock
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_slack_down_sweeps import failing_sft
from tests.bot.test_sweep_retry import change_replies

pytestmark = pytest.mark.redis


def _changes(params: dict[str, Any]) -> bool:
    return str(params.get("text", "")).startswith("Changes")


def _tried(slack: FakeSlack, channel: str, text: str) -> int:
    """Requests (answered or refused) posting ``text`` to ``channel``."""
    return sum(1 for c in slack.calls if c.path == "/api/chat.postMessage"
               and c.params.get("channel") == channel and text in str(c.params.get("text")))


async def test_a_reply_and_a_dm_slack_refuses_for_good_are_tried_once(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """16:30 sees sft-mistral-7b fail; Slack answers not_in_channel to the change reply and
    messages_tab_disabled to alice's DM: the sweep is done (no retry), nothing is kept, and
    neither is posted again by the sweeps of the next six hours (before: 2 + 12 tries each)."""
    await notify_on(store)
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00: the baseline
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack.fail("chat.postMessage", "not_in_channel", target="C0SWEEP", when=_changes)
        slack.fail("chat.postMessage", "messages_tab_disabled", target="DALICE")
        assert await scheduler.tick()  # 16:30
        assert scheduler.retry_at is None
        assert not h.bot.digest.undelivered and not h.bot.notifier.undelivered
        for _ in range(12):
            clock.advance(1800)
            assert await scheduler.tick()
    assert _tried(slack, "C0SWEEP", "Changes") == 1
    assert _tried(slack, "DALICE", "sft-mistral-7b") == 1
    assert await store.get_doc("digest:undelivered") is None
    assert await store.get_doc("notify:undelivered") is None


async def test_a_message_too_long_is_sent_cut_in_the_same_sweep(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Slack refuses the change reply as msg_too_long: the same post goes out once more as
    its text alone, cut and saying so, and is not tried again later."""
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack.fail("chat.postMessage", "msg_too_long", when=_changes)
        assert await scheduler.tick()
        assert scheduler.retry_at is None
        clock.advance(1800)
        assert await scheduler.tick()
    (reply,) = change_replies(slack)
    assert "sft-mistral-7b" in reply and "Slack refused the full message" in reply
    assert _tried(slack, "C0SWEEP", "Changes") == 2


async def test_a_rate_limit_is_waited_out_as_long_as_slack_asks(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """A 429 asking for 120 s on the change reply: kept; the sweep's retry a minute later
    does not send it yet (Slack would refuse it again); the 17:00 sweep posts it, once."""
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack.rate_limit("chat.postMessage", retry_after=120, target="C0SWEEP")
        assert await scheduler.tick()  # 16:30: limited (the parent's edit first, then 429)
        assert h.bot.digest.undelivered and scheduler.retry_at is not None
        tried = _tried(slack, "C0SWEEP", "Changes")
        clock.advance(60)
        assert await scheduler.tick()  # 16:31: the retry, inside Slack's 120 s
        assert _tried(slack, "C0SWEEP", "Changes") == tried
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00
    (reply,) = change_replies(slack)
    assert "sft-mistral-7b" in reply and "as of 16:30Z" in reply


async def test_post_says_why_slack_refused(slack: FakeSlack, store: RedisStore, prefix: str,
                                           tmp_path: Path, clock: FakeClock) -> None:
    """The caller is told Slack's error code and whether trying again can help."""
    sweeper = failing_sft(clock, {"sft": "RUNNING"}, prefix, tmp_path)
    sweeper.conf = make_config(prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        slack.fail("chat.postMessage", "channel_not_found")
        gone = await post(h.bot.client, channel="C0GONE", text="hello")
        slack.fail("chat.postMessage", "internal_error", status=500)
        down = await post(h.bot.client, channel="C0SWEEP", text="hello")
        sent = await post(h.bot.client, channel="C0SWEEP", text="hello")
    assert isinstance(gone, Refusal) and (gone.error, gone.permanent) == (
        "channel_not_found", True)
    assert isinstance(down, Refusal) and not down.permanent
    assert not isinstance(sent, Refusal) and sent["channel"] == "C0SWEEP"


async def test_a_collapse_alert_refused_for_good_waits_for_the_next_sweep(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The collapse DM refused (messages_tab_disabled) and its channel fallback too
    (not_in_channel): no retry a minute later, which could not pass either; the claim is
    given back, so the next sweep tries once more (someone may have invited the bot)."""
    from tests.bot.builders import FakeSweeper, collapsing, sweep_result

    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config(prefix, tmp_path))
    slack.fail("chat.postMessage", "messages_tab_disabled", target="DALICE")
    slack.fail("chat.postMessage", "not_in_channel", target="C0SWEEP",
               when=lambda p: "Collapse on" in str(p.get("text")))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        assert scheduler.retry_at is None
        assert h.bot.alerter.undelivered == 0
        clock.advance(1800)
        assert await scheduler.tick()
        alert = h.alert_post()
    assert alert["channel"] == "DALICE"


async def test_a_parent_edit_refused_for_its_content_is_sent_cut(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The 16:30 edit of the day's parent refused as msg_too_long: the parent is edited with
    its text cut, in that sweep, and no retry is asked for (before: the edit failed 'for
    now', the sweep was retried, and so on at every sweep)."""
    sweeper = failing_sft(clock, {"sft": "RUNNING"}, prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        clock.advance(1800)
        slack.fail("chat.update", "msg_too_long")
        assert await scheduler.tick()
        assert scheduler.retry_at is None and not h.bot.digest.undelivered
    (edit,) = slack.to("/api/chat.update")
    assert "Slack refused the full message as msg_too_long" in str(edit.params.get("blocks"))
