"""A merge never moves a metric window backwards in time: a read older than the one the window
already holds (a ``/job`` on one replica whose read began before another replica's sweep, and
merged after it) leaves the window as it is, on the real Redis."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.config import Config
from bot.store import RedisStore
from bot.sweep import Sweeper
from probes.config import SlurmCluster
from probes.models import ClusterFacts, JobFacts, JobState, LogSummary, MetricPoint, SchedulerRecord
from tests.bot.conftest import make_store

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CLUSTER = SlurmCluster(name="alpha", host="h", known_hosts="/dev/null")


def points(last: int) -> tuple[MetricPoint, ...]:
    return tuple(MetricPoint(step=s, values={"loss": 2.0 - 0.01 * s, "grad_norm": 0.3})
                 for s in range(1, last + 1))


class LogAt:
    """One running SFT job whose log holds steps 1..``last`` when read at ``read_at``; a read
    can be held (``gate``) between reading and answering, as a slow SSH answer is."""

    def __init__(self, last: int, read_at: datetime, gate: asyncio.Event | None = None) -> None:
        self.last, self.read_at, self.gate = last, read_at, gate
        self.read = asyncio.Event()

    async def collect(self, *, offsets: Any = None) -> ClusterFacts:
        facts = ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=self.read_at,
                             jobs=(JobFacts(
                                 record=SchedulerRecord(cluster="alpha", job_id="7",
                                                        name="sft-llama", user="u",
                                                        state=JobState.RUNNING, start_time=T0),
                                 summary=LogSummary(line_count=self.last,
                                                    points=points(self.last))),))
        self.read.set()
        if self.gate is not None:
            await self.gate.wait()
        return facts

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        raise AssertionError("never cancels")

    async def aclose(self) -> None:
        return None


def sweeper(store: RedisStore, probe: LogAt) -> Sweeper:
    return Sweeper(lambda: Config(clusters=(CLUSTER,)), state=store,
                   clock=lambda: probe.read_at, probe_factory=lambda c, **kw: probe)


async def test_an_older_job_read_merged_late_keeps_the_newer_sweeps_steps(
        store: RedisStore) -> None:
    """Replica B's ``/job`` read the log at 12:00 (steps 1-30) and answered slowly; replica A
    swept at 12:00:30 (steps 1-31) and merged first. B's merge, whose newest step 30 is below
    the window's 31, was taken for a rewound run: step 31 was dropped from Redis, and from A's
    next answers, until A's sweep after next sent it again."""
    gate = asyncio.Event()
    old = LogAt(30, T0, gate)
    other = make_store(store.prefix)
    try:
        b = sweeper(other, old)
        job = asyncio.create_task(b.job("alpha", "7"))
        await old.read.wait()  # B has read its log, not merged yet
        a = sweeper(store, LogAt(31, T0 + timedelta(seconds=30)))
        swept = await a.sweep()
        assert [p.step for p in swept.details["alpha", "7"].history][-1] == 31
        gate.set()
        answer = await job
        stored = await store.load_history("alpha", "7")
        again = await a.sweep()
    finally:
        await other.aclose()
    assert [p.step for p in stored] == list(range(1, 32))
    assert [p.step for p in answer.details["alpha", "7"].history][-1] == 31
    assert [p.step for p in again.details["alpha", "7"].history][-1] == 31


async def test_an_older_read_on_the_same_replica_keeps_the_window(store: RedisStore) -> None:
    """The same process: its sweep merged a newer read, then its own older ``/job`` read
    merges (its window in memory must not take the older read's edits either)."""
    a = sweeper(store, LogAt(31, T0 + timedelta(seconds=30)))
    await a.sweep()
    answer = await sweeper(store, LogAt(30, T0)).job("alpha", "7")  # the same store
    assert [p.step for p in answer.details["alpha", "7"].history][-1] == 31
    assert [p.step for p in await store.load_history("alpha", "7")] == list(range(1, 32))


async def test_a_newer_read_that_went_back_is_still_a_rewind(store: RedisStore) -> None:
    """The order in time decides, not the step: a later read whose log went back (requeued,
    restarted from a checkpoint into a fresh log) still drops the old run's later steps."""
    await sweeper(store, LogAt(31, T0)).sweep()
    rewound = await sweeper(store, LogAt(24, T0 + timedelta(minutes=30))).sweep()
    assert [p.step for p in rewound.details["alpha", "7"].history][-1] == 24
    assert [p.step for p in await store.load_history("alpha", "7")] == list(range(1, 25))
