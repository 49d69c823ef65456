"""Slack saying no: a failed post never stops the others, and each failure is seen once.

The fake Slack Web API answers ``not_in_channel``, ``user_not_found``, 429s that outlast the
SDK's retries, and a 404 on an expired response_url.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot import delivery
from bot.delivery import dm_channel, post
from bot.scheduled import make_scheduler
from bot.slack_errors import Refusal
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, collapsing, sweep_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import FakeSlack


def alerts(slack: FakeSlack) -> list[dict[str, object]]:
    return [c.params for c in slack.to("/api/chat.postMessage") if "cancel_salvage" in
            str(c.params.get("blocks", ""))]


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "msg_too_long"])
async def test_bot_not_in_channel_still_alerts_the_owner(harness: Harness, error: str) -> None:
    """A refused sweep-channel post (every one of them): the collapse DM still goes out, the
    failure is logged once per call, counted with Slack's error, and shown in /healthz."""
    harness.slack.fail("chat.postMessage", error, times=50, target="C0SWEEP")
    with capture_logs() as logs:
        assert await make_scheduler(harness.bot).tick()
    (dm,) = alerts(harness.slack)
    assert dm["channel"] == "DALICE"
    refused = [c for c in harness.slack.calls if c.status != 200]
    assert refused and all(c.params["channel"] == "C0SWEEP" for c in refused)
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [e["event"] for e in errors] == ["slack call failed"] * len(refused)
    assert all(e["error"] == error for e in errors)
    metrics = harness.bot.telemetry.render().decode()
    assert (f'jobtables_slack_api_errors_total{{error="{error}",'
            f'method="chat.postMessage"}} {float(len(refused))}') in metrics
    _, body = await harness.get("/healthz")
    health = json.loads(body)["slack"]
    assert health["failures"] == len(refused)
    assert health["recent"][-1]["error"] == error


async def test_unknown_owner_id_falls_back_to_the_channel_naming_the_owner(
    harness: Harness,
) -> None:
    """user_not_found when opening the owner's DM: the alert goes to the channel, naming them."""
    harness.slack.fail("conversations.open", "user_not_found", times=5)
    assert await make_scheduler(harness.bot).tick()
    (alert,) = alerts(harness.slack)
    assert alert["channel"] == "C0SWEEP"
    blocks = alert["blocks"]
    text = blocks_text(json.loads(blocks) if isinstance(blocks, str) else blocks)  # type: ignore[arg-type]
    assert "For <@UALICE>: the direct message to the owner could not be delivered" in text
    episode = await harness.bot.store.get_doc("episode:alpha:4242")
    assert episode["channel"] == "C0SWEEP" and episode["state"] == "open"


async def test_rate_limits_that_outlast_the_retries_do_not_stop_the_alert(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """429s beyond the SDK's retries on the channel parent: thread and DM are still sent.

    (The DM is now the sweep's first post, before the parent: the 429s are aimed at the
    channel, whose first posts they were before.)"""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config(prefix, tmp_path))
    slack.rate_limit("chat.postMessage", times=4, retry_after=0, target="C0SWEEP")
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        metrics = h.bot.telemetry.render().decode()
    statuses = [c.status for c in slack.calls if c.path == "/api/chat.postMessage"
                and c.params["channel"] == "C0SWEEP"]
    assert statuses[:4] == [429, 429, 429, 429]
    assert 'error="ratelimited",method="chat.postMessage"} 1.0' in metrics
    (dm,) = alerts(slack)
    assert dm["channel"] == "DALICE"
    tables = [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == "C0SWEEP"]
    assert tables and all("thread_ts" not in c.params for c in tables)


