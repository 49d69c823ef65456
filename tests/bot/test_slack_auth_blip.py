"""Bolt's one auth.test (asked before the first command's or press's listener runs, to learn
the bot's own ids) never holds an ack nor turns a Slack blip into a refusal (fake Slack, real
Redis).

Before: Slack answering that first auth.test with a 500 showed the user Bolt's ":warning: ...
your installation with this app is no longer available. Please reinstall this app" and ran
nothing; a hung auth.test held the ack past Slack's 3 seconds (the request bound, then a 500).
The bot's token is its own configuration: the command runs, and auth.test is asked in the
background until it answers."""

from __future__ import annotations

import asyncio

import pytest

from tests.bot.builders import blocks_text
from tests.bot.conftest import Harness

pytestmark = pytest.mark.redis


async def test_a_failed_auth_test_does_not_refuse_the_first_command(harness: Harness) -> None:
    """auth.test answers 500 at the first /jobs: the command is acked plainly and answered
    with the tables; auth.test is asked again later and answers."""
    harness.slack.fail("auth.test", "internal_error", status=500, times=1)
    status, hook = await harness.command("/jobs")
    await harness.bot.tasks.drain()
    assert status == 200
    answers = harness.slack.to(hook)
    assert answers and "rl-ppo-llama-8b" in blocks_text(answers[-1].params["blocks"])
    _, again = await harness.command("/jobs", "rl")
    await harness.bot.tasks.drain()
    assert harness.slack.to(again)
    assert harness.slack.to("/api/auth.test")  # answered once Slack did


async def test_a_hung_auth_test_does_not_hold_the_ack(harness: Harness) -> None:
    """auth.test hangs until the test ends it (the client's bound far off): the first /jobs
    is acked and answered while auth.test is still unanswered. Before, the ack waited on it
    (the request bound, past Slack's 3 seconds); here that wait never ends, so the guard
    below fails the test, with no figure of speed to hold."""
    harness.bot.client.bound(600.0)  # type: ignore[attr-defined]
    harness.slack.hang("auth.test", times=1)
    async with asyncio.timeout(30):  # a guard against waiting for ever, not a measure
        status, hook = await harness.command("/jobs")
        while not any("rl-ppo-llama-8b" in blocks_text(c.params.get("blocks") or [])
                      for c in harness.slack.to(hook)):
            await harness.slack.wait_for(hook, len(harness.slack.to(hook)) + 1)
    assert status == 200
    assert harness.slack.hung("auth.test")  # asked, and still unanswered all along
    harness.slack.release()
    await harness.bot.tasks.drain()
