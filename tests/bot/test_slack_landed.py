"""A post whose answer never came, but which landed, is not posted again.

A sweep's change reply (or job-end DM) whose ``chat.postMessage`` timed out on the client is
kept and sent again at the sweep's retry (``bot.digest_posting``, ``bot.notify``); when Slack
had taken it after all, the thread (or the DM) showed it twice. Each such post now carries a
key in its message metadata, and before a kept one is sent again the conversation is read
for it (``bot.landed``): found, it counts as delivered. That read needs a history scope the
bot's manifest does not ask for: without it, the post is sent again as before, and the bot
stops asking after the first refusal. Fake Slack (a post taken and never answered), fake
clock, real Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import FakeClock
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_slack_down_sweeps import failing_sft

pytestmark = pytest.mark.redis

BOUND_S = 2.0
"""The request bound here: the landed post's wait, and well over a local answer."""


def _shown(slack: FakeSlack, channel: str, text: str) -> int:
    """How many messages in ``channel`` (as Slack holds them) say ``text``."""
    return sum(1 for m in slack.messages if m["channel"] == channel and text in str(m["text"]))


async def _ending_landed_unanswered(slack: FakeSlack, store: RedisStore, prefix: str,
                                    tmp_path: Path, clock: FakeClock, *, to: str) -> None:
    """16:00 baseline; 16:30 sft-mistral-7b fails and the first post to ``to`` (the change
    reply in C0SWEEP, or alice's job-end DM) lands but is never answered; 16:31 the sweep's
    retry; 17:00 a sweep."""
    await notify_on(store)
    world = {"sft": "RUNNING"}
    sweeper = failing_sft(clock, world, prefix, tmp_path)
    sweeper.conf = make_config(prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        clock.advance(1800)
        world["sft"] = "FAILED"
        slack.land("chat.postMessage", target=to)
        assert await scheduler.tick()  # 16:30
        assert scheduler.retry_at is not None  # kept: Slack may not have it
        clock.advance(60)
        assert await scheduler.tick()  # 16:31: the retry
        clock.advance(1740)
        assert await scheduler.tick()  # 17:00
        slack.release()


async def test_a_reply_that_landed_unanswered_is_not_posted_again(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The 16:30 change reply timed out but is in the thread: the retry finds it by its key
    and posts nothing more; the thread shows the failure once."""
    slack.history_scope = True
    await _ending_landed_unanswered(slack, store, prefix, tmp_path, clock, to="C0SWEEP")
    assert _shown(slack, "C0SWEEP", "Changes") == 1


async def test_a_dm_that_landed_unanswered_is_not_sent_again(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Alice's job-end DM timed out but is in her DM: not sent again."""
    slack.history_scope = True
    await _ending_landed_unanswered(slack, store, prefix, tmp_path, clock, to="DALICE")
    assert _shown(slack, "DALICE", "sft-mistral-7b") == 1


async def test_without_a_history_scope_the_post_is_sent_again_and_asked_once(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The manifest's scopes (no history): the lookup is refused (missing_scope), the reply
    is sent again as before, and later kept posts do not ask again."""
    await _ending_landed_unanswered(slack, store, prefix, tmp_path, clock, to="C0SWEEP")
    assert _shown(slack, "C0SWEEP", "Changes") == 2
    lookups = [c for c in slack.calls if c.path.startswith("/api/conversations.replies")]
    assert len(lookups) == 1


async def test_a_collapse_dm_that_landed_unanswered_is_bound_not_sent_again(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The collapse DM timed out but is in alice's DM: it is found there at once and its
    episode bound to it, so it is not sent again to the channel and its buttons answer
    (before: a second alert in the channel, and the DM's buttons met 'no record of an alert
    in this message')."""
    from tests.bot.builders import FakeSweeper, collapsing, sweep_result
    from tests.bot.fake_slack import action_body, signed_headers

    slack.history_scope = True
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config(prefix, tmp_path, api_timeout_seconds=BOUND_S))
    slack.land("chat.postMessage", target="DALICE")
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        (dm,) = [m for m in slack.messages if m["channel"] == "DALICE"]
        body = action_body("acknowledge", "alpha:4242", user="UALICE",
                           response_url=slack.response_url("ack"), channel="DALICE",
                           message_ts=dm["ts"])
        assert (await h.post(body, signed_headers(body)))[0] == 200
        await h.bot.tasks.drain()
        audit = await store.audit_entries()
        slack.release()
    assert _shown(slack, "C0SWEEP", "Collapse on") == 0
    assert [e["outcome"] for e in audit] == ["acknowledged"]


async def test_a_parent_that_landed_unanswered_is_the_period_s_parent(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """The day's first parent post timed out but is in the channel: it is found and kept as
    the period's parent, so the retry and the next sweep edit it and thread under it
    (before: a second parent for the same day, the first one orphaned)."""
    sweeper = failing_sft(clock, {"sft": "RUNNING"}, prefix, tmp_path)
    sweeper.conf = make_config(prefix, tmp_path, api_timeout_seconds=BOUND_S)
    slack.history_scope = True
    slack.land("chat.postMessage", target="C0SWEEP")
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()  # 16:00: the parent lands unanswered
        clock.advance(1800)
        assert await scheduler.tick()  # 16:30
        slack.release()
    parents = [m for m in slack.messages if m["channel"] == "C0SWEEP" and not m["thread_ts"]]
    assert len(parents) == 1
    edited = [c.params.get("ts") for c in slack.to("/api/chat.update")]
    assert edited and set(edited) == {parents[0]["ts"]}


async def test_a_cancel_note_that_landed_unanswered_is_not_told_again(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
        clock: FakeClock) -> None:
    """Alice's Cancel & salvage: its 'cancelled by' note in the thread lands unanswered; it
    is found there, so the next sweep, finding the job CANCELLED, does not tell the cancel a
    second time (before: the note read as untold, and the change line told it again)."""
    from probes.models import JobState
    from tests.bot.builders import FakeSweeper, collapsing, detail, sweep_result

    world = {"cancelled": False}

    def make():  # type: ignore[no-untyped-def]
        run = collapsing()
        if world["cancelled"]:
            run = detail(run.report.model_copy(update={
                "state": JobState.CANCELLED, "verdict": "done", "trend": "Cancelled"}))
        return sweep_result([run], at=clock())

    slack.history_scope = True
    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path,
                                                      api_timeout_seconds=BOUND_S))
    async with running_bot(slack, store, sweeper, clock) as h:
        scheduler = make_scheduler(h.bot)
        assert await scheduler.tick()
        slack.land("chat.postMessage", target="C0SWEEP")
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
        world["cancelled"] = True
        clock.advance(1800)
        assert await scheduler.tick()
        slack.release()
    assert sweeper.cancels == [("alpha", "4242")]
    told = [m for m in slack.messages if m["channel"] == "C0SWEEP" and m["thread_ts"]
            and "cancel" in f"{m['text']}{m['blocks']}".lower() and "4242" in str(m["blocks"])]
    assert len(told) == 1, [m["blocks"] for m in told]
