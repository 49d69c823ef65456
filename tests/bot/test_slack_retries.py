"""Slack's own retries of a request (``X-Slack-Retry-Num``: the first delivery's ack was slow
to arrive) carry the same payload, signed anew: the command or press runs once, its answer
shows once. The invocation's ``trigger_id`` is the key, shared by the replicas in Redis."""

from __future__ import annotations

import time

import pytest

from bot import deep_probe
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper
from tests.bot.conftest import Harness, make_store, running_bot
from tests.bot.fake_slack import FakeSlack, action_body, command_body, signed_headers


def retried(body: str, attempt: int) -> dict[str, str]:
    """Slack's retry of ``body``: signed again a moment later, saying which try it is."""
    headers = signed_headers(body, timestamp=int(time.time()) + attempt)
    headers.update({"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "http_timeout"})
    return headers


async def test_a_retried_jobs_command_is_answered_once(harness: Harness) -> None:
    """`/jobs` delivered, then Slack's two retries of it: one sweep, and the response_url
    gets one answer ("Sweeping 1 cluster…" and the tables), not three. Near miss: the same
    command typed again (a new trigger) is answered."""
    body = command_body("/jobs", "", user="UALICE",
                        response_url=harness.slack.response_url("jobs"))
    assert (await harness.post(body, signed_headers(body)))[0] == 200
    for attempt in (1, 2):
        assert (await harness.post(body, retried(body, attempt)))[0] == 200
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 1
    assert len(harness.slack.to("/webhook/jobs")) == 2
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)


async def test_a_retried_press_is_run_once_across_replicas(
        slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
        redis_server: str) -> None:
    """A keep_running press delivered to one replica, Slack's retry of it to the other: one
    audit entry, and nothing more is said to alice (no refusal of her own press)."""
    other = make_store(store.prefix, url=redis_server)
    try:
        async with running_bot(slack, store, sweeper, clock) as a, \
                running_bot(slack, other, sweeper, clock) as b:
            await scheduled_sweep(a.bot, 0)  # the collapse is alerted to alice
            where = a.alert_post()
            body = action_body("keep_running", "alpha:4242", user="UALICE",
                               response_url=slack.response_url("kept"),
                               channel=where["channel"], message_ts=where["ts"],
                               blocks=where["blocks"])
            assert (await a.post(body, signed_headers(body)))[0] == 200
            await a.bot.tasks.drain()
            answered = len(slack.calls)
            assert (await b.post(body, retried(body, 1)))[0] == 200
            await b.bot.tasks.drain()
            audit = await store.audit_entries()
    finally:
        await other.aclose()
    assert [(e["actor"], e["outcome"]) for e in audit] == [("UALICE", "kept running")]
    # No second answer, edit or refusal shown (Bolt's first request on replica b checks its
    # token with auth.test: not an answer).
    assert [c.path for c in slack.calls[answered:]] in ([], ["/api/auth.test"])


async def test_a_retried_share_press_shares_once_and_says_nothing_more(
        harness: Harness) -> None:
    """Share to channel pressed, then Slack's retry of that press: one post in the channel,
    one answer to alice (before: the retry was told 'alice just shared it', about her own
    press)."""
    body = action_body("share_to_channel", "alpha:4100", user="UALICE",
                       response_url=harness.slack.response_url("share"), channel="C0SWEEP")
    assert (await harness.post(body, signed_headers(body)))[0] == 200
    await harness.bot.tasks.drain()
    assert (await harness.post(body, retried(body, 1)))[0] == 200
    await harness.bot.tasks.drain()
    shared = [c for c in harness.slack.to("/api/chat.postMessage")
              if c.params["channel"] == "C0SWEEP"]
    assert len(shared) == 1
    assert len(harness.slack.to("/webhook/share")) == 1


async def test_a_retried_deep_probe_press_is_not_told_it_is_already_running(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Deep-probe press whose probe is still reading, then Slack's retry of that press: the
    retry is not run (before: alice was told her own probe was already running, and it was
    audited as a duplicate press)."""
    from tests.bot.test_deep_probe_presses import HeldProbe, row

    held = HeldProbe()
    monkeypatch.setattr(deep_probe, "run_deep_probe", held)
    body = action_body("deep_probe", "alpha:4100", user="UALICE", blocks=row("alpha:4100"),
                       response_url=harness.slack.response_url("probe"), channel="C0SWEEP",
                       message_ts="1700000001.000001")
    assert (await harness.post(body, signed_headers(body)))[0] == 200
    assert (await harness.post(body, retried(body, 1)))[0] == 200
    held.release.set()
    await harness.bot.tasks.drain()
    assert held.calls == ["alpha:4100"]
    audit = await harness.bot.store.audit_entries()
    assert [e["outcome"] for e in audit if e["outcome"] == "duplicate"] == []
