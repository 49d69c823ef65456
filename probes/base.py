"""The seam every cluster backend plugs into.

Policy: a backend is one module exposing a class that satisfies :class:`ClusterProbe` and is
registered in :data:`probes.registry.BACKENDS` under its config ``kind``. A probe never raises
for an unreachable cluster during ``collect``: it returns ``ClusterFacts(status="unreachable",
detail=...)``, so one bad cluster never hides the others. ``cancel`` raises ``ProbeError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from probes.models import ClusterFacts


class ClusterProbe(Protocol):
    """One cluster backend (SLURM over SSH or local, Kubernetes, replay)."""

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        """Sweep the cluster once: queue, logs (bounded tails), checkpoints, trial trees.

        ``offsets`` maps a log path to the byte offset already read by the caller; a probe may
        then read only the new bytes (still bounded).
        """
        ...

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        """Cancel one job (``scancel`` / delete the Job with background propagation).

        ``uid``: the Kubernetes uid of the object the cancel is for; a Job re-created under
        the same name since is another job and is not deleted. ``owner``: the user whose job
        the cancel is for; a SLURM id given since to another user's job (ids reset or
        wrapped) is not cancelled."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
