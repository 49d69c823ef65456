"""The ``replay`` backend: a recorded cluster read back, by the kind it was recorded from.

Policy: ``cluster.json``'s ``kind`` picks the reader at each sweep (a directory may be
re-recorded from another cluster): ``"kubernetes"`` is ``probes.kubernetes.replay``; a SLURM
recording (``"slurm"``, or none: the first recordings named none) is ``probes.slurm.replay``.
A ``cluster.json`` that cannot be read (absent, a link, no regular file, over
:data:`META_BYTES`, no JSON) is the cluster's ``unreachable`` detail, naming it. Each wing's
reader is imported only when a recording of its kind is read, so the bundled demo never
imports kubernetes_asyncio.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.base import ClusterProbe
from probes.config import ReplayCluster
from probes.errors import ProbeError
from probes.models import ClusterFacts
from probes.recording_files import open_recording, read_json

READERS = {
    "slurm": "probes.slurm.replay:ReplayProbe",
    "kubernetes": "probes.kubernetes.replay:KubernetesReplay",
}
META_BYTES = 1 << 20
"""The most of ``cluster.json`` read to learn the recording's kind."""


class ReplayProbe:
    """A ``kind = "replay"`` cluster (see the module policy)."""

    def __init__(self, cluster: ReplayCluster, **options: Any) -> None:
        self._cluster = cluster
        self._options = options

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        try:
            kind = await asyncio.to_thread(recorded_kind, Path(self._cluster.path))
        except ProbeError as exc:
            return self._unreachable(str(exc))
        reader = READERS.get(kind or "slurm")
        if reader is None:
            return self._unreachable(f"recording file cluster.json: {kind!r} is no recorded "
                                     "cluster kind (slurm or kubernetes)")
        module_name, _, class_name = reader.partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        probe: ClusterProbe = cls(self._cluster, **self._options)
        return await probe.collect(offsets=offsets)

    def _unreachable(self, detail: str) -> ClusterFacts:
        return ClusterFacts(name=self._cluster.name, kind="replay", status="unreachable",
                            detail=detail, collected_at=datetime.now(UTC))

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        raise ProbeError(f"cluster {self._cluster.name!r} is a replay: nothing to cancel")

    async def aclose(self) -> None:
        return None


def recorded_kind(root: Path) -> str | None:
    """``cluster.json``'s ``kind`` (``None``: it names none, or is no object, which the SLURM
    reader reports); a directory or ``cluster.json`` that cannot be read as the recording's
    files are (``probes.recording_files``), or is over :data:`META_BYTES`, is
    :class:`probes.errors.CommandError` naming it."""
    root_fd = open_recording(root)
    try:
        meta = read_json(root_fd, "cluster.json", META_BYTES)
    finally:
        os.close(root_fd)
    kind = meta.get("kind") if isinstance(meta, dict) else None
    return str(kind) if kind is not None else None
