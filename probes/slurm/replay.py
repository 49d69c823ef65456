"""The ``replay`` backend: a recorded cluster read back from a directory.

Policy: a recording holds what the SLURM probe saw, verbatim, so that replaying it runs the
same parsers and rules as the live sweep (this is how a user files a bug report, and how
``jobtables demo`` works without SSH, Slack or Redis). A replay is read-only: ``cancel``
raises. The recording's own time is the sweep's "now", so stall rules read as they did live.

Directory format (version 1)::

    cluster.json     {"format": 1, "name": "alpha", "kind": "slurm",
                      "recorded_at": "2026-11-30T16:00:00Z", "users": ["alice"],
                      "slurm_version": "23.11.4"}
    squeue.json      `squeue --json` output, verbatim (any SLURM version)
    sacct.json       optional: `sacct --json` output for recently terminated jobs
    scontrol.txt     optional: `scontrol show job -o` output for all jobs
    collected.json   the batched file read (probes/collector.py's answer): per job id its
                     log tail, workdir match, checkpoint listings and reduced trial results
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.config import ReplayCluster
from probes.errors import CommandError, ProbeError
from probes.models import ClusterFacts, JobFacts, SchedulerRecord
from probes.slurm.assemble import job_facts
from probes.slurm.parse import parse_squeue_json
from probes.slurm.scontrol import known_from, merge_scontrol, parse_scontrol_all

FORMAT = 1


class ReplayProbe:
    """Reads a recorded cluster directory; see the module docstring for its layout."""

    def __init__(self, cluster: ReplayCluster, *, aliases: Mapping[str, str] | None = None,
                 **_: Any) -> None:
        self._cluster = cluster
        self._aliases = dict(aliases or {})

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        root = Path(self._cluster.path)
        now = datetime.now(UTC)
        try:
            meta, records, collected = load_recording(root, self._cluster.name)
        except ProbeError as exc:
            return ClusterFacts(name=self._cluster.name, kind="replay", status="unreachable",
                                detail=str(exc), collected_at=now)
        patterns = self._cluster.benign_patterns
        jobs = await asyncio.to_thread(lambda: tuple(  # parsing off the event loop
            job_facts(r, collected.get(r.job_id), aliases=self._aliases, benign_patterns=patterns)
            for r in records
        ))
        return ClusterFacts(
            name=self._cluster.name, kind="replay", status="ok",
            detail=f"recorded {meta.get('recorded_at', '?')} from {meta.get('name', '?')}",
            collected_at=_recorded_at(meta) or now, jobs=jobs,
        )

    async def cancel(self, job_id: str, *, uid: str | None = None) -> None:
        raise ProbeError(f"cluster {self._cluster.name!r} is a replay: nothing to cancel")

    async def aclose(self) -> None:
        return None


def _recorded_at(meta: Mapping[str, Any]) -> datetime | None:
    raw = meta.get("recorded_at")
    if not isinstance(raw, str):
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CommandError(f"recording is missing {path.name}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"recording file {path.name} is unreadable: {exc}") from exc


def load_recording(
    root: Path, cluster_name: str,
) -> tuple[dict[str, Any], list[SchedulerRecord], dict[str, Any]]:
    """Read a recording: ``(cluster.json, records, collected jobs by id)``."""
    if not root.is_dir():
        raise CommandError(f"{root}: no such recording directory")
    meta = _read_json(root / "cluster.json")
    if not isinstance(meta, dict) or meta.get("format", FORMAT) != FORMAT:
        raise CommandError(f"{root}/cluster.json: unsupported recording format")
    now = _recorded_at(meta) or datetime.now(UTC)
    text = (root / "squeue.json").read_text(encoding="utf-8") if (root / "squeue.json").exists() \
        else ""
    if not text:
        raise CommandError(f"recording {root} is missing squeue.json")
    records = {r.job_id: r for r in parse_squeue_json(text, cluster=cluster_name, now=now)}
    if (root / "sacct.json").exists():
        sacct = (root / "sacct.json").read_text(encoding="utf-8")
        for r in parse_squeue_json(sacct, cluster=cluster_name, now=now):
            records.setdefault(r.job_id, r)
    if (root / "scontrol.txt").exists():
        fields = parse_scontrol_all((root / "scontrol.txt").read_text(encoding="utf-8"),
                                    known={k: known_from(r) for k, r in records.items()})
        records = {k: merge_scontrol(r, fields.get(k)) for k, r in records.items()}
    collected = _read_json(root / "collected.json") if (root / "collected.json").exists() else {}
    jobs = collected.get("jobs", {}) if isinstance(collected, dict) else {}
    return meta, list(records.values()), jobs


def facts_without_files(records: list[SchedulerRecord]) -> tuple[JobFacts, ...]:
    return tuple(JobFacts(record=r) for r in records)
