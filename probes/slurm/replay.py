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

A recording travels (a bug report): its files are read as data from someone else
(``probes.recording_files``): each is opened below the directory's own descriptor with
``O_NOFOLLOW``: a symbolic link inside it is refused, never followed (the directory the config
names may itself be a link). A file that is not a regular file (a FIFO, a device, a directory)
or is larger than :data:`MAX_FILE_BYTES` is refused before it is read; a file that is not
UTF-8 or not of its shape names itself.
Each is the cluster's ``unreachable`` detail. An entry of ``collected.json`` that is no
object fails that job's fetch only, as a garbled line of the live collector's answer does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.config import ReplayCluster
from probes.errors import CommandError, ProbeError
from probes.models import ClusterFacts, JobFacts, SchedulerRecord
from probes.recording_files import open_recording, read_json, read_text
from probes.slurm.answer import unreadable
from probes.slurm.assemble import job_facts
from probes.slurm.early import off_loop
from probes.slurm.parse import parse_squeue_json
from probes.slurm.scontrol import known_from, merge_scontrol, parse_scontrol_all

FORMAT = 1
MAX_FILE_BYTES = 512 << 20
"""The largest recording file read: a collected.json holds every job's log tail (the live
collector's answer is bounded by ``answer_budget_bytes``, 32 MiB by default, JSON-escaped)."""


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
        jobs = await off_loop(lambda stop: tuple(  # parsing off the event loop, none once
            self._job(r, collected.get(r.job_id))  # the sweep has given up
            for r in records if not stop.is_set()
        ))
        return ClusterFacts(
            name=self._cluster.name, kind="replay", status="ok",
            detail=f"recorded {meta.get('recorded_at', '?')} from {meta.get('name', '?')}",
            collected_at=_recorded_at(meta) or now, jobs=jobs,
        )

    def _job(self, record: SchedulerRecord, entry: Mapping[str, Any] | None) -> JobFacts:
        """One job's facts; an entry whose parts are not of their shape (tampered) fails
        that job's fetch, naming what was wrong, and the other jobs stand."""
        patterns = self._cluster.benign_patterns
        try:
            return job_facts(record, entry, aliases=self._aliases, benign_patterns=patterns)
        except (AttributeError, TypeError, ValueError) as exc:  # ValidationError included
            why = str(exc).splitlines()[0] if str(exc) else ""
            return job_facts(record, unreadable(
                f"collected.json entry is malformed: {type(exc).__name__}: {why}"[:300]),
                aliases=self._aliases, benign_patterns=patterns)

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        raise ProbeError(f"cluster {self._cluster.name!r} is a replay: nothing to cancel")

    async def aclose(self) -> None:
        return None


def _recorded_at(meta: Mapping[str, Any]) -> datetime | None:
    """When the recording was made (the sweep's "now"); ``None`` when it does not say. One it
    says that is no ISO time is a malformed recording, as in the Kubernetes replay: judged at
    the reader's clock instead, its stalls and recent jobs would read otherwise, unsaid."""
    raw = meta.get("recorded_at")
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except (AttributeError, TypeError, ValueError) as exc:
        raise CommandError(f"recording file cluster.json: recorded_at {str(raw)[:40]!r} is no "
                           "ISO time") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _read_text(root_fd: int, name: str) -> str | None:
    """The recording's file ``name`` (``None`` when absent), at most :data:`MAX_FILE_BYTES`
    (``probes.recording_files``: no link followed, only a regular file)."""
    return read_text(root_fd, name, MAX_FILE_BYTES)


def _read_json(root_fd: int, name: str) -> Any:
    return read_json(root_fd, name, MAX_FILE_BYTES)


def load_recording(
    root: Path, cluster_name: str,
) -> tuple[dict[str, Any], list[SchedulerRecord], dict[str, Any]]:
    """Read a recording: ``(cluster.json, records, collected jobs by id)``."""
    root_fd = open_recording(root)
    try:
        return _load(root_fd, root, cluster_name)
    finally:
        os.close(root_fd)


def _load(root_fd: int, root: Path, cluster_name: str,
          ) -> tuple[dict[str, Any], list[SchedulerRecord], dict[str, Any]]:
    meta = _read_json(root_fd, "cluster.json")
    if not isinstance(meta, dict) or meta.get("format", FORMAT) != FORMAT:
        raise CommandError(f"{root}/cluster.json: unsupported recording format")
    now = _recorded_at(meta) or datetime.now(UTC)
    text = _read_text(root_fd, "squeue.json")
    if not text:
        raise CommandError(f"recording {root} is missing squeue.json")
    records = {r.job_id: r for r in _parse(text, "squeue.json", cluster_name, now)}
    sacct = _read_text(root_fd, "sacct.json")
    if sacct is not None:
        for r in _parse(sacct, "sacct.json", cluster_name, now):
            records.setdefault(r.job_id, r)
    scontrol = _read_text(root_fd, "scontrol.txt")
    if scontrol is not None:
        fields = parse_scontrol_all(scontrol, known={k: known_from(r) for k, r in records.items()})
        records = {k: merge_scontrol(r, fields.get(k)) for k, r in records.items()}
    collected: Any = {}
    if _read_text(root_fd, "collected.json") is not None:
        collected = _read_json(root_fd, "collected.json")
    jobs = collected.get("jobs", {}) if isinstance(collected, dict) else None
    if not isinstance(jobs, dict):
        raise CommandError("recording file collected.json: not a recording's collected file "
                           '(expected {"jobs": {job id: entry}})')
    return meta, list(records.values()), {
        key: entry if isinstance(entry, dict) else unreadable(
            f"collected.json entry is not an object: {type(entry).__name__}")
        for key, entry in jobs.items()}


def _parse(text: str, name: str, cluster: str, now: datetime) -> list[SchedulerRecord]:
    """``squeue --json``/``sacct --json`` as recorded, errors naming the file."""
    try:
        return parse_squeue_json(text, cluster=cluster, now=now)
    except ProbeError as exc:
        raise CommandError(f"recording file {name}: {exc}") from exc


def facts_without_files(records: list[SchedulerRecord]) -> tuple[JobFacts, ...]:
    return tuple(JobFacts(record=r) for r in records)
