"""A file upload's bytes go to Slack's upload host, outside the Web API methods: that request
is accounted as every Slack call is (logged, counted, shown in ``/healthz``) and belongs to
its posting's circuit breaker (``bot.breaker``): a hung upload is a strike, and a posting
that gave up sends no upload. Fake Slack (its upload host refusing or hanging), real Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.breaker import GaveUp, posting
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, sweep_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

BOUND_S = 1.0


async def test_an_upload_the_host_refuses_is_counted_and_shown(harness: Harness) -> None:
    """`/job`'s chart: the upload host answers 500. The answer stands, and the failure is
    counted under files.upload and listed in /healthz (before: swallowed unseen, the
    except clause trusting a Web API accounting the upload never went through)."""
    harness.slack.upload_statuses = [500]
    _, hook = await harness.command("/job", "alpha:4242")
    await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert len(harness.slack.to(hook)) == 1
    assert harness.slack.to("/api/files.completeUploadExternal") == []
    errors = harness.bot.telemetry.slack_api_errors
    assert errors.labels(method="files.upload", error="http_500")._value.get() == 1
    assert {"call": "files.upload", "error": "http_500"}.items() <= \
        harness.bot.health.summary()["recent"][-1].items()


async def test_a_hung_upload_is_a_strike_of_its_posting(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """Inside a posting: the upload's bytes time out, then a post times out too: two in a
    row, so the next call gives up unsent (before: the upload's timeout was no strike, and
    the next call went out on the probe bound)."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        client = h.bot.client
        client.bound(BOUND_S)  # type: ignore[attr-defined]
        slack.hang("upload", times=1)
        slack.hang("chat.postMessage", times=1)
        with posting() as scope:
            with pytest.raises(TimeoutError):
                await client.files_upload_v2(channel="DALICE", content=b"x" * 10,
                                             filename="jobs.txt")
            with pytest.raises(TimeoutError):
                await client.chat_postMessage(channel="C0SWEEP", text="hung too")
            with pytest.raises(GaveUp):
                await client.chat_postMessage(channel="C0SWEEP", text="given up")
            with pytest.raises(GaveUp):
                await client.files_upload_v2(channel="DALICE", content=b"y",
                                             filename="more.txt")
        assert scope.hung == "chat.postMessage"
        errors = h.bot.telemetry.slack_api_errors
        assert errors.labels(method="files.upload", error="TimeoutError")._value.get() == 1
    assert len(slack.to("/api/files.getUploadURLExternal")) == 1
