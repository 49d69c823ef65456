"""A cancel killed at every await of its flow, then a restart: reconciled exactly once.

The crash is the task being cancelled (what SIGTERM during a rollout does to the bot's tasks)
right after one step of the flow completed: a Redis write, a Slack update, the scancel itself.
The restart is a new bot on the same Redis; its start-up reconciliation re-reads the job
through the (fake) probe, then completes or releases the lock and updates the message. A cancel
that took effect is never sent twice; one that did not can be pressed again and runs once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.reconcile import RECONCILE_AFTER_S
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

LOCK = "alpha:4242:cancel_salvage"


class Crash:
    """Cancels the running task right after the ``nth`` call of ``method`` has completed."""

    def __init__(self, method: str, nth: int = 1) -> None:
        self.method, self.nth, self.seen = method, nth, 0

    def wrap(self, owner: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        async def crashing(*args: Any, **kwargs: Any) -> Any:
            result = await real(*args, **kwargs)
            self.seen += 1
            if self.seen == self.nth:
                raise asyncio.CancelledError(f"crash after {name} #{self.nth}")
            return result

        setattr(owner, name, crashing)


def cancellable_sweeper(prefix: str, tmp_path: Path, clock: FakeClock) -> FakeSweeper:
    """A fake cluster where a sent cancel really ends the job (as scancel does)."""
    state: dict[str, bool] = {"cancelled": False}
    ended = detail(job("4242", "rl-grpo-qwen-7b", state="CANCELLED", verdict="done"))
    sweeper = FakeSweeper(
        make=lambda: sweep_result([ended if state["cancelled"] else collapsing()], at=clock()),
        conf=make_config(prefix, tmp_path))
    sweeper.on_cancel = lambda c, j: state.update(cancelled=True)
    return sweeper


# (object, method, nth call) after which the crash hits; whether the cancel took effect.
POINTS = [
    ("store", "acquire", 1, False),
    ("client", "chat_update", 1, False),      # "salvaging evidence first…" shown
    ("store", "put_doc", 1, False),           # incident document stored (file written)
    ("store", "update_lock", 1, False),       # lock says "salvaged"
    ("store", "audit", 1, False),             # intent audited
    ("store", "update_lock", 2, False),       # lock says "cancelling"
    ("sweeper", "cancel", 1, True),           # scancel sent and took effect
    ("store", "audit", 2, True),              # outcome audited
    ("store", "put_doc", 2, True),            # episode closed
    ("client", "chat_update", 2, True),       # final message shown
]


@pytest.mark.parametrize("point", POINTS, ids=[f"{m}#{n}" for _, m, n, _ in POINTS])
async def test_cancel_crash_then_restart_is_reconciled(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
    point: tuple[str, str, int, bool],
) -> None:
    """Killed right after ``point``; a restarted bot completes or releases, exactly once."""
    target, method, nth, took_effect = point
    clock = FakeClock()
    sweeper = cancellable_sweeper(prefix, tmp_path, clock)
    async with running_bot(slack, store, sweeper, clock) as first:
        assert await make_scheduler(first.bot).tick()
        owners = {"store": first.bot.store, "client": first.bot.client, "sweeper": sweeper}
        Crash(method, nth).wrap(owners[target], method)
        await first.press_alert("cancel_salvage", user="UALICE")
        await first.bot.tasks.drain()
    assert sweeper.cancels == ([("alpha", "4242")] if took_effect else [])
    crashed = await store.holder(LOCK)
    assert crashed is not None and crashed["status"] != "done", "the crash left it half-done"
    clock.advance(RECONCILE_AFTER_S + 1)
    restarted_store = make_store(prefix)
    try:
        async with running_bot(slack, restarted_store, sweeper, clock) as second:
            updates_before = len(slack.to("/api/chat.update"))
            settled = await second.bot.actions.reconcile()
            holder = await restarted_store.holder(LOCK)
            audit = [e["outcome"] for e in await restarted_store.audit_entries()]
            final = slack.to("/api/chat.update")[-1].params if slack.to("/api/chat.update") \
                else {}
            if not took_effect:
                await second.press_alert("cancel_salvage", user="UALICE")
                await second.bot.tasks.drain()
            after = await restarted_store.holder(LOCK)
            episode = await restarted_store.get_doc("episode:alpha:4242")
    finally:
        await restarted_store.aclose()
    assert settled == [LOCK]
    assert len(slack.to("/api/chat.update")) > updates_before
    if took_effect:
        assert holder is not None and holder["status"] == "done"
        assert audit[-1] == "cancelled (reconciled)"
        assert "settled after a restart" in final["text"] and "CANCELLED" in final["text"]
        assert sweeper.cancels == [("alpha", "4242")]
    else:
        assert holder is None, "the interrupted lock was released"
        assert "cancel interrupted; released" in audit
        assert "interrupted before it took effect" in final["text"]
        assert "cancel_salvage" in str(final["blocks"]), "the buttons are back"
        assert sweeper.cancels == [("alpha", "4242")], "pressed again: cancelled once"
        assert after is not None and after["status"] == "done"
    if "cancel requested" in audit:
        assert audit.index("cancel requested") < len(audit) - 1
    assert episode is not None and episode["state"] == "closed"


async def test_a_fresh_lock_of_a_live_replica_is_left_alone(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A lock younger than RECONCILE_AFTER_S may belong to a replica still working on it."""
    clock = FakeClock()
    sweeper = cancellable_sweeper(prefix, tmp_path, clock)
    await store.acquire(LOCK, {"user": "UALICE", "at": clock().isoformat(),
                               "status": "cancelling"}, ttl_s=3600)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.actions.reconcile() == []
    assert (await store.holder(LOCK) or {})["status"] == "cancelling"
    assert sweeper.sweeps == 0


