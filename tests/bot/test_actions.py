"""Collapse buttons over HTTP: who may cancel, exactly once, salvage before cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.alerts import collapse_blocks
from probes.errors import CommandError
from tests.bot.builders import blocks_text, collapsing, detail, job, sweep_result
from tests.bot.conftest import Harness

BLOCKS = collapse_blocks(collapsing(), can_cancel=True)


def incident_files(harness: Harness) -> list[Path]:
    return sorted(Path(harness.sweeper.conf.slack.incident_dir).rglob("*.json"))


async def test_stranger_is_refused_and_audited(harness: Harness) -> None:
    """A user who is neither operator nor owner gets an ephemeral refusal; it is audited."""
    status, hook = await harness.press("cancel_salvage", "alpha:4242", user="UEVIL",
                                       blocks=BLOCKS)
    assert status == 200
    (reply,) = await harness.slack.wait_for(hook)
    assert reply.params["response_type"] == "ephemeral"
    assert "Only the job's owner or an operator" in reply.params["text"]
    assert harness.sweeper.cancels == []
    assert not harness.slack.to("/api/chat.update")
    (entry,) = await harness.bot.store.audit_entries()
    assert entry["actor"] == "UEVIL" and entry["outcome"] == "refused"
    assert entry["job_id"] == "4242"


async def test_double_click_cancels_once(harness: Harness) -> None:
    """Two presses racing (owner and operator) cause exactly one cancel; the other is told."""
    results = await asyncio.gather(
        harness.press("cancel_salvage", "alpha:4242", user="UALICE", blocks=BLOCKS),
        harness.press("cancel_salvage", "alpha:4242", user="UOPS", blocks=BLOCKS),
    )
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]
    replies = [c for _, hook in results for c in harness.slack.to(hook)]
    assert len(replies) == 1 and "already" in replies[0].params["text"]
    outcomes = [e["outcome"] for e in await harness.bot.store.audit_entries()]
    assert sorted(outcomes) == ["cancelled", "duplicate"]
    assert len(incident_files(harness)) == 1


async def test_salvage_is_written_before_the_cancel(harness: Harness) -> None:
    """At the moment the cancel is sent, the incident file already holds the evidence."""
    seen: list[dict[str, object]] = []

    def check(cluster: str, job_id: str) -> None:
        (path,) = incident_files(harness)
        seen.append(json.loads(path.read_text()))

    harness.sweeper.on_cancel = check
    await harness.press("cancel_salvage", "alpha:4242", user="UALICE", blocks=BLOCKS)
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
    await harness.press("cancel_salvage", "alpha:4242", user="UALICE", blocks=BLOCKS)
    await harness.bot.tasks.drain()
    final = harness.slack.to("/api/chat.update")[-1].params
    assert all(b["type"] != "actions" for b in final["blocks"])
    text = blocks_text(final["blocks"])
    assert "Cancelled by <@UALICE> at 2026-11-30 16:00 UTC" in text
    assert "banked checkpoint: 20" in text


async def test_finished_job_is_not_cancelled(harness: Harness) -> None:
    """A job that ended between the DM and the click is reported, not cancelled."""
    done = detail(job("4242", "rl-grpo-qwen-7b", state="COMPLETED", verdict="done"))
    harness.sweeper.make = lambda: sweep_result([done], at=harness.clock())
    await harness.press("cancel_salvage", "alpha:4242", user="UOPS", blocks=BLOCKS)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert "already ended (COMPLETED)" in harness.slack.to("/api/chat.update")[-1].params["text"]


async def test_failed_cancel_releases_the_lock_and_restores_buttons(harness: Harness) -> None:
    """A scancel error puts the buttons back with the error, and a retry may run."""

    def fail(cluster: str, job_id: str) -> None:
        raise CommandError("scancel: Invalid job id specified")

    harness.sweeper.on_cancel = fail
    await harness.press("cancel_salvage", "alpha:4242", user="UALICE", blocks=BLOCKS)
    await harness.bot.tasks.drain()
    final = harness.slack.to("/api/chat.update")[-1].params
    assert any(b["type"] == "actions" for b in final["blocks"])
    assert "failed: scancel: Invalid job id specified" in final["text"]
    harness.sweeper.on_cancel = None
    await harness.press("cancel_salvage", "alpha:4242", user="UALICE", blocks=BLOCKS)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_keep_running_closes_the_episode_for_anyone(harness: Harness) -> None:
    """keep_running is not destructive: it closes the episode and is audited."""
    await harness.press("keep_running", "alpha:4242", user="UBOB", blocks=BLOCKS)
    await harness.bot.tasks.drain()
    doc = await harness.bot.store.get_doc("episode:alpha:4242")
    assert doc["state"] == "closed" and doc["closed_by"] == "UBOB"
    assert "Kept running by <@UBOB>" in harness.slack.to("/api/chat.update")[-1].params["text"]
    assert harness.sweeper.cancels == []


async def test_malformed_value_runs_nothing(harness: Harness) -> None:
    """A button value that is not cluster:id is refused without any sweep."""
    _, hook = await harness.press("cancel_salvage", "alpha:1;rm -rf /", user="UOPS")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no valid job reference" in reply.params["text"]
    assert harness.sweeper.sweeps == 0 and harness.sweeper.cancels == []
