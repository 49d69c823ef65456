"""The collector run in process on one job, and the step its checkpoint answer banks."""

from __future__ import annotations

from pathlib import Path

from probes.remote import collector
from probes.slurm.checkpoints import build_listing


def banked_step(stdout: Path, workdir: Path, *, tail_bytes: int = 1 << 16) -> int | None:
    """The banked step of job 7 (StdOut ``stdout``, run in ``workdir``, the default root
    ``{workdir}/checkpoints``), as the sweep reads the collector's answer."""
    request = {"tail_bytes": tail_bytes, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(workdir),
                         "offset": 0, "checkpoint_roots": [str(workdir / "checkpoints")],
                         "trial_roots": []}]}
    raw = collector.collect(request)["jobs"]["7"]["checkpoints"]
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports"),
                         latest_markers=raw.get("markers"), logged=raw.get("logged")).banked_step