class HangingCancel(FakeSweeper):
    """A cluster whose scancel never returns (a wedged login node during a rollout)."""

    entered: asyncio.Event | None = None

    async def cancel(self, cluster: str, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        self.cancels.append((cluster, job_id))
        if self.entered is not None:
            self.entered.set()
        await asyncio.Event().wait()


async def test_sigterm_during_a_cancel_then_restart(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """Shutdown (what SIGTERM does: cancel the bot's tasks) while scancel hangs: the lock says
    "cancelling", and the restarted bot, finding the job still running, releases it and puts
    the buttons back."""
    clock = FakeClock()
    sweeper = HangingCancel(make=lambda: sweep_result([collapsing()], at=clock()),
                            conf=make_config(prefix, tmp_path))
    sweeper.entered = asyncio.Event()
    async with running_bot(slack, store, sweeper, clock) as first:
        assert await make_scheduler(first.bot).tick()
        await first.press_alert("cancel_salvage", user="UALICE")
        async with asyncio.timeout(20):
            await sweeper.entered.wait()
        await first.bot.tasks.aclose()
    assert (await store.holder(LOCK) or {})["status"] == "cancelling"
    clock.advance(RECONCILE_AFTER_S + 1)
    async with running_bot(slack, store, sweeper, clock) as second:
        assert await second.bot.actions.reconcile() == [LOCK]
    assert await store.holder(LOCK) is None
    final = slack.to("/api/chat.update")[-1].params
    assert "interrupted before it took effect" in final["text"]
    outcomes = [e["outcome"] for e in await store.audit_entries()]
    assert outcomes == ["cancel requested", "cancel interrupted; released"]


async def test_an_interrupted_cancel_waits_while_its_cluster_cannot_be_read(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path) -> None:
    """A restart finds a half-done cancel while the cluster is unreachable: the job is not
    'no longer reported' (it was not read), so the lock, the episode and the buttons stay;
    once the cluster answers, the cancel is reconciled (it was settled as ended, the episode
    closed and the buttons removed while the job ran on)."""
    clock = FakeClock()
    sweeper = cancellable_sweeper(prefix, tmp_path, clock)
    async with running_bot(slack, store, sweeper, clock) as first:
        assert await make_scheduler(first.bot).tick()
        Crash("update_lock", 2).wrap(first.bot.store, "update_lock")
        await first.press_alert("cancel_salvage", user="UALICE")
        await first.bot.tasks.drain()
    assert sweeper.cancels == []
    clock.advance(RECONCILE_AFTER_S + 1)
    healthy = sweeper.make
    sweeper.make = lambda: sweep_result([], at=clock(), clusters=(), unreachable=("alpha",))
    restarted_store = make_store(prefix)
    try:
        async with running_bot(slack, restarted_store, sweeper, clock) as second:
            updates = len(slack.to("/api/chat.update"))
            assert await second.bot.actions.reconcile() == []
            held = await restarted_store.holder(LOCK)
            episode = await restarted_store.get_doc("episode:alpha:4242")
            assert held is not None and held["status"] != "done"
            assert episode is not None and episode["state"] != "closed"
            assert len(slack.to("/api/chat.update")) == updates
            sweeper.make = healthy
            assert await second.bot.actions.reconcile() == [LOCK]
    finally:
        await restarted_store.aclose()
    audit = [e["outcome"] for e in await store.audit_entries()]
    assert "cancel interrupted; released" in audit
