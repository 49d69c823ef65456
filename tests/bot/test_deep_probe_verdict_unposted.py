"""A pressed deep probe whose verdict Slack would not post tells the presser, with the verdict.

``bot.deep_probe.on_button`` posts the verdict in the pressed message's thread. When that post
failed (the bot removed from the channel, a rate limit past its retries, a hung API), the
failure was logged and nothing else: the presser, who had waited out the probe, saw nothing.
Now the presser gets an ephemeral reply saying the verdict could not be posted, with the
verdict (its buttons left off: no stored episode could honour them). Fake Slack, the remote
read stubbed (no SSH: the probe is not what is tested), real Redis.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot import deep_probe
from bot.config import Config
from report.models import DeepProbe, JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, detail, job
from tests.bot.conftest import running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis


def killed() -> JobDetail:
    flagged = detail(job("5151", "rl-grpo-new", flags=("deep-probe",)))
    return flagged.model_copy(update={"report": flagged.report.model_copy(update={
        "deep_probe": DeepProbe(verdict="KILL", reasons=["weight-sync garbage"], read={})})})


@pytest.fixture(autouse=True)
def stubbed_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    async def probe(config: Config, cluster: str | None, job_id: str, **_: Any) -> JobDetail:
        return killed()

    monkeypatch.setattr(deep_probe, "run_deep_probe", probe)


async def test_a_verdict_slack_refused_is_told_to_the_presser(
        slack: FakeSlack, store: Any, sweeper: FakeSweeper, clock: FakeClock) -> None:
    """The thread post refused (``not_in_channel``): an ephemeral reply says so, with the
    KILL verdict and its reason, and no button (before: nothing at all)."""
    async with running_bot(slack, store, sweeper, clock) as h:
        slack.fail("chat.postMessage", "not_in_channel")
        _, hook = await h.press("deep_probe", "alpha:5151", user="UALICE", channel="C0SWEEP")
        await h.bot.tasks.drain()
    assert slack.to("/api/chat.postMessage") == []
    (reply,) = slack.to(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert reply.params.get("replace_original") in (False, "false", None)
    text = blocks_text(reply.params["blocks"])
    assert "could not be posted" in reply.params["text"] and "KILL" in reply.params["text"]
    assert "weight-sync garbage" in text and "could not be posted" in text
    assert not [b for b in reply.params["blocks"] if b["type"] == "actions"]


async def test_a_posted_verdict_sends_no_extra_reply(
        slack: FakeSlack, store: Any, sweeper: FakeSweeper, clock: FakeClock) -> None:
    """The verdict posted in the thread: the presser gets no ephemeral echo of it."""
    async with running_bot(slack, store, sweeper, clock) as h:
        _, hook = await h.press("deep_probe", "alpha:5151", user="UALICE", channel="C0SWEEP")
        await h.bot.tasks.drain()
    (post,) = slack.to("/api/chat.postMessage")
    assert post.params["thread_ts"] == "1700000000.000001"
    assert "weight-sync garbage" in blocks_text(post.params["blocks"])
    assert slack.to(hook) == []


async def test_a_verdict_post_left_hanging_is_told_to_the_presser(
        slack: FakeSlack, store: Any, sweeper: FakeSweeper, clock: FakeClock) -> None:
    """The Web API hung: the thread post times out, and the presser's answer (by its
    response_url, which answers) is the next call of the press, let through: it arrives."""
    async with running_bot(slack, store, sweeper, clock) as h:
        h.bot.client.bound(0.3)  # type: ignore[attr-defined]
        slack.hang("chat.postMessage")
        _, hook = await h.press("deep_probe", "alpha:5151", user="UALICE", channel="C0SWEEP")
        await h.bot.tasks.drain()
        assert len(slack.hung("chat.postMessage")) == 1
    (reply,) = slack.to(hook)
    assert "could not be posted" in reply.params["text"] and "KILL" in reply.params["text"]
