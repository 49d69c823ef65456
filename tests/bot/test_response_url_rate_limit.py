"""A ``response_url`` that answers 429 (Slack rate-limits its webhooks, about one message a
second) is waited out as its ``Retry-After`` asks, like the Web API's 429s, not taken for a
gone URL (fake Slack, real Redis).

Before: ``/jobs``' tables, posted right after its "Sweeping 1 cluster…" ack, met a 429 and
were dropped with the rest of the answer (``Responder`` counted ``http_429`` and stopped):
the user saw "Sweeping…" and nothing more."""

from __future__ import annotations

import asyncio

import pytest

from tests.bot.builders import blocks_text
from tests.bot.conftest import Harness

pytestmark = pytest.mark.redis


async def test_a_rate_limited_answer_is_sent_after_its_retry_after(harness: Harness) -> None:
    """The ack goes through, the tables meet one 429 (Retry-After 0): they arrive, once."""
    harness.sweeper.gate = asyncio.Event()  # the live sweep waits until the 429 is set
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)  # the ack, "Sweeping 1 cluster…"
    harness.slack.rate_limit("response_url", times=1, retry_after=0)
    harness.sweeper.gate.set()
    await harness.bot.tasks.drain()
    answered = harness.slack.to(hook)
    assert answered[0].params["text"] == "Sweeping 1 cluster…"
    assert len(answered) == 2 and "rl-ppo-llama-8b" in blocks_text(answered[1].params["blocks"])
    assert len([c for c in harness.slack.calls if c.status == 429]) == 1


async def test_a_response_url_that_keeps_refusing_gives_up(harness: Harness) -> None:
    """429 again and again: the answer gives up after a few tries (counted), it does not
    wait for ever."""
    harness.slack.rate_limit("response_url", times=20, retry_after=0)
    _, hook = await harness.command("/jobs", "help")
    await harness.bot.tasks.drain()
    tries = [c for c in harness.slack.calls if c.path == hook]
    assert 1 < len(tries) <= 4 and harness.slack.to(hook) == []
    errors = harness.bot.telemetry.response_url_errors
    assert errors.labels(surface="/jobs", error="http_429")._value.get() == 1
