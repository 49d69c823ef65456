"""Collapse buttons over HTTP: checked against the stored alert, who may press, exactly once.

Every press here is on a message the bot really posted (its alerter ran on the fake sweep and
the fake Slack recorded the post and its ts), because a press is checked against that stored
episode and never against the button value alone.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.alerts import CONTINUED_SWEEPS
from bot.config_source import ConfigSource
from bot.store import RedisStore
from probes.errors import CommandError
from tests.bot.builders import (
    FakeClock,
    FakeSweeper,
    blocks_text,
    collapsing,
    detail,
    job,
    sweep_result,
)
from tests.bot.conftest import Harness, running_bot
from tests.bot.fake_slack import FakeSlack


def incident_files(harness: Harness) -> list[Path]:
    return sorted(Path(harness.sweeper.conf.slack.incident_dir).rglob("*.json"))


async def alert(harness: Harness, ref: str = "alpha:4242") -> dict[str, Any]:
    """Run the alerter on the current sweep; return the posted alert (channel, ts, blocks)."""
    result = harness.sweeper.make()
    before = len(harness.slack.calls)
    await harness.bot.alerter.process(list(result.details.values()),
                                      harness.bot.config.current(), facts=result.facts)
    posts = [c for c in harness.slack.calls[before:]
             if c.path == "/api/chat.postMessage" and c.status == 200]
    (call,) = [c for c in posts if ref in str(c.params["blocks"])]
    blocks = call.params["blocks"]
    return {"channel": call.answer["channel"], "ts": call.answer["ts"],
            "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks}


async def press(harness: Harness, action_id: str, user: str, where: dict[str, Any],
                value: str = "alpha:4242") -> str:
    _, hook = await harness.press(action_id, value, user=user, blocks=where["blocks"],
                                  channel=where["channel"], ts=where["ts"])
    return hook


async def audit(harness: Harness) -> list[tuple[str, str]]:
    return [(e["actor"], e["outcome"]) for e in await harness.bot.store.audit_entries()]


async def test_stranger_is_refused_and_audited(harness: Harness) -> None:
    """A user who is neither operator nor owner gets an ephemeral refusal; it is audited."""
    where = await alert(harness)
    hook = await press(harness, "cancel_salvage", "UEVIL", where)
    (reply,) = await harness.slack.wait_for(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert "Only the job's owner or an operator" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert not harness.slack.to("/api/chat.update")
    assert await audit(harness) == [("UEVIL", "refused")]


async def test_double_click_cancels_once(harness: Harness) -> None:
    """Two presses racing (owner and operator) cause exactly one cancel; the other is told."""
    where = await alert(harness)
    hooks = await asyncio.gather(press(harness, "cancel_salvage", "UALICE", where),
                                 press(harness, "cancel_salvage", "UOPS", where))
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]
    replies = [c for hook in hooks for c in harness.slack.to(hook)]
    assert len(replies) == 1 and "already" in replies[0].params["text"]
    outcomes = [o for _, o in await audit(harness)]
    assert sorted(outcomes) == ["cancel requested", "cancelled", "duplicate"]
    assert outcomes.index("cancel requested") < outcomes.index("cancelled")
    assert len(incident_files(harness)) == 1


async def test_salvage_is_written_before_the_cancel(harness: Harness) -> None:
    """At the moment the cancel is sent, the incident file holds the evidence and the audit
    already records the intent."""
    seen: list[dict[str, object]] = []
    where = await alert(harness)

    def check(cluster: str, job_id: str) -> None:
        (path,) = incident_files(harness)
        seen.append(json.loads(path.read_text()))

    harness.sweeper.on_cancel = check
    await press(harness, "cancel_salvage", "UALICE", where)
    await harness.bot.tasks.drain()
    (record,) = seen
    assert record["kind"] == "salvage" and record["actor"] == "UALICE"
    assert record["banked_step"] == 20
    assert str(record["log_tail"]).endswith("line 500")
    assert record["scheduler_record"]["job_id"] == "4242"  # type: ignore[index]
    assert len(record["metric_window"]) == 30  # type: ignore[arg-type]
    doc = await harness.bot.store.get_doc(f"incident:{record['id']}")
    assert doc["job_id"] == "4242"


async def test_message_updated_without_buttons(harness: Harness) -> None:
    """After the cancel the message says who did it and when, and has no actions block."""
    where = await alert(harness)
    await press(harness, "cancel_salvage", "UALICE", where)
    await harness.bot.tasks.drain()
    final = harness.slack.to("/api/chat.update")[-1].params
    assert final["channel"] == where["channel"] and final["ts"] == where["ts"]
    blocks = json.loads(final["blocks"]) if isinstance(final["blocks"], str) else final["blocks"]
    assert all(b["type"] != "actions" for b in blocks)
    text = blocks_text(blocks)
    assert "Cancelled by <@UALICE> at 2026-11-30 16:00 UTC" in text
    assert "banked checkpoint: 20" in text


async def test_finished_job_is_not_cancelled(harness: Harness) -> None:
    """A job that ended between the DM and the click is reported, not cancelled."""
    where = await alert(harness)
    done = detail(job("4242", "rl-grpo-qwen-7b", state="COMPLETED", verdict="done"))
    harness.sweeper.make = lambda: sweep_result([done], at=harness.clock())
    await press(harness, "cancel_salvage", "UOPS", where)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert "already ended (COMPLETED)" in harness.slack.to("/api/chat.update")[-1].params["text"]


async def test_failed_cancel_releases_the_lock_and_restores_buttons(harness: Harness) -> None:
    """A scancel error puts the buttons back with the error, and a retry may run."""
    where = await alert(harness)

    def fail(cluster: str, job_id: str) -> None:
        raise CommandError("scancel: Invalid job id specified")

    harness.sweeper.on_cancel = fail
    await press(harness, "cancel_salvage", "UALICE", where)
    await harness.bot.tasks.drain()
    final = harness.slack.to("/api/chat.update")[-1].params
    assert '"actions"' in str(final["blocks"]) or "actions" in str(final["blocks"])
    assert "failed: scancel: Invalid job id specified" in final["text"]
    harness.sweeper.on_cancel = None
    await press(harness, "cancel_salvage", "UALICE", where)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_keep_running_closes_the_episode_for_the_owner(harness: Harness) -> None:
    """keep_running by the owner closes the episode and is audited; a stranger may not."""
    where = await alert(harness)
    hook = await press(harness, "keep_running", "UBOB", where)
    (reply,) = await harness.slack.wait_for(hook)
    assert "Only the job's owner or an operator" in reply.params["text"]
    await press(harness, "keep_running", "UALICE", where)
    await harness.bot.tasks.drain()
    doc = await harness.bot.store.get_doc("episode:alpha:4242")
    assert doc["state"] == "closed" and doc["closed_by"] == "UALICE"
    assert "Kept running by <@UALICE>" in harness.slack.to("/api/chat.update")[-1].params["text"]
    assert harness.sweeper.cancels == []
    assert await audit(harness) == [("UBOB", "refused"), ("UALICE", "kept running")]


async def test_malformed_value_runs_nothing(harness: Harness) -> None:
    """A button value that is not cluster:id is refused and audited without any sweep."""
    _, hook = await harness.press("cancel_salvage", "alpha:1;rm -rf /", user="UOPS")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no valid job reference" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert harness.sweeper.sweeps == 0 and harness.sweeper.cancels == []
    assert await audit(harness) == [("UOPS", "rejected")]


async def test_a_no_kill_instruction_set_after_the_alert_refuses_its_cancel_button(
        slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock) -> None:
    """The alert went out with a Cancel button; ``no_kill`` was set since (the config is read
    at each press). Pressing the old button cancels nothing: the rule now gates a
    recommendation, not an action (seed; CONTRACT: no cancel with ``no_kill = true``)."""
    configs = {"now": sweeper.conf}
    source = ConfigSource(lambda: configs["now"])
    async with running_bot(slack, store, sweeper, clock, config=source) as harness:
        where = await alert(harness)
        assert "cancel_salvage" in json.dumps(where["blocks"])
        conf = sweeper.conf
        configs["now"] = conf.model_copy(
            update={"slack": conf.slack.model_copy(update={"no_kill": True})})
        source.load()
        hook = await press(harness, "cancel_salvage", "UALICE", where)
        (reply,) = await harness.slack.wait_for(hook)
        await harness.bot.tasks.drain()
        assert harness.sweeper.cancels == []
        assert reply.params["response_type"] == "ephemeral"
        assert "not cancelled from Slack: no_kill is set" in reply.params["text"]
        assert await audit(harness) == [("UALICE", "refused")]
        assert incident_files(harness) == []


@pytest.mark.parametrize("flag", ["ablation-exempt", "no-kill"])
async def test_a_run_that_reads_exempt_at_the_press_is_not_cancelled(
        harness: Harness, flag: str) -> None:
    """The run was alerted as an ordinary collapse; by the press its log reads as a
    spike-mitigation ablation (or carries a no-kill instruction): never auto-cancelled, the
    fresh read at the press decides."""
    where = await alert(harness)
    harness.sweeper.make = lambda: sweep_result([collapsing(flags=(flag,))], at=harness.clock())
    hook = await press(harness, "cancel_salvage", "UOPS", where)
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert f"not cancelled from Slack: the run is {flag}" in reply.params["text"]
    assert await audit(harness) == [("UOPS", "refused")]


@pytest.mark.parametrize("settled_by", ["keep_running", "snooze", "acknowledge"])
async def test_a_cancel_press_on_a_settled_alert_cancels_nothing(
        harness: Harness, settled_by: str) -> None:
    """The owner kept the run (or snoozed, or acknowledged); the message lost its buttons. A
    cancel payload for that message afterwards (a stale client, a replay within Slack's
    5-minute window) is refused and audited: the settled alert stays settled."""
    where = await alert(harness)
    await press(harness, settled_by, "UALICE", where)
    await harness.bot.tasks.drain()
    hook = await press(harness, "cancel_salvage", "UALICE", where)
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert reply.params["response_type"] == "ephemeral"
    assert "already settled" in reply.params["text"]
    assert (await audit(harness))[-1] == ("UALICE", "rejected")
    assert incident_files(harness) == []
    doc = await harness.bot.store.get_doc("episode:alpha:4242")
    assert doc["state"] == "closed" and doc["action"] == settled_by


async def test_a_press_on_a_replaced_alert_cancels_nothing(harness: Harness) -> None:
    """The episode was kept running, the run recovered and collapsed again and a new alert
    went out: the old message's cancel (its buttons gone, the payload replayed) is not the new
    alert's."""
    old = await alert(harness)
    await press(harness, "keep_running", "UALICE", old)
    await harness.bot.tasks.drain()
    # no sweep found it collapsing for longer than the kept collapse's window: a new one
    harness.clock.advance(
        60 * (CONTINUED_SWEEPS * harness.sweeper.conf.slack.sweep_every_minutes + 1))
    harness.sweeper.make = lambda: sweep_result(
        [collapsing().model_copy(update={"collapse_step": 40})], at=harness.clock())
    new = await alert(harness)
    assert new["ts"] != old["ts"]
    hook = await press(harness, "cancel_salvage", "UALICE", old)
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert "A newer alert about alpha:4242 replaced this one" in reply.params["text"]
    await press(harness, "cancel_salvage", "UALICE", new)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_a_forged_cancel_on_a_recommendation_cancels_nothing(
        slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock) -> None:
    """The alert went out as a recommendation (``no_kill``: no Cancel button) and no_kill was
    lifted since; a cancel payload forged for that message is still refused: the alert the
    owner saw offered no cancel."""
    conf = sweeper.conf
    configs = {"now": conf.model_copy(
        update={"slack": conf.slack.model_copy(update={"no_kill": True})})}
    source = ConfigSource(lambda: configs["now"])
    async with running_bot(slack, store, sweeper, clock, config=source) as harness:
        where = await alert(harness)
        assert "cancel_salvage" not in json.dumps(where["blocks"])
        configs["now"] = conf
        source.load()
        hook = await press(harness, "cancel_salvage", "UALICE", where)
        (reply,) = await harness.slack.wait_for(hook)
        await harness.bot.tasks.drain()
        assert harness.sweeper.cancels == []
        assert "offered no cancel" in reply.params["text"]
        assert await audit(harness) == [("UALICE", "refused")]


async def test_failed_cancel_shows_no_internal_address_or_key_path(harness: Harness) -> None:
    """The cancel's error is shown where the alert is, so its SSH detail (host:port, the key's
    path) is cut from that text; the reason stays readable."""
    where = await alert(harness)

    def fail(cluster: str, job_id: str) -> None:
        raise CommandError("ssh to login01.hpc.corp.example:2222 as ops failed: cannot read "
                           "key /etc/jobtables/keys/id_ed25519: Permission denied")

    harness.sweeper.on_cancel = fail
    await press(harness, "cancel_salvage", "UALICE", where)
    await harness.bot.tasks.drain()
    text = harness.slack.to("/api/chat.update")[-1].params["text"]
    assert "failed: ssh to" in text and "Permission denied" in text
    for secret in ("login01.hpc", "2222", "/etc/jobtables", "id_ed25519"):
        assert secret not in text, (secret, text)
