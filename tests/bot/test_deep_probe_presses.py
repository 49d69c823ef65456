"""One deep probe in flight per job, however many messages carry its button (fake Slack).

The Deep-probe button only reads, so anyone who sees it may press it (CONTRACT §7, README
"Who may press"); but it starts remote reads (a log tail, checkpoints, rollouts over SSH or the
Kubernetes API). Its lock was per message: the collapse DM, the offer and every ``/job``
answer carry the job's button, and a press on each (or a crafted press naming a new message
each time) ran a probe of its own, all at once. Now a probe of a job runs once at a time across
messages and replicas (and, with Redis down, within each replica); a press meanwhile is told it
is already running. Once it is done, the next press probes again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot import deep_probe
from bot.config import Config, DeepProbeSection
from bot.scheduled import make_scheduler
from bot.sweep_result import SweepResult
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack


class HeldProbe:
    """Stands in for the remote read: records each probe and holds it until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, config: Config, cluster: str | None, job_id: str) -> object:
        self.calls.append(f"{cluster}:{job_id}")
        await self.release.wait()
        raise deep_probe.UsageError("stopped by the test")


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldProbe:
    probe = HeldProbe()
    monkeypatch.setattr(deep_probe, "run_deep_probe", probe)
    return probe


def row(ref: str) -> list[dict[str, object]]:
    """The blocks of a ``/job`` answer whose row carries the button."""
    return [{"type": "actions", "block_id": "deep_probe_row", "elements": [
        {"type": "button", "action_id": "deep_probe", "value": ref,
         "text": {"type": "plain_text", "text": "Deep-probe"}}]}]


async def press_on_answer(h: Harness, ref: str, user: str, ts: str) -> str:
    """A press on someone's ``/job`` answer (a message the bot binds no episode to)."""
    _, hook = await h.press("deep_probe", ref, user=user, blocks=row(ref), channel="C0SWEEP",
                            ts=ts)
    return hook


async def test_presses_on_other_messages_while_a_probe_runs_probe_once(
        harness: Harness, held: HeldProbe) -> None:
    """The alert's button pressed, then the same job's button on two ``/job`` answers: one
    probe; each later press is told it is already running and audited ``duplicate``. Once it
    is done, a press probes again (the button stays anyone's)."""
    assert await make_scheduler(harness.bot).tick()
    first = await harness.press_alert("deep_probe", user="UALICE")
    later = [await press_on_answer(harness, "alpha:4242", user, ts)
             for user, ts in (("UBOB", "1700000001.000001"), ("UCAROL", "1700000002.000002"))]
    try:
        for hook in later:
            (reply,) = await harness.slack.wait_for(hook, within=5)
            assert "already running" in reply.params["text"], reply.params["text"]
    finally:
        held.release.set()
    await harness.bot.tasks.drain()
    assert held.calls == ["alpha:4242"]
    (failed,) = harness.slack.to(first)
    assert "stopped by the test" in failed.params["text"]
    audit = [(e["actor"], e["outcome"]) for e in await harness.bot.store.audit_entries()]
    assert ("UBOB", "duplicate") in audit and ("UCAROL", "duplicate") in audit
    again = await press_on_answer(harness, "alpha:4242", "UBOB", "1700000003.000003")
    await harness.bot.tasks.drain()
    assert held.calls == ["alpha:4242", "alpha:4242"]
    assert "stopped by the test" in harness.slack.to(again)[0].params["text"]


async def test_another_job_s_probe_is_not_held_up(harness: Harness, held: HeldProbe) -> None:
    """The bound is per job: a press for another job runs while the first is running."""
    first = await press_on_answer(harness, "alpha:4242", "UALICE", "1700000001.000001")
    other = await press_on_answer(harness, "alpha:4300", "UBOB", "1700000002.000002")
    for _ in range(50):
        if len(held.calls) == 2:
            break
        await asyncio.sleep(0.02)
    held.release.set()
    await harness.bot.tasks.drain()
    assert sorted(held.calls) == ["alpha:4242", "alpha:4300"]
    for hook in (first, other):
        assert "stopped by the test" in harness.slack.to(hook)[0].params["text"]


async def test_with_redis_down_a_replica_still_probes_a_job_once_at_a_time(
        slack: FakeSlack, tmp_path: Path, held: HeldProbe) -> None:
    """Redis unreachable: the presses are not checked across replicas, but one replica runs
    one probe of a job at a time (before: every press ran one)."""
    clock = FakeClock()
    down = make_store("jt-test-down:", url="redis://127.0.0.1:1/0")  # nothing listens
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock()),
                          conf=make_config("jt-test-down:", tmp_path))
    try:
        async with running_bot(slack, down, sweeper, clock) as h:
            await press_on_answer(h, "alpha:4242", "UALICE", "1700000001.000001")
            second = await press_on_answer(h, "alpha:4242", "UBOB", "1700000002.000002")
            try:
                (reply,) = await slack.wait_for(second, within=5)
            finally:
                held.release.set()
            await h.bot.tasks.drain()
    finally:
        await down.aclose()
    assert "already running" in reply.params["text"]
    assert held.calls == ["alpha:4242"]


def auto(h: Harness) -> tuple[Config, SweepResult]:
    """A config probing flagged runs by itself, and a sweep with one flagged run alpha:6000."""
    config = h.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})
    flagged = detail(job("6000", "rl-grid", flags=("deep-probe",)))
    return config, sweep_result([flagged], at=h.clock())


async def test_a_press_while_the_auto_probe_runs_reads_nothing(
        harness: Harness, held: HeldProbe) -> None:
    """The scheduler's auto-probe of a flagged run under way: a press of its button is told
    it is already running (before: a second probe beside it)."""
    config, result = auto(harness)
    sweep = asyncio.create_task(deep_probe.after_sweep(harness.bot, result, config))
    for _ in range(50):
        if held.calls:
            break
        await asyncio.sleep(0.02)
    hook = await press_on_answer(harness, "alpha:6000", "UBOB", "1700000001.000001")
    try:
        (reply,) = await harness.slack.wait_for(hook, within=5)
    finally:
        held.release.set()
        await sweep
    await harness.bot.tasks.drain()
    assert "already running" in reply.params["text"]
    assert held.calls == ["alpha:6000"]


async def test_the_auto_probe_leaves_a_run_being_pressed_to_the_next_sweep(
        harness: Harness, held: HeldProbe) -> None:
    """A press probing the run when the sweep would auto-probe it: the sweep reads nothing
    (before: a second probe), and a later sweep probes it once the press is done."""
    config, result = auto(harness)
    pressed = await press_on_answer(harness, "alpha:6000", "UBOB", "1700000001.000001")
    for _ in range(50):
        if held.calls:
            break
        await asyncio.sleep(0.02)
    try:
        assert await asyncio.wait_for(
            deep_probe.after_sweep(harness.bot, result, config), 5) == []
        assert held.calls == ["alpha:6000"]
    finally:
        held.release.set()
    await harness.bot.tasks.drain()
    assert harness.slack.to(pressed)
    await deep_probe.after_sweep(harness.bot, result, config)
    assert held.calls == ["alpha:6000", "alpha:6000"]
