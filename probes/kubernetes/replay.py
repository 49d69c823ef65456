"""A recorded Kubernetes cluster read back: the ``replay`` backend for a ``kind = "kubernetes"``
recording (``probes.replay`` picks it by ``cluster.json``'s kind).

Policy: the recording holds what the Kubernetes probe read from the API server in one sweep,
so a replay runs the same probe (:class:`probes.kubernetes.probe.KubernetesProbe`) over those
answers (:class:`probes.kubernetes.recorded.RecordedClient`), with no API server: its jobs are
the live sweep's, judged at the recording's own time (its ``recorded_at`` is the sweep's
"now"). A fresh probe reads each sweep (nothing vanishes between two replays). A replay is
read-only: ``cancel`` raises.

Directory format (version 1)::

    cluster.json   {"format": 1, "name": "beta", "kind": "kubernetes",
                    "recorded_at": "2026-12-05T03:30:04Z", "namespace": "ml",
                    "users": ["alice"], "user_keys": ["user", "owner", "team.user"],
                    "recent_hours": 24.0, "min_log_lines": 1, "benign_patterns": []}
    jobs.json      the batch/v1 JobList the probe read (the selected jobs' Jobs only; in
                   every object a container's env values and kubectl's last-applied
                   annotation are "(not recorded)": the probe reads neither)
    jobsets.json   the jobset.x-k8s.io JobSetList, or {"error": {"type": "ForbiddenError",
                   "message": "..."}} when the Role refused listing JobSets
    pods.json      the v1 PodList (the selected jobs' pods only)
    logs.json      {"reads": [...]}: each pod log read in order, {"pod", "container",
                   "previous", "cut", "file": "log-0001.txt"} or {"pod", "container",
                   "previous", "error": {"type", "message"}}
    log-0001.txt   that read's text, verbatim

The cluster's settings that shaped the sweep (``users``, ``user_keys``, ``recent_hours``,
``min_log_lines``, ``benign_patterns``) are the recording's; the replay cluster's own
``benign_patterns`` are added to the recorded ones (a fix can be tried on a recording).

Files are read as ``probes.recording_files`` says (no link followed, a regular file only, at
most :data:`MAX_FILE_BYTES`); a file that is missing, not UTF-8 or not of its shape (an
object the client's model refuses, a log file name that is no ``log-NNNN.txt``) names itself
in the cluster's ``unreachable`` detail.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict, ValidationError

from probes.config import KubernetesCluster, ReplayCluster
from probes.errors import CommandError, ProbeError
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.recorded import ERRORS, Answers, LogRead, RecordedClient, from_api_json
from probes.models import ClusterFacts
from probes.recording_files import LOG_FILE, open_recording, read_json, read_text

FORMAT = 1
MAX_FILE_BYTES = 512 << 20
"""The largest recording file read (each log read is bounded live by ``tail_bytes``)."""


class KubernetesReplay:
    """Reads a recorded Kubernetes cluster directory (see the module docstring)."""

    def __init__(self, cluster: ReplayCluster, *, aliases: Mapping[str, str] | None = None,
                 **_: Any) -> None:
        self._cluster = cluster
        self._aliases = dict(aliases or {})

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        try:
            meta, answers = await asyncio.to_thread(load_recording, Path(self._cluster.path))
            live, at = recorded_cluster(meta, self._cluster)
        except ProbeError as exc:
            return self._unreachable(str(exc))
        probe = KubernetesProbe(live, clock=lambda: at, aliases=self._aliases,
                                api=RecordedClient(answers, self._cluster.path))
        try:
            facts = await probe.collect()
        except (AttributeError, TypeError, ValueError, KeyError) as exc:  # a tampered object
            return self._unreachable(f"recording {self._cluster.path}: an object is malformed:"
                                     f" {type(exc).__name__}: {exc}"[:300])
        if facts.status != "ok":
            return facts.model_copy(update={"kind": "replay"})
        said = f"recorded {meta['recorded_at']} from {meta.get('name', '?')}"
        return facts.model_copy(update={
            "kind": "replay", "detail": f"{said}; {facts.detail}" if facts.detail else said})

    def _unreachable(self, detail: str) -> ClusterFacts:
        return ClusterFacts(name=self._cluster.name, kind="replay", status="unreachable",
                            detail=detail, collected_at=datetime.now(UTC))

    async def cancel(self, job_id: str, *, uid: str | None = None) -> None:
        raise ProbeError(f"cluster {self._cluster.name!r} is a replay: nothing to cancel")

    async def aclose(self) -> None:
        return None


class _Meta(BaseModel):
    """``cluster.json``'s settings of the sweep recorded."""

    model_config = ConfigDict(extra="ignore")

    recorded_at: datetime
    users: tuple[str, ...] = ()
    user_keys: tuple[str, ...] = ("user", "owner", "team.user")
    recent_hours: float = 24.0
    min_log_lines: int = 1
    benign_patterns: tuple[str, ...] = ()