async def test_failed_response_url_is_logged_and_counted(harness: Harness) -> None:
    """An expired response_url (404) is counted, shown in /healthz, and stops that answer."""
    harness.slack.gone_hooks.add("cmd1")
    _, hook = await harness.command("/jobs")
    await harness.bot.tasks.drain()
    attempts = [c for c in harness.slack.calls if c.path == hook]
    assert [c.status for c in attempts] == [404]
    metrics = harness.bot.telemetry.render().decode()
    assert 'jobtables_response_url_errors_total{error="http_404",surface="/jobs"} 1.0' in metrics
    _, body = await harness.get("/healthz")
    assert json.loads(body)["slack"]["recent"][-1] == {
        "call": "response_url (/jobs)", "error": "http_404",
        "at": json.loads(body)["slack"]["recent"][-1]["at"]}


async def test_overlong_jobs_answer_says_so_and_goes_as_a_file(harness: Harness) -> None:
    """More than a response_url takes: five messages, the last saying it cut, and the whole
    report uploaded to the invoker's DM (files_upload_v2)."""
    from tests.bot.builders import detail, job

    jobs = [detail(job(str(i), f"{b}-run-{i:03d}-" + "y" * 30, bucket=b))
            for b in ("rl", "sft", "datagen", "eval", "other") for i in range(120)]
    harness.sweeper.make = lambda: sweep_result(jobs, at=harness.clock())
    _, hook = await harness.command("/jobs")
    await harness.bot.tasks.drain()
    replies = harness.slack.to(hook)
    assert len(replies) == 5 and "more message(s) cut" in replies[-1].params["text"]
    (done,) = harness.slack.to("/api/files.completeUploadExternal")
    assert done.params["channel_id"] == "DALICE"
    (upload,) = [c for c in harness.slack.calls if c.path.startswith("/upload/")]
    assert int(upload.params["bytes"]) > 50_000  # every table, not the five messages


async def test_alert_nobody_received_is_sent_on_the_next_sweep(harness: Harness) -> None:
    """Owner DM and channel both refused: no episode is opened, and the next sweep alerts."""
    harness.slack.fail("conversations.open", "user_not_found", times=1)
    harness.slack.fail("chat.postMessage", "not_in_channel", times=50, target="C0SWEEP")
    assert await make_scheduler(harness.bot).tick()
    assert alerts(harness.slack) == []
    assert await harness.bot.store.get_doc("episode:alpha:4242") is None
    harness.slack.failures.clear()
    harness.clock.advance(1800)
    assert await make_scheduler(harness.bot).tick()
    (dm,) = alerts(harness.slack)
    assert dm["channel"] == "DALICE"


async def test_a_refused_dm_is_none_and_logged_once_by_the_client(harness: Harness) -> None:
    """``dm_channel`` (every DM the bot sends opens its channel through it): the DM's id, or
    None when Slack refuses, that refusal logged and counted once, by the client."""
    assert await dm_channel(harness.bot.client, "UALICE") == "DALICE"
    harness.slack.fail("conversations.open", "user_not_found", times=1)
    with capture_logs() as logs:
        assert await dm_channel(harness.bot.client, "UBOB") is None
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["slack call failed"]
    metrics = harness.bot.telemetry.render().decode()
    assert ('jobtables_slack_api_errors_total{error="user_not_found",'
            'method="conversations.open"} 1.0') in metrics


async def test_each_owner_s_dm_is_opened_once(harness: Harness) -> None:
    """Two sweeps DM alice about two collapsing jobs: both DMs go to her channel, opened by
    one ``conversations.open`` (the client remembers it), not one per DM."""
    harness.sweeper.make = lambda: sweep_result([collapsing("4242")], at=harness.clock())
    assert await make_scheduler(harness.bot).tick()
    harness.clock.advance(1800)
    harness.sweeper.make = lambda: sweep_result([collapsing("4242"), collapsing("4243")],
                                                at=harness.clock())
    assert await make_scheduler(harness.bot).tick()
    assert [dm["channel"] for dm in alerts(harness.slack)] == ["DALICE", "DALICE"]
    assert len(harness.slack.to("/api/conversations.open")) == 1


