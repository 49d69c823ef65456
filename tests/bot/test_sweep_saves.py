"""A warm sweep saves its log states beside the merge and judging, on the real Redis: the save
is off the critical path, yet the sweep answers only once it is done, and a failed save is
still a note and a fresh load from the store next time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.config import Config
from bot.store import RedisStore
from bot.sweep import Sweeper
from probes.config import SlurmCluster
from probes.models import ClusterFacts, JobFacts, JobState, LogSummary, MetricPoint
from probes.slurm.cursors import LogState
from tests.bot.test_store_logs import log_state

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CLUSTER = SlurmCluster(name="alpha", host="h", known_hosts="/dev/null")


class ResumingProbe:
    """Two running SFT jobs with a point each; a new state for each per sweep."""

    def __init__(self, cluster: SlurmCluster, **_: Any) -> None:
        self.priors: list[Mapping[str, LogState]] = []

    def _facts(self) -> ClusterFacts:
        from probes.models import SchedulerRecord
        jobs = tuple(JobFacts(
            record=SchedulerRecord(cluster="alpha", job_id=k, name=f"sft-{k}", user="u",
                                   state=JobState.RUNNING, start_time=NOW),
            summary=LogSummary(line_count=1, points=(MetricPoint(step=1, values={"loss": 1.0}),)),
        ) for k in ("1", "2"))
        return ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW, jobs=jobs)

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        return self._facts()

    async def collect_since(self, prior: Mapping[str, LogState],
                            ) -> tuple[ClusterFacts, dict[str, LogState]]:
        self.priors.append(prior)
        n = len(self.priors)
        return self._facts(), {k: log_state(f"/logs/{k}.out", offset=100 * n) for k in "12"}

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        raise AssertionError("a sweep never cancels a job")

    async def aclose(self) -> None:
        return None


class GatedStore(RedisStore):
    """The real store; its log-state save waits until the sweep's merge has begun (a save
    awaited before the merge would wait forever), or fails when told."""

    merged: asyncio.Event
    fail = False
    saves: list[float]

    async def merge_histories(self, cluster: str,
                              batch: Mapping[str, Sequence[MetricPoint]],
                              newest: Mapping[str, int] | None = None, *,
                              read_at: datetime | None = None,
                              ) -> dict[str, list[MetricPoint]]:
        self.merged.set()
        return await super().merge_histories(cluster, batch, newest, read_at=read_at)

    async def save_log_states(self, cluster: str, states: Mapping[str, LogState], *,
                              drop: Sequence[str] = (), renew: Sequence[str] = ()) -> None:
        await asyncio.wait_for(self.merged.wait(), 10)
        if self.fail:
            raise ConnectionError("store went away")
        await super().save_log_states(cluster, states, drop=drop, renew=renew)
        self.saves.append(1.0)


def _gated(store: RedisStore) -> GatedStore:
    gated = GatedStore(store._r, prefix=store.prefix)
    gated.merged, gated.saves = asyncio.Event(), []
    return gated


async def test_the_save_runs_beside_the_merge_and_is_done_when_the_sweep_answers(
        store: RedisStore) -> None:
    gated = _gated(store)
    probes: list[ResumingProbe] = []

    def factory(cluster: SlurmCluster, **kw: Any) -> ResumingProbe:
        probes.append(ResumingProbe(cluster, **kw))
        return probes[-1]

    sweeper = Sweeper(lambda: Config(clusters=(CLUSTER,)), state=gated, clock=lambda: NOW,
                      probe_factory=factory)
    result = await sweeper.sweep()
    assert result.degraded is None and gated.saves == [1.0]
    stored = await store.load_log_states("alpha")
    assert {k: s.cursor.offset for k, s in stored.items()} == {"1": 100, "2": 100}
    gated.merged.clear()
    await sweeper.sweep()  # resumed from memory, saved again
    assert probes[0].priors[1].keys() == {"1", "2"} and gated.saves == [1.0, 1.0]
    stored = await store.load_log_states("alpha")
    assert {k: s.cursor.offset for k, s in stored.items()} == {"1": 200, "2": 200}


async def test_a_failed_save_is_a_note_and_the_next_sweep_loads_the_store(
        store: RedisStore) -> None:
    gated = _gated(store)
    gated.fail = True
    probe = ResumingProbe(CLUSTER)
    sweeper = Sweeper(lambda: Config(clusters=(CLUSTER,)), state=gated, clock=lambda: NOW,
                      probe_factory=lambda c, **kw: probe)
    result = await sweeper.sweep()
    assert result.degraded is not None and "log cursors not saved" in result.degraded
    assert "Redis is unreachable" in result.degraded and "store went away" not in result.degraded
    await store.save_log_states("alpha", {"1": log_state("/logs/1.out", offset=7)})
    gated.fail, gated.merged = False, asyncio.Event()
    await sweeper.sweep()  # what the store holds, not the states it could not save
    assert {k: s.cursor.offset for k, s in probe.priors[1].items()} == {"1": 7}
