"""Review of e502067: an interrupted cancel is not settled on a cluster read in part.

e502067 (and 9fece0f for PyTorchJobs) keeps a Kubernetes cluster ``ok`` when only its JobSet
(or PyTorchJob) list fails, the runs of that kind missing from the report. The reconciler of
an interrupted cancel (``bot.reconcile``) took a job missing from an ``ok`` cluster for one no
longer running: the lock completed 'cancelled (reconciled)', the collapse episode closed and
the buttons removed, while the collapsed JobSet run, never cancelled, ran on with no alert
left. Missing from a cluster read in part, the job is not read: the lock, the episode and the
buttons stay until a pass reads the cluster whole, as for an unreachable cluster
(``test_crash.test_an_interrupted_cancel_waits_while_its_cluster_cannot_be_read``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bot.reconcile import RECONCILE_AFTER_S
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from tests.bot.builders import FakeClock, sweep_result
from tests.bot.conftest import make_store, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_crash import LOCK, Crash, cancellable_sweeper


def _jobsets_not_listed(clock: FakeClock) -> SweepResult:
    """alpha read in part: ok, its JobSet list failed, so the JobSet run is not in it."""
    base = sweep_result([], at=clock(), clusters=("alpha",))
    alpha = base.report.clusters[0].model_copy(
        update={"detail": "JobSets not listed: list jobsets: HTTP 500 Internal Server Error"})
    return dataclasses.replace(base, report=base.report.model_copy(
        update={"clusters": [alpha]}))


async def test_an_interrupted_cancel_waits_while_its_cluster_is_read_in_part(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path) -> None:
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
    sweeper.make = lambda: _jobsets_not_listed(clock)
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
            sweeper.make = healthy  # read whole: still running, the cancel is released
            assert await second.bot.actions.reconcile() == [LOCK]
    finally:
        await restarted_store.aclose()
    audit = [e["outcome"] for e in await store.audit_entries()]
    assert "cancel interrupted; released" in audit
    assert "cancelled (reconciled)" not in audit
