"""One sweep over every active cluster, shared by the CLI, the scheduler and slash commands.

Policy: the config is re-read at the start of every sweep (edits apply on the next one), from
the loader it was given (the bot's ``ConfigSource.load``); the Sweeper never hands a config
back out.
Clusters are probed concurrently, each under its own timeout, inside one ``TaskGroup``; a
cluster that fails or times out is reported ``unreachable`` with its reason and never hides
the others. A probe keeps its cluster's ``timeout_s`` itself and answers what it read by then
(a SLURM sweep past it is read in part, ``probes.slurm.partial``): the Sweeper's own bound is
that plus :func:`grace_s`, so its backstop never takes that answer away. Concurrent callers
share one in-flight sweep (single-flight), so fifty ``/jobs`` at once cost one probe per
cluster. History comes from a :class:`SweepState` (Redis in the
bot), merged for all of a cluster's jobs in one pipelined round trip; only the points that
changed since this process's last merge are sent (a warm log repeats its recent points); when
it fails the sweep still answers, marked ``degraded``. What a sweep answers is a
``bot.sweep_result.SweepResult``; what it is given (the state, the CLI's probe memory) and
what it asks of a probe beyond ``collect`` are named in ``bot.sweep_seams``.

With a state, a backend that can resume its logs (SLURM's ``collect_since``) is given each
running job's stored cursor and fold carry and reads only the bytes appended since (issue
12); the states come back and are saved, jobs gone from the sweep pruned, in one round trip
per cluster whatever its number of jobs. They are read from Redis at the process's first
sweep of a cluster (one more round trip) and kept in memory after. States that cannot be
loaded mean a cold sweep of that cluster (the note says so); when they cannot be saved, the
next sweep starts again from Redis's. The CLI has no state: its sweeps read cold.

While a sweep runs, no full garbage collection scans its objects (``bot.gcquiet``): at 5,000
jobs each one held the GIL, and so every Slack ack, for up to a second. Judging runs in a worker
thread, its modules imported first on the loop's (``bot.sweep_judging``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from bot.config import Config, ConfigError
from bot.gcquiet import QUIET_GC
from bot.logs import get_logger
from bot.sweep_judging import _import_judging, _judging_time, build_report
from bot.sweep_result import SweepResult
from bot.sweep_seams import ProbeMemory, RememberingProbe, SweepState
from probes.base import ClusterProbe
from probes.config import ClusterConfig, KubernetesCluster
from probes.errors import InvalidJobIdError, ProbeError
from probes.ids import validate_job_id
from probes.models import ClusterFacts, MetricPoint
from probes.registry import make_probe

if TYPE_CHECKING:
    from bot.sweep_state import StateKeeper
    from report.memory import SweepMemory


log = get_logger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


GRACE_S = (2.0, 10.0)
"""Bounds of the time a probe has past its ``timeout_s`` to answer what it read by then."""


def grace_s(timeout_s: float) -> float:
    """The Sweeper's time past a cluster's ``timeout_s``: a tenth of it, within GRACE_S."""
    return min(max(timeout_s / 10, GRACE_S[0]), GRACE_S[1])


KEPT_HISTORY = 32
"""Points an unflagged job's detail keeps once judged from a stored window (``/job`` reads
the whole window again, ``bot.slash_answers.whole_window``): about 200 KB a job less (issue 12)."""


class Sweeper:
    """Runs sweeps; keeps one probe per cluster so backends can remember between sweeps."""

    def __init__(
        self,
        load_config: Callable[[], Config],
        *,
        state: SweepState | None = None,
        clock: Callable[[], datetime] = _utcnow,
        probe_factory: Callable[..., ClusterProbe] = make_probe,
        keep_connections: bool = False,
        probe_memory: ProbeMemory | None = None,
    ) -> None:
        self._load_config = load_config
        self._keep = {"keep_connection": True} if keep_connections else {}
        """The bot's sweeps keep each SLURM cluster's SSH connection open between them
        (``probes.slurm.transport.KeptConnection``); a one-shot CLI sweep has no next one."""
        self._clock = clock
        self._probe_factory = probe_factory
        self._probes: dict[str, tuple[ClusterConfig, ClusterProbe]] = {}
        self._inflight: dict[tuple[str, ...], asyncio.Future[SweepResult]] = {}
        self._config: Config | None = None
        self._config_read: asyncio.Future[Config] | None = None
        """The config re-read under way in a worker thread (see :meth:`_read_config`)."""
        self._running: set[asyncio.Task[None]] = set()
        """Every save not yet done (held: the loop keeps only weak references to tasks)."""
        self._kept: StateKeeper | None = None
        """What the sweeps keep in ``state`` (``bot.sweep_state``, imported only with a state:
        the CLI has none)."""
        if state is not None:
            from bot.sweep_state import StateKeeper

            self._kept = StateKeeper(state, self._running)
        self._probe_memory = probe_memory if state is None else None
        """The CLI's stand-in for the state's probe memory (``bot.cli_memory``): with no state,
        a Kubernetes probe's memory of the jobs it saw live is read before and kept after."""
        self.probe_collections = 0
        """How many cluster collections ran (for benchmarks and tests of single-flight)."""

    async def sweep(self, *, clusters: Sequence[str] | None = None) -> SweepResult:
        """One sweep; concurrent calls with the same cluster selection share it."""
        key = tuple(sorted(clusters)) if clusters else ()
        if (pending := self._inflight.get(key)) is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[SweepResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            # No full garbage collection scans this sweep's objects (bot.gcquiet).
            async with QUIET_GC.sweeping() as hold:
                result = await self._sweep(clusters)
            hold.until_released(result)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it twice
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._inflight[key]

    async def _sweep(self, selection: Sequence[str] | None) -> SweepResult:
        started = time.perf_counter()
        config = self._config = await self._read_config()
        wanted = config.select(selection)
        memory, degraded = await self._memory()
        notes: list[str] = []
        # Log states only with a store that answered (an outage costs one failed command).
        resume = self._kept is not None and degraded is None
        saves = self._kept.begin_sweep() if self._kept is not None else []
        facts = await self._collect_all(config, wanted, notes if resume else None)
        histories, degraded = await self._histories(facts, degraded)
        now = _judging_time(facts, self._clock())
        # Judging is CPU work that grows with the cluster (seconds at 5,000 jobs): a worker
        # thread keeps the event loop (Slack acks) free, as parsing does (issue 12).
        _import_judging()
        report, details = await asyncio.to_thread(
            build_report, facts, settings=config.report_settings(), now=now,
            histories=histories, memory=memory,
            kept_history=KEPT_HISTORY if histories is not None else None,
        )
        if self._kept is not None and degraded is None:
            degraded = await self._kept.save_memory(report, details, facts, memory)
        if saves:  # each catches its store's errors (a note)
            await asyncio.gather(*saves)
        return SweepResult(report, details, facts, self._clock(),
                           time.perf_counter() - started, degraded or next(iter(notes), None))

    async def _read_config(self) -> Config:
        """The config re-read (CONTRACT §2) in a worker thread, never on the event loop: a
        read that waits (a FIFO, a pipe, a slow mount) holds no Slack ack. ``load_config``
        bounds its own wait (``bot.config_file.CONFIG_READ_TIMEOUT_S``; ``ConfigSource`` then keeps
        the last good config); a read stuck past that in the kernel (a hung NFS mount) is
        waited for a second more, then this sweep and the next ones run on the last good
        config, without starting another read until that one returns."""
        from bot import config_file as config_module

        pending = self._config_read
        if pending is not None and not pending.done() and self._config is not None:
            return self._config  # the last read is still stuck: no second one behind it
        if pending is None or pending.done():
            pending = self._config_read = asyncio.ensure_future(
                asyncio.to_thread(self._load_config))
        try:
            return await asyncio.wait_for(asyncio.shield(pending),
                                          config_module.CONFIG_READ_TIMEOUT_S + 1.0)
        except TimeoutError:
            if self._config is None:
                raise ConfigError("the config could not be read within "
                                  f"{config_module.CONFIG_READ_TIMEOUT_S + 1.0:g}s") from None
            log.warning("config read stuck; the last good config stays in use")
            return self._config

    async def _collect_all(
        self, config: Config, wanted: Sequence[ClusterConfig], notes: list[str] | None = None,
    ) -> tuple[ClusterFacts, ...]:
        """Every wanted cluster, concurrently; with ``notes``, logs resumed from the state."""
        results: dict[str, ClusterFacts] = {}
        async with asyncio.TaskGroup() as group:
            for cluster in wanted:
                if cluster.active:
                    group.create_task(self._collect_one(cluster, config, results, notes))
        out = []
        for cluster in wanted:
            if not cluster.active:
                out.append(ClusterFacts(name=cluster.name, kind=cluster.kind, status="inactive",
                                        collected_at=self._clock()))
            else:
                out.append(results[cluster.name])
        return tuple(out)

    async def _collect_one(
        self, cluster: ClusterConfig, config: Config, results: dict[str, ClusterFacts],
        notes: list[str] | None = None,
    ) -> None:
        probe = self._probe_for(cluster, config)
        self.probe_collections += 1
        resuming = getattr(probe, "collect_since", None)
        kept = self._kept if notes is not None else None  # notes: a sweep that resumes
        remembering = kept is not None and hasattr(probe, "recall")
        try:
            async with asyncio.timeout(cluster.timeout_s + grace_s(cluster.timeout_s)):
                if kept is not None and remembering:
                    await kept.recall(cluster.name, cast("RememberingProbe", probe))
                file_memory = self._file_memory(cluster, probe)
                if file_memory is not None:
                    await asyncio.to_thread(self._recall_file, file_memory, probe)
                if notes is None or resuming is None or kept is None:
                    results[cluster.name] = await probe.collect()
                else:
                    results[cluster.name] = await kept.resume(cluster.name, probe, notes)
                if kept is not None and remembering and results[cluster.name].status == "ok":
                    await kept.keep_memory(cluster.name, cast("RememberingProbe", probe),
                                           cast("list[str]", notes))
                if file_memory is not None and results[cluster.name].status == "ok":
                    await asyncio.to_thread(self._keep_file, file_memory, probe)
        except TimeoutError:
            results[cluster.name] = self._unreachable(
                cluster, f"sweep timed out after {cluster.timeout_s:g}s")
        except ProbeError as exc:
            results[cluster.name] = self._unreachable(cluster, str(exc))
        except Exception as exc:  # a probe bug must not take the other clusters down
            log.exception("probe crashed", cluster=cluster.name)
            results[cluster.name] = self._unreachable(cluster, f"probe error: {exc!r}")


    def _file_memory(self, cluster: ClusterConfig, probe: ClusterProbe,
                     ) -> KubernetesCluster | None:
        """The live Kubernetes cluster whose probe remembers through ``probe_memory`` (a
        recording replayed has no 'since': its jobs are fixed)."""
        if (self._probe_memory is None or not isinstance(cluster, KubernetesCluster)
                or not hasattr(probe, "recall")):
            return None
        return cluster

    def _recall_file(self, cluster: KubernetesCluster, probe: ClusterProbe) -> None:
        assert self._probe_memory is not None
        memory = self._probe_memory.load(cluster)
        if memory is not None:
            cast("RememberingProbe", probe).recall(memory)

    def _keep_file(self, cluster: KubernetesCluster, probe: ClusterProbe) -> None:
        assert self._probe_memory is not None
        self._probe_memory.save(cluster, cast("RememberingProbe", probe).remembered())

    def _unreachable(self, cluster: ClusterConfig, detail: str) -> ClusterFacts:
        return ClusterFacts(name=cluster.name, kind=cluster.kind, status="unreachable",
                            detail=detail, collected_at=self._clock())

    def _probe_for(self, cluster: ClusterConfig, config: Config) -> ClusterProbe:
        known = self._probes.get(cluster.name)
        if known is not None and known[0] == cluster:
            return known[1]
        probe = self._probe_factory(cluster, aliases=dict(config.metrics.aliases), **self._keep)
        if known is not None:  # its entry changed: its kept connection goes with it
            task = asyncio.get_running_loop().create_task(known[1].aclose())
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        self._probes[cluster.name] = (cluster, probe)
        if self._kept is not None:  # a new entry: start again from Redis
            self._kept.forget_logs(cluster.name)
        return probe


    async def _histories(
        self, facts: Sequence[ClusterFacts], degraded: str | None, *, whole: bool = True,
    ) -> tuple[dict[tuple[str, str], Sequence[MetricPoint]] | None, str | None]:
        """Each job's stored history with this sweep's points merged in (``whole``: a sweep
        of every job, so the jobs not in it are forgotten here): ``StateKeeper.histories``,
        none without a state or with a store already failed."""
        if self._kept is None or degraded is not None:
            return None, degraded
        return await self._kept.histories(facts, whole=whole)

    async def _memory(self) -> tuple[SweepMemory | None, str | None]:
        """(sweep memory, degraded note): the store's own errors degrade, never fail, an answer."""
        if self._kept is None:
            return None, None
        return await self._kept.memory()

    async def job(self, cluster: str | None, job_id: str) -> SweepResult:
        """One job in depth: each selected cluster is asked for that job only (a SLURM probe's
        ``collect_one``: at most two commands whatever the cluster's size; a Kubernetes
        probe's: the lists and that job's log only); a replay, with no one-job path, is
        collected whole. History and memory are read as in a sweep (the chain edges it
        remembers name successors), never saved: this is no sweep. ``find`` on the result
        gives the job (or says it is not there)."""
        started = time.perf_counter()
        config = self._config = await self._read_config()
        selected = config.select([cluster] if cluster else None)
        wanted = [c for c in selected if c.active]
        # A cluster named but inactive is not read (CONTRACT §2: skipped, listed as inactive):
        # listed, ``find`` says so instead of "no such job" on a cluster nobody asked.
        skipped = [ClusterFacts(name=c.name, kind=c.kind, status="inactive",
                                collected_at=self._clock())
                   for c in selected if cluster and not c.active]
        memory, degraded = await self._memory()
        results: dict[str, ClusterFacts] = {}
        refused: dict[str, str] = {}  # cluster -> why it cannot hold that id
        async with asyncio.TaskGroup() as group:
            for c in wanted:
                group.create_task(self._collect_job_on(c, config, job_id, results, refused))
        facts = (*(results[c.name] for c in wanted), *skipped)
        histories, degraded = await self._histories(facts, degraded, whole=False)
        _import_judging()
        report, details = await asyncio.to_thread(  # a whole Kubernetes cluster, maybe
            build_report, facts, settings=config.report_settings(),
            now=_judging_time(facts, self._clock()), histories=histories, memory=memory,
        )
        return SweepResult(report, details, facts, self._clock(),
                           time.perf_counter() - started, degraded, refused)


    async def _collect_job_on(self, cluster: ClusterConfig, config: Config, job_id: str,
                              results: dict[str, ClusterFacts], refused: dict[str, str],
                              ) -> None:
        probe = self._probe_for(cluster, config)
        one = getattr(probe, "collect_one", None)
        if one is None:
            await self._collect_one(cluster, config, results)
            return
        try:
            async with asyncio.timeout(cluster.timeout_s):
                if self._kept is not None and hasattr(probe, "recall"):
                    # A job this process last saw live may have ended in another's sweep.
                    await self._kept.recall(cluster.name, cast("RememberingProbe", probe))
                if (file_memory := self._file_memory(cluster, probe)) is not None:
                    await asyncio.to_thread(self._recall_file, file_memory, probe)
                results[cluster.name] = await one(job_id)
        except TimeoutError:
            results[cluster.name] = self._unreachable(
                cluster, f"job query timed out after {cluster.timeout_s:g}s")
        except InvalidJobIdError as exc:  # an id this backend cannot hold: it answered none
            results[cluster.name] = ClusterFacts(name=cluster.name, kind=cluster.kind,
                                                 status="ok", collected_at=self._clock())
            refused[cluster.name] = str(exc)
        except ProbeError as exc:
            results[cluster.name] = self._unreachable(cluster, str(exc))

    async def cancel(self, cluster: str, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        """Cancel one job through its cluster's probe (``scancel`` / delete the Job, only
        the object with ``uid``, only ``owner``'s job, when given)."""
        validate_job_id(job_id)
        config = self._config if self._config is not None else self._load_config()
        probe = self._probe_for(config.cluster(cluster), config)
        await probe.cancel(job_id, uid=uid, owner=owner)
        if self._kept is not None and hasattr(probe, "recall"):
            await self._kept.note_cancel(cluster, job_id)


    async def aclose(self) -> None:
        if self._config_read is not None:  # a stuck read is not waited for long
            await asyncio.wait({self._config_read}, timeout=1.0)
        for _, probe in self._probes.values():
            await probe.aclose()
        self._probes.clear()