def recorded_cluster(meta: Mapping[str, Any], replay: ReplayCluster,
                     ) -> tuple[KubernetesCluster, datetime]:
    """The cluster the recorded sweep read, under the replay's name, and its time."""
    try:
        sweep = _Meta.model_validate(meta)
        at = sweep.recorded_at if sweep.recorded_at.tzinfo else sweep.recorded_at.replace(
            tzinfo=UTC)
        cluster = KubernetesCluster(
            name=replay.name, users=sweep.users, user_keys=sweep.user_keys,
            recent_hours=sweep.recent_hours, min_log_lines=sweep.min_log_lines,
            benign_patterns=tuple(dict.fromkeys(sweep.benign_patterns + replay.benign_patterns)))
    except ValidationError as exc:
        why = " ".join(str(exc).split())[:300]
        raise CommandError(f"recording file cluster.json is malformed: {why}") from exc
    return cluster, at


def load_recording(root: Path) -> tuple[dict[str, Any], Answers]:
    """A Kubernetes recording's ``cluster.json`` and answers (the module docstring's files)."""
    root_fd = open_recording(root)
    try:
        meta = read_json(root_fd, "cluster.json", MAX_FILE_BYTES)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get(
                "kind") != "kubernetes":
            raise CommandError(f"{root}/cluster.json: not a Kubernetes recording of format "
                               f"{FORMAT}")
        answers = Answers(jobs=_objects(root_fd, "jobs.json", "V1Job"),
                          pods=_objects(root_fd, "pods.json", "V1Pod"),
                          reads=_reads(root_fd))
        _jobsets(root_fd, answers)
        return meta, answers
    finally:
        os.close(root_fd)


def _items(root_fd: int, name: str) -> list[dict[str, Any]]:
    """A List file's items, each an object with its metadata's name."""
    data = read_json(root_fd, name, MAX_FILE_BYTES)
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get("metadata"), dict)
            and isinstance(item["metadata"].get("name"), str) for item in items):
        raise CommandError(f"recording file {name}: not a Kubernetes list (expected "
                           '{"items": [objects with metadata.name]})')
    return items


def _objects(root_fd: int, name: str, klass: str) -> list[Any]:
    """A List file's items as the client's models, as a live list is read."""
    items = _items(root_fd, name)
    try:
        return [from_api_json(item, klass) for item in items]
    except (ApiException, AttributeError, TypeError, ValueError, KeyError,
            RecursionError) as exc:
        why = " ".join(str(exc).split())
        raise CommandError(f"recording file {name}: an item is no {klass}: "
                           f"{type(exc).__name__}: {why}"[:300]) from exc


def _jobsets(root_fd: int, answers: Answers) -> None:
    """``jobsets.json``: the JobSets listed, or the refusal the listing got (absent: none)."""
    if read_text(root_fd, "jobsets.json", MAX_FILE_BYTES) is None:
        return
    data = read_json(root_fd, "jobsets.json", MAX_FILE_BYTES)
    if isinstance(data, dict) and "error" in data:
        answers.jobsets_error = _error("jobsets.json", data["error"])
        return
    answers.jobsets = _items(root_fd, "jobsets.json")


class _Error(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    type: str
    message: str


class _Read(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    pod: str
    container: str | None
    previous: bool = False
    cut: bool = False
    file: str | None = None
    error: _Error | None = None


def _error(name: str, raw: Any) -> ProbeError:
    try:
        error = _Error.model_validate(raw)
    except ValidationError as exc:
        raise CommandError(f"recording file {name}: an error is malformed: "
                           f"{' '.join(str(exc).split())}"[:300]) from exc
    cls = ERRORS.get(error.type)
    if cls is None:
        raise CommandError(f"recording file {name}: {error.type!r} is no recorded error")
    return cls(error.message)


def _reads(root_fd: int) -> list[LogRead]:
    """``logs.json``'s reads, each with its log file's text (absent: no log was read)."""
    if read_text(root_fd, "logs.json", MAX_FILE_BYTES) is None:
        return []
    data = read_json(root_fd, "logs.json", MAX_FILE_BYTES)
    raw = data.get("reads") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise CommandError('recording file logs.json: not a recording\'s log reads '
                           '(expected {"reads": [...]})')
    try:
        entries = [_Read.model_validate(entry) for entry in raw]
    except ValidationError as exc:
        raise CommandError(f"recording file logs.json: a read is malformed: "
                           f"{' '.join(str(exc).split())}"[:300]) from exc
    texts: dict[str, str] = {}
    reads = []
    for entry in entries:
        read = LogRead(entry.pod, entry.container, entry.previous, cut=entry.cut)
        if entry.error is not None:
            read.error = _error("logs.json", entry.error.model_dump())
        elif entry.file is None or not LOG_FILE.fullmatch(entry.file):
            raise CommandError(f"recording file logs.json: {entry.file!r} is no log file name "
                               "(log-NNNN.txt)")
        else:
            if entry.file not in texts:
                text = read_text(root_fd, entry.file, MAX_FILE_BYTES)
                if text is None:
                    raise CommandError(f"recording is missing {entry.file}")
                texts[entry.file] = text
            read.text = texts[entry.file]
        reads.append(read)
    return reads