async def test_a_dm_refused_on_its_channel_is_opened_afresh(harness: Harness) -> None:
    """A call that fails naming a remembered DM channel (a closed DM, a deactivated user)
    forgets it: the next DM opens it again, once, and is remembered again."""
    client = harness.bot.client
    assert await dm_channel(client, "UALICE") == "DALICE"
    assert await dm_channel(client, "UALICE") == "DALICE"
    assert len(harness.slack.to("/api/conversations.open")) == 1
    harness.slack.fail("chat.postMessage", "channel_not_found", times=1, target="DALICE")
    assert await post(client, channel="DALICE", text="x") == Refusal("channel_not_found")
    assert await dm_channel(client, "UALICE") == "DALICE"
    assert await dm_channel(client, "UALICE") == "DALICE"
    assert len(harness.slack.to("/api/conversations.open")) == 2


async def test_dm_channels_remembered_are_bounded(harness: Harness,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``DM_CHANNELS_KEPT`` users are remembered, the one opened longest ago
    forgotten first; a refused open is not remembered."""
    monkeypatch.setattr(delivery, "DM_CHANNELS_KEPT", 2)
    client = harness.bot.client
    for user in ("U1", "U2", "U3"):
        assert await dm_channel(client, user) == "D" + user[1:]
    assert list(client.dm_channels) == ["U2", "U3"]
    harness.slack.fail("conversations.open", "user_not_found", times=1)
    assert await dm_channel(client, "U4") is None
    assert await dm_channel(client, "U3") == "D3"  # remembered: no call
    assert await dm_channel(client, "U1") == "D1"  # forgotten: opened again
    opened = [(c.params["users"], c.status) for c in harness.slack.calls
              if c.path == "/api/conversations.open"]
    assert opened == [("U1", 200), ("U2", 200), ("U3", 200), ("U4", 400), ("U1", 200)]
    assert "U4" not in client.dm_channels


@pytest.mark.parametrize(("text", "suggests"), [("", "`/jobs rl`"), ("rl", "as a file."),
                                               ("mine", "as a file.")])
async def test_a_cut_answer_never_suggests_what_was_asked(harness: Harness, text: str,
                                                          suggests: str) -> None:
    """Cut at five messages, ``/jobs`` suggests one bucket; ``/jobs rl`` or ``/jobs mine``
    (already narrowed) points at the DM only, not at the command just typed."""
    from tests.bot.builders import detail, job

    jobs = [detail(job(str(i), f"rl-run-{i:03d}-" + "y" * 30, bucket="rl")) for i in range(600)]
    harness.sweeper.make = lambda: sweep_result(jobs, at=harness.clock())
    _, hook = await harness.command("/jobs", text)
    await harness.bot.tasks.drain()
    last = harness.slack.to(hook)[-1].params["text"]
    assert "more message(s) cut" in last and suggests in last
    if text:
        assert "`/jobs" not in last.split("more message(s) cut")[-1]


async def test_slack_unreachable_is_a_failed_call_not_an_exception() -> None:
    """Slack refusing connections past the client's retries (slack_sdk raises aiohttp's error
    as is, not a SlackClientError): post, edit and conversations.open answer "not sent" and
    the failure is counted, so a sweep goes on to its collapse alerts (it raised out of the
    digest and skipped them)."""
    import socket

    from pydantic import SecretStr

    from bot.app import make_web_client
    from bot.delivery import SlackHealth, edit
    from bot.settings import Settings
    from bot.telemetry import Telemetry

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: connections are refused
    settings = Settings(slack_bot_token=SecretStr("xoxb-test"),
                        slack_signing_secret=SecretStr("s"),
                        slack_api_url=f"http://127.0.0.1:{port}/api/")
    telemetry, health = Telemetry(), SlackHealth()
    client = make_web_client(settings, telemetry, health=health, retry_handlers=[])
    refused = await post(client, channel="C1", text="x")
    assert isinstance(refused, Refusal) and not refused.permanent  # passes: kept by callers
    assert await edit(client, channel="C1", ts="1.2", text="x") == "failed"
    assert await dm_channel(client, "UALICE") is None
    assert "ClientConnectorError" in str(health.summary())
