"""Collapse DMs: owner routing, evidence and buttons, one DM per episode across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.alert_messages import collapse_message
from bot.alerts import CONTINUED_SWEEPS
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, collapsing, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack


def _buttons(blocks: list[dict[str, object]]) -> list[dict[str, object]]:
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    elements = actions["elements"]
    assert isinstance(elements, list)
    return elements


def test_cancel_button_is_danger_with_confirmation() -> None:
    """The cancel button has style danger, a confirm dialog, and the job ref in value."""
    cancel, keep, snooze, probe = _buttons(
        collapse_message(collapsing(), can_cancel=True).blocks)
    assert cancel["action_id"] == "cancel_salvage" and cancel["value"] == "alpha:4242"
    assert cancel["style"] == "danger"
    confirm = cancel["confirm"]
    assert isinstance(confirm, dict) and confirm["style"] == "danger"
    assert len(confirm["text"]["text"]) <= 300
    assert keep["action_id"] == "keep_running" and snooze["action_id"] == "snooze"
    assert probe["action_id"] == "deep_probe" and probe["value"] == "alpha:4242"


def test_recommendation_only_has_acknowledge() -> None:
    """Without cancel permission acknowledge is the only action (and the read-only probe)."""
    only, probe = _buttons(collapse_message(collapsing(), can_cancel=False).blocks)
    assert only["action_id"] == "acknowledge" and probe["action_id"] == "deep_probe"


def test_evidence_shows_each_signal_with_window_and_sparkline() -> None:
    """The message names each signal's value and window mean and draws sparklines."""
    text = blocks_text(collapse_message(collapsing(), can_cancel=True).blocks)
    assert "`grad_norm` step 27: 2.80 vs window mean 0.3 (10 pts)" in text
    assert "`entropy` step 27: 0.3 vs window mean 0.9" in text
    assert "banked checkpoint: step 20" in text
    assert "▁" in text or "█" in text


ButtonCase = tuple[dict[str, object], tuple[str, ...], list[str]]


@pytest.mark.parametrize(
    "case",
    [
        ({}, (), ["cancel_salvage", "keep_running", "snooze", "deep_probe"]),
        ({"no_kill": True}, (), ["acknowledge", "deep_probe"]),
        ({}, ("ablation-exempt",), ["acknowledge", "deep_probe"]),
        ({}, ("no-kill",), ["acknowledge", "deep_probe"]),
    ],
)
async def test_dm_goes_to_the_owner_with_the_right_buttons(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, case: ButtonCase,
) -> None:
    """The owner's DM is opened with conversations.open; no_kill/exempt runs get acknowledge."""
    slack_config, flags, expected = case
    clock = FakeClock()
    config = make_config(prefix, tmp_path, **slack_config)
    sick = collapsing(flags=flags)
    sweeper = FakeSweeper(make=lambda: sweep_result([sick]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([sick], config) == ["alpha:4242"]
    (opened,) = slack.to("/api/conversations.open")
    assert opened.params["users"] == "UALICE"
    (posted,) = slack.to("/api/chat.postMessage")
    assert posted.params["channel"] == "DALICE"
    assert [b["action_id"] for b in _buttons(posted.params["blocks"])] == expected


async def test_unknown_owner_goes_to_the_channel(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A job whose user has no Slack mapping is announced in slack.channel."""
    config = make_config(prefix, tmp_path)
    sick = collapsing(user="carol")
    sweeper = FakeSweeper(make=lambda: sweep_result([sick]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        await h.bot.alerter.process([sick], config)
    assert not slack.to("/api/conversations.open")
    assert slack.to("/api/chat.postMessage")[0].params["channel"] == "C0SWEEP"


async def test_restarted_bot_sends_no_second_dm(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The episode is in Redis: a second process seeing the same collapse stays quiet."""
    config = make_config(prefix, tmp_path)
    sick = collapsing()
    sweeper = FakeSweeper(make=lambda: sweep_result([sick]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as first:
        assert await first.bot.alerter.process([sick], config)
        assert not await first.bot.alerter.process([sick], config)
    async with running_bot(slack, store, sweeper, clock) as second:
        assert not await second.bot.alerter.process([sick], config)
    assert len(slack.to("/api/chat.postMessage")) == 1


async def test_new_collapse_after_keep_running_opens_a_new_episode(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """After keep_running the same step stays quiet; once the run has stopped collapsing for
    longer than CONTINUED_SWEEPS sweep intervals, a collapse on a later step DMs again."""
    config = make_config(prefix, tmp_path)
    sick = collapsing()
    later = sick.model_copy(update={"collapse_step": 40})
    sweeper = FakeSweeper(make=lambda: sweep_result([sick]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        await h.bot.alerter.process([sick], config)
        await h.press_alert("keep_running", user="UALICE")
        await h.bot.tasks.drain()
        assert not await h.bot.alerter.process([sick], config)
        # recovered: no sweep saw it collapsing for more than three intervals
        clock.advance(60 * (CONTINUED_SWEEPS * config.slack.sweep_every_minutes + 1))
        assert await h.bot.alerter.process([later], config) == ["alpha:4242"]
    assert len(slack.to("/api/chat.postMessage")) == 2


async def test_a_kept_collapse_that_goes_on_is_not_dmed_every_sweep(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Quiet: someone pressed keep_running; the run goes on collapsing, a later step every
    sweep. It was DMed again on every sweep (each later step opened a new episode); now its
    steps only move the episode on, and the one DM stands until it recovers."""
    config = make_config(prefix, tmp_path)
    sick = collapsing()
    sweeper = FakeSweeper(make=lambda: sweep_result([sick]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        await h.bot.alerter.process([sick], config)
        await h.press_alert("keep_running", user="UALICE")
        await h.bot.tasks.drain()
        for n in range(1, 8):  # seven more sweeps, a sweep interval apart
            clock.advance(60 * config.slack.sweep_every_minutes)
            step = sick.model_copy(update={"collapse_step": (sick.collapse_step or 0) + n})
            assert not await h.bot.alerter.process([step], config), n
    assert len(slack.to("/api/chat.postMessage")) == 1


async def test_snooze_silences_until_it_lapses(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A snoozed job gets no DM for a later collapse until the snooze has lapsed."""
    config = make_config(prefix, tmp_path)
    later = collapsing().model_copy(update={"collapse_step": 40})
    sweeper = FakeSweeper(make=lambda: sweep_result([later]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        await h.bot.alerter.process([collapsing()], config)
        await h.press_alert("snooze", user="UALICE")
        await h.bot.tasks.drain()
        clock.advance(3 * 3600)
        assert not await h.bot.alerter.process([later], config)
        clock.advance(2 * 3600)
        assert await h.bot.alerter.process([later], config) == ["alpha:4242"]
