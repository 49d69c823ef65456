"""What a sweep keeps in its state store between runs (Redis in the bot; the CLI has none).

Policy: a :class:`bot.sweep.Sweeper` given a state makes one :class:`StateKeeper`, which
merges each cluster's histories in one pipelined round trip (only the points changed since
this process's last merge are sent), resumes SLURM logs from their stored cursors and fold
carry and saves the new ones beside the judging, and shares a backend's memory of the last
sweep (``RememberingProbe``) with the other replicas. The store failing never fails a sweep:
each failure is a ``degraded`` note (:func:`store_note`) and the sweep answers from its live
read. The Sweeper imports this module only when given a state, so a CLI sweep never does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from bot.logs import get_logger
from bot.sweep_judging import next_memory
from bot.sweep_seams import RememberingProbe, ResumingProbe, SweepState
from probes.base import ClusterProbe
from probes.models import ClusterFacts, MetricPoint

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState
    from report.memory import SweepMemory
    from report.models import JobDetail, Report


log = get_logger(__name__)


class StateKeeper:
    """One Sweeper's use of its state store, and what this process remembers of it."""

    def __init__(self, state: SweepState, running: set[asyncio.Task[None]]) -> None:
        self._state = state
        self._log_states: dict[str, dict[str, LogState]] = {}
        """Per cluster, the log states this process last saved: a warm sweep starts from them
        and reads Redis only when it has none (a stale copy is still a consistent cursor and
        carry pair: the collector then sends the bytes since that cursor)."""
        self._saves: list[asyncio.Task[None]] = []
        """This sweep's log-state saves, running beside its merge and judging."""
        self._running = running
        """Every save not yet done (the Sweeper's set: the loop keeps only weak references to
        tasks)."""
        self._merged: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
        """Per job, the points its stored history got at the last merge (see ``unmerged``)."""

    def begin_sweep(self) -> list[asyncio.Task[None]]:
        """A new list for the log-state saves of the sweep starting (it waits for them)."""
        saves = self._saves = []
        return saves

    def forget_logs(self, cluster: str) -> None:
        """A cluster's entry changed (a new probe): its next sweep starts again from Redis."""
        self._log_states.pop(cluster, None)

    async def save_memory(self, report: Report, details: Mapping[tuple[str, str], JobDetail],
                          facts: Sequence[ClusterFacts], memory: SweepMemory | None,
                          ) -> str | None:
        """The sweep memory after this sweep saved; a degraded note when it could not be."""
        try:
            remembered = await asyncio.to_thread(next_memory, report, details, facts, memory)
            await self._state.save_memory(remembered)
        except Exception as exc:  # same: losing memory degrades, never fails, a sweep
            return store_note("history not saved", exc)
        return None

    async def resume(self, name: str, probe: ClusterProbe, notes: list[str]) -> ClusterFacts:
        """One cluster's sweep from its stored log states, and the new ones saved."""
        prior = self._log_states.get(name)
        if prior is None:  # this process's first sweep of the cluster (or after a failed save)
            try:
                prior = await self._state.load_log_states(name)
            except Exception as exc:  # the store's own errors: read every log cold
                notes.append(store_note("logs read whole, no stored cursors", exc))
                return await probe.collect()
        facts, states = await cast("ResumingProbe", probe).collect_since(prior)
        if facts.status != "ok":
            return facts  # nothing learned: the stored states stay as they are
        present = {job.record.job_id for job in facts.jobs}
        gone = [k for k in prior if k not in present]
        changed = {k: s for k, s in states.items() if prior.get(k) != s}
        self._log_states[name] = {**{k: s for k, s in prior.items() if k in present}, **states}
        unchanged = [k for k in self._log_states[name] if k not in changed]
        # Saved beside the merge and judging, which do not read it; the sweep waits for it
        # before it answers (a Redis round trip less on its critical path). The unchanged
        # jobs' texts are renewed: a job quiet for the store's expiry keeps its state.
        task = asyncio.get_running_loop().create_task(
            self._save(name, changed, gone, unchanged, notes))
        self._saves.append(task)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return facts

    async def _save(self, name: str, changed: Mapping[str, LogState], gone: Sequence[str],
                    unchanged: Sequence[str], notes: list[str]) -> None:
        try:
            await self._state.save_log_states(name, changed, drop=gone, renew=unchanged)
        except Exception as exc:  # the next sweep then resumes from Redis's older states
            self._log_states.pop(name, None)
            notes.append(store_note("log cursors not saved", exc))

    async def recall(self, name: str, probe: RememberingProbe) -> None:
        """The cluster's latest sweep's memory, whichever process made it, into ``probe``
        (the store failing: the probe keeps its own; the save after the sweep says so)."""
        try:
            memory = await self._state.load_probe_memory(name)
        except Exception as exc:  # the store's own errors: this process's memory stands
            log.warning("probe memory not read", cluster=name, error=str(exc))
            return
        if memory is not None:
            probe.recall(memory)

    async def keep_memory(self, name: str, probe: RememberingProbe, notes: list[str]) -> None:
        try:
            # A cancel another process noted while this sweep ran (:meth:`_note_cancel`) is
            # not in the memory this sweep recalled: written over, its job would read as
            # vanished (FAILED, a job-end DM) at the next sweep.
            probe.take_cancels(await self._state.load_probe_memory(name))
            await self._state.save_probe_memory(name, probe.remembered())
        except Exception as exc:  # the next sweep, here, still has it in memory
            notes.append(store_note("vanished jobs tracked by this process only", exc))

    async def histories(
        self, facts: Sequence[ClusterFacts], *, whole: bool = True,
    ) -> tuple[dict[tuple[str, str], Sequence[MetricPoint]] | None, str | None]:
        """Each job's stored history with this sweep's points merged in (``whole``: a sweep
        of every job, so the jobs not in it are forgotten here)."""
        histories: dict[tuple[str, str], Sequence[MetricPoint]] = {}
        try:
            for cluster in facts:  # one pipelined round trip per cluster, not one per job
                # A cut tail's bar-less HF dicts carry their order only (steps_unanchored):
                # a later read counts them from 1 again, so merged by step they would replace
                # the window's points with newer ones. Never merged: judged on their own points.
                points = {job.record.job_id: job.summary.points if job.summary else ()
                          for job in cluster.jobs
                          if not (job.summary and job.summary.steps_unanchored)}
                if not points:
                    continue
                if whole:  # forget the jobs that left the sweep
                    self._merged = {k: v for k, v in self._merged.items()
                                    if k[0] != cluster.name or k[1] in points}
                batch = {j: self.unmerged(cluster.name, j, p) for j, p in points.items()}
                # The log's newest step, not the changed points' (a rewound run's is below the
                # window's: its later steps go; an older step's point that changed is none).
                newest = {j: max(p.step for p in ps) for j, ps in points.items() if ps}
                # When the read began: an older read than a window's changes nothing (a
                # /job that read before another replica's sweep and merged after it).
                merged = await self._state.merge_histories(cluster.name, batch, newest,
                                                           read_at=cluster.collected_at)
                for j, window in merged.items():
                    histories[cluster.name, j] = window
                    self.remember(cluster.name, j, points[j], window)
        except Exception as exc:  # the store's errors: judge from the logs alone
            return None, store_note("no history", exc)
        return histories, None

    def unmerged(self, cluster: str, job_id: str,
                  points: Sequence[MetricPoint]) -> list[MetricPoint]:
        """The points not merged as they are at this job's last merge (a warm sweep's log
        gives the same recent points again: sending them all cost O(points) commands). A point
        is known by its fields' dict, compared in C: what pydantic's ``==`` compares on these
        frozen, extra-free models, at a third of its cost (31 -> 10 ms a warm 256-job sweep)."""
        known = self._merged.get((cluster, job_id), {})
        return [p for p in points if known.get(p.step) != p.__dict__]

    def remember(self, cluster: str, job_id: str, points: Sequence[MetricPoint],
                  window: Sequence[MetricPoint]) -> None:
        """Note what this job's history now holds, unless Redis lost some of it (a flush, a
        failover without the latest writes): then the next merge sends every point again."""
        stored = {p.step for p in window}
        if all(p.step in stored for p in points):
            self._merged[cluster, job_id] = {p.step: p.__dict__ for p in points}
        else:
            self._merged.pop((cluster, job_id), None)

    async def memory(self) -> tuple[SweepMemory | None, str | None]:
        """(sweep memory, degraded note): the store's own errors degrade, never fail, an answer."""
        try:
            return await self._state.load_memory(), None
        except Exception as exc:
            return None, store_note("no history", exc)

    async def note_cancel(self, cluster: str, job_id: str) -> None:
        """The cancel goes into the cluster's shared probe memory: another process's next
        sweep does not take the job it deleted for vanished (best effort: the store failing
        leaves it to this process's memory)."""
        try:
            memory = await self._state.load_probe_memory(cluster)
            if isinstance(memory, dict):
                cancelled = [str(x) for x in memory.get("cancelled") or () if x != job_id]
                await self._state.save_probe_memory(
                    cluster, {**memory, "cancelled": [*cancelled, job_id]})
        except Exception as exc:
            log.warning("cancel not noted in the probe memory", cluster=cluster,
                        job_id=job_id, error=str(exc))


def store_note(what: str, exc: BaseException) -> str:
    """A sweep's degraded note when the state store (Redis) failed it. The note is shown in
    the channel, so it says what failed and what that means, never the error's own text (it
    names Redis's host:port, maybe a URL): that goes to the bot's log."""
    log.warning("state store failed; sweep degraded", what=what, error=str(exc))
    why = getattr(exc, "reason", None) or (  # bot.store.StoreUnavailable's
        "Redis is unreachable" if isinstance(exc, OSError) else "the state store failed")
    return (f"degraded: {what} ({why}: answers come from live sweeps without stored history;"
            " no sweep post is duplicated; details in the bot's log)")
