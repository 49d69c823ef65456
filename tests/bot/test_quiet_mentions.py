"""The day's thread names people without pinging those already told (fake Slack, real Redis).

A collapse DMs its owner; the thread line that says so pinged them again (``owner <@U> told``):
two notifications for one collapse. A cancel pressed by alice was told as ``cancelled by
<@UALICE>``: a ping to the one person who surely knows. The thread now names them by their
cluster user, without a mention; the alert itself keeps the one mention it needs (the channel
fallback, when the DM cannot be delivered).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.digest_posting import Pacer
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, collapsing
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import Call, FakeSlack

pytestmark = pytest.mark.redis


@asynccontextmanager
async def bot_with(slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path,
                   jobs: list[JobDetail]) -> AsyncIterator[Harness]:
    sweeper = FakeSweeper(make=lambda: build_result(jobs, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        h.bot.digest.pacer = Pacer(0.0)
        yield h


def shown(call: Call) -> str:
    """Everything a post shows or notifies with: its text and its blocks' text."""
    blocks = call.params.get("blocks") or []
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    return call.params.get("text", "") + "\n" + blocks_text(blocks)


def posts(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage") if c.status == 200]


def thread(slack: FakeSlack) -> list[str]:
    return [shown(c) for c in posts(slack) if c.params.get("thread_ts")]


async def test_a_collapse_dmed_to_its_owner_is_told_in_the_thread_without_a_ping(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """The owner got the DM; the thread line names them (alice) and mentions nobody."""
    async with bot_with(slack, store, clock, tmp_path, [collapsing()]) as h:
        await scheduled_sweep(h.bot, 0)
    dms = [c for c in posts(slack) if c.params["channel"] == "DALICE"]
    assert len(dms) == 1
    told = [t for t in thread(slack) if "collapse on `alpha:4242`" in t]
    assert len(told) == 1 and "owner `alice` told by DM" in told[0], told
    assert "<@" not in "".join(thread(slack))


async def test_a_collapse_whose_dm_failed_pings_the_owner_once_in_the_channel(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """The DM cannot be opened: the channel alert mentions alice (her only notification);
    the thread line says where the alert went and does not mention her a second time."""
    slack.fail("conversations.open", "user_not_found")
    async with bot_with(slack, store, clock, tmp_path, [collapsing()]) as h:
        await scheduled_sweep(h.bot, 0)
    everything = "\n".join(shown(c) for c in posts(slack))
    assert everything.count("<@UALICE>") == 1, everything
    alert = next(shown(c) for c in posts(slack) if "<@UALICE>" in shown(c))
    assert "Collapse on" in alert
    told = [t for t in thread(slack) if "collapse on `alpha:4242`" in t]
    assert len(told) == 1 and "alert in the channel" in told[0] and "<@" not in told[0], told


@pytest.mark.parametrize(("presser", "named"), [("UALICE", "cancelled by `alice`"),
                                                ("UOPS", "cancelled by an operator")])
async def test_a_cancel_is_told_in_the_thread_without_pinging_the_presser(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path, *,
        presser: str, named: str) -> None:
    """The owner (or an operator) pressed Cancel: the thread names who did, with no mention."""
    async with bot_with(slack, store, clock, tmp_path, [collapsing()]) as h:
        await scheduled_sweep(h.bot, 0)
        await h.press_alert("cancel_salvage", user=presser)
        await h.bot.tasks.drain()
    assert h.sweeper.cancels == [("alpha", "4242")]
    lines = [t for t in thread(slack) if "cancelled by" in t]
    assert len(lines) == 1 and named in lines[0], lines
    assert "<@" not in "".join(thread(slack))
