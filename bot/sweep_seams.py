"""The seams a :class:`bot.sweep.Sweeper` is given or finds in its probes, as Protocols.

Policy: the sweep engine knows its state store and its probes' extra powers only through
these: a :class:`SweepState` (Redis in the bot; none for the CLI), a :class:`ProbeMemory`
(the CLI's file per Kubernetes cluster), a probe that remembers the sweep before
(:class:`RememberingProbe`) or resumes its logs (:class:`ResumingProbe`). A probe's power is
found by the method it has, never by its class, so a test's fake plugs in at the same seam.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from probes.config import KubernetesCluster
from probes.models import ClusterFacts, MetricPoint

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState
    from report.memory import SweepMemory


class SweepState(Protocol):
    """What a sweep remembers between runs (Redis in the bot; nothing for the CLI)."""

    async def load_memory(self) -> SweepMemory: ...
    async def save_memory(self, memory: SweepMemory) -> None: ...
    async def merge_history(
        self, cluster: str, job_id: str, points: Sequence[MetricPoint],
    ) -> list[MetricPoint]: ...
    async def merge_histories(
        self, cluster: str, batch: Mapping[str, Sequence[MetricPoint]],
        newest: Mapping[str, int] | None = None, *, read_at: datetime | None = None,
    ) -> dict[str, list[MetricPoint]]: ...
    async def load_log_states(self, cluster: str) -> dict[str, LogState]: ...
    async def save_log_states(self, cluster: str, states: Mapping[str, LogState], *,
                              drop: Collection[str] = (),
                              renew: Collection[str] = ()) -> None: ...
    async def load_probe_memory(self, cluster: str) -> Any: ...
    async def save_probe_memory(self, cluster: str, memory: Any) -> None: ...


class RememberingProbe(Protocol):
    """A backend whose sweeps compare with the one before (``KubernetesProbe``: a job seen live
    and gone since vanished): its memory is shared through the state, so a restarted bot or
    another replica's sweep compares with the cluster's latest sweep, not its own last one."""

    def remembered(self) -> Any: ...
    def recall(self, memory: Any) -> None: ...
    def take_cancels(self, memory: Any) -> None: ...


class ProbeMemory(Protocol):
    """Where a process with no state keeps its Kubernetes probes' memory between commands
    (``bot.cli_memory.CliProbeMemory``: a file per cluster)."""

    def load(self, cluster: KubernetesCluster) -> Any: ...
    def save(self, cluster: KubernetesCluster, memory: Any) -> None: ...


class ResumingProbe(Protocol):
    """A backend that resumes logs where the last sweep stopped (``SlurmProbe``)."""

    async def collect_since(self, prior: Mapping[str, LogState],
                            ) -> tuple[ClusterFacts, dict[str, LogState]]: ...
