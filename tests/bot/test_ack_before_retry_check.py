"""Review of eea5519: the ack of a command or press never waits on the Slack-retry check.

The check (``Bot.first_delivery``: has this ``trigger_id`` run already?) asks Redis, bounded by
``bot.replays``' 0.5 s when Redis is frozen. With ``process_before_response`` Bolt answers Slack
when the listener returns, so a check awaited in the listener (d5d6952, afb609c) held every
ack for that round trip; eea5519 moved it into the command's own task but added no test. Here
the check is held open (a Redis that has not answered yet) and the ack must arrive anyway;
the answer follows once the check says it is the first delivery (fake Slack, real Redis).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.bot.conftest import Harness
from tests.bot.fake_slack import action_body, command_body, signed_headers

pytestmark = pytest.mark.redis


def _hold_the_check(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """``first_delivery`` waits on the returned event before asking Redis, as a slow one."""
    gate = asyncio.Event()
    real = harness.bot.first_delivery

    async def held(body: dict[str, Any]) -> bool:
        await gate.wait()
        return await real(body)

    monkeypatch.setattr(harness.bot, "first_delivery", held)
    return gate


async def test_a_commands_ack_does_not_wait_for_the_retry_check(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """/jobs is acked (HTTP 200) while the check is still open; its answer comes after."""
    gate = _hold_the_check(harness, monkeypatch)
    body = command_body("/jobs", "help", user="UALICE",
                        response_url=harness.slack.response_url("jobs"))
    try:
        status, _ = await asyncio.wait_for(harness.post(body, signed_headers(body)), 5)
        assert status == 200
        assert harness.slack.to("/webhook/jobs") == []  # nothing run before the check
    finally:
        gate.set()
    await harness.bot.tasks.drain()
    assert harness.slack.to("/webhook/jobs")


@pytest.mark.parametrize("action", ["share_to_channel", "deep_probe", "keep_running"])
async def test_a_press_ack_does_not_wait_for_the_retry_check(
        harness: Harness, monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """A Share, Deep-probe or collapse-button press is acked while the check is still open."""
    gate = _hold_the_check(harness, monkeypatch)
    body = action_body(action, "alpha:4242", user="UALICE",
                       response_url=harness.slack.response_url("pressed"))
    try:
        status, _ = await asyncio.wait_for(harness.post(body, signed_headers(body)), 5)
        assert status == 200
    finally:
        gate.set()
    await harness.bot.tasks.drain()
