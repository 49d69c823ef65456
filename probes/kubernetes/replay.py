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
                   "message": "..."}} when the Role refused listing JobSets or the list
                   failed on its own (a 5xx or 429 past its retry, an answer no object)
    pytorchjobs.json  the kubeflow.org/v1 PyTorchJobList, or {"error": {...}} when its list
                   was refused or failed (absent, as in a recording made before: none)
    rayjobs.json   the ray.io/v1 RayJobList, or {"error": {...}}, as pytorchjobs.json
    tfjobs.json, mpijobs.json  the kubeflow.org/v1 TFJobList and MPIJobList, as pytorchjobs.json
    pods.json      the v1 PodList (the selected jobs' pods only)
    logs.json      {"reads": [...]}: each pod log read in order, {"pod", "container",
                   "previous", "cut", "file": "log-0001.txt"} or {"pod", "container",
                   "previous", "error": {"type", "message"}}
    log-0001.txt   that read's text, verbatim

The cluster's settings that shaped the sweep (``users``, ``user_keys``, ``recent_hours``,
``min_log_lines``, ``benign_patterns``) are the recording's; the replay cluster's own
``benign_patterns`` are added to the recorded ones (a fix can be tried on a recording).

Files are read as ``probes.recording_files`` says (no link followed, a regular file only, at
most :data:`MAX_FILE_BYTES`, all together at most :data:`MAX_RECORDING_BYTES`); a file that
is missing, not UTF-8 or not of its shape (an object the client's model refuses, a log file
name that is no ``log-NNNN.txt``) names itself in the cluster's ``unreachable`` detail.
"""

from __future__ import annotations

import asyncio
import json
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
from probes.kubernetes.recorded_patterns import unsafe_pattern
from probes.models import ClusterFacts
from probes.recording_files import LOG_FILE, open_recording, read_text

FORMAT = 1
MAX_FILE_BYTES = 512 << 20
"""The largest recording file read (each log read is bounded live by ``tail_bytes``)."""
MAX_RECORDING_BYTES = 1 << 30
"""The most a recording's files hold together: ``logs.json`` may name any number of log
files, each kept whole for the sweep (a hostile recording of many files each just under
:data:`MAX_FILE_BYTES` would fill the bot's memory)."""


class KubernetesReplay:
    """Reads a recorded Kubernetes cluster directory (see the module docstring)."""

    def __init__(self, cluster: ReplayCluster, *, aliases: Mapping[str, str] | None = None,
                 **_: Any) -> None:
        self._cluster = cluster
        self._aliases = dict(aliases or {})

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        try:
            meta, answers = await asyncio.to_thread(load_recording, Path(self._cluster.path))
            live, at, left_out = recorded_cluster(meta, self._cluster)
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
        said = "; ".join([f"recorded {meta['recorded_at']} from {meta.get('name', '?')}",
                          *left_out])
        return facts.model_copy(update={
            "kind": "replay", "detail": f"{said}; {facts.detail}" if facts.detail else said})

    def _unreachable(self, detail: str) -> ClusterFacts:
        return ClusterFacts(name=self._cluster.name, kind="replay", status="unreachable",
                            detail=detail, collected_at=datetime.now(UTC))

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
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
                     ) -> tuple[KubernetesCluster, datetime, list[str]]:
    """The cluster the recorded sweep read, under the replay's name, its time, and what of
    the recorded ``benign_patterns`` is not replayed (``probes.kubernetes.recorded_patterns``:
    one that may not end on a hostile line, unless the replay cluster names it too)."""
    try:
        sweep = _Meta.model_validate(meta)
        at = sweep.recorded_at if sweep.recorded_at.tzinfo else sweep.recorded_at.replace(
            tzinfo=UTC)
        own = replay.benign_patterns
        why = {p: unsafe_pattern(p) for p in sweep.benign_patterns if p not in own}
        kept = tuple(p for p in sweep.benign_patterns if not why.get(p))
        cluster = KubernetesCluster(
            name=replay.name, users=sweep.users, user_keys=sweep.user_keys,
            recent_hours=sweep.recent_hours, min_log_lines=sweep.min_log_lines,
            benign_patterns=tuple(dict.fromkeys(kept + own)))
    except ValidationError as exc:
        said = " ".join(str(exc).split())[:300]
        raise CommandError(f"recording file cluster.json is malformed: {said}") from exc
    left_out = [f"benign pattern {p[:100]!r} of cluster.json not replayed ({reason}: it may "
                "not end on a long line; name it in the replay cluster's benign_patterns to "
                "run it)" for p, reason in why.items() if reason]
    return cluster, at, left_out


def load_recording(root: Path) -> tuple[dict[str, Any], Answers]:
    """A Kubernetes recording's ``cluster.json`` and answers (the module docstring's files)."""
    files = _Files(open_recording(root))
    try:
        meta = files.parsed("cluster.json")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get(
                "kind") != "kubernetes":
            raise CommandError(f"{root}/cluster.json: not a Kubernetes recording of format "
                               f"{FORMAT}")
        answers = Answers(jobs=_objects(files, "jobs.json", "V1Job"),
                          pods=_objects(files, "pods.json", "V1Pod"),
                          reads=_reads(files))
        for kind in _LISTED_KINDS:
            _listed(files, answers, kind)
        return meta, answers
    finally:
        os.close(files.root_fd)


class _Files:
    """The recording's files as read so far: each bounded by :data:`MAX_FILE_BYTES`, all
    together by :data:`MAX_RECORDING_BYTES`."""

    def __init__(self, root_fd: int) -> None:
        self.root_fd = root_fd
        self.left = MAX_RECORDING_BYTES

    def text(self, name: str) -> str | None:
        """The file's text (``None``: absent), counted against what the recording may hold."""
        try:
            size = os.stat(name, dir_fd=self.root_fd, follow_symlinks=False).st_size
        except OSError:
            size = 0  # absent or unreadable: read_text says which
        if size > self.left:
            raise self._over(name)
        try:
            text = read_text(self.root_fd, name, min(MAX_FILE_BYTES, self.left))
        except CommandError:
            if self.left < MAX_FILE_BYTES and size <= MAX_FILE_BYTES:
                raise self._over(name) from None  # grew past what was left
            raise
        self.left -= max(size, len(text or ""))
        return text

    def parsed(self, name: str, *, optional: bool = False) -> Any:
        """The file's JSON; absent (``None`` if ``optional``) or not JSON:
        :class:`CommandError` naming it."""
        text = self.text(name)
        if text is None:
            if optional:
                return None
            raise CommandError(f"recording is missing {name}")
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise CommandError(f"recording file {name} is unreadable: {exc}") from exc

    @staticmethod
    def _over(name: str) -> CommandError:
        return CommandError(f"recording file {name}: the recording files together are over "
                            f"the {MAX_RECORDING_BYTES} bytes a recording may hold")


def _items(files: _Files, name: str, data: Any = None) -> list[dict[str, Any]]:
    """A List file's items (``data``: its JSON, already read), each an object with its
    metadata's name."""
    data = files.parsed(name) if data is None else data
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(item, dict) and isinstance(item.get("metadata"), dict)
            and isinstance(item["metadata"].get("name"), str) for item in items):
        raise CommandError(f"recording file {name}: not a Kubernetes list (expected "
                           '{"items": [objects with metadata.name]})')
    return items


def _objects(files: _Files, name: str, klass: str) -> list[Any]:
    """A List file's items as the client's models, as a live list is read."""
    items = _items(files, name)
    try:
        return [from_api_json(item, klass) for item in items]
    except (ApiException, AttributeError, TypeError, ValueError, KeyError,
            RecursionError) as exc:
        why = " ".join(str(exc).split())
        raise CommandError(f"recording file {name}: an item is no {klass}: "
                           f"{type(exc).__name__}: {why}"[:300]) from exc


_LISTED_KINDS = ("jobsets", "pytorchjobs", "rayjobs", "tfjobs", "mpijobs")
"""The custom kinds a recording may hold, each in ``<kind>.json`` (absent: none listed)."""


def _listed(files: _Files, answers: Answers, kind: str) -> None:
    """``<kind>.json``: the objects of ``kind`` listed (``answers.<kind>``), or the refusal the
    listing got (``answers.<kind>_error``); absent: none listed."""
    name = f"{kind}.json"
    data = files.parsed(name, optional=True)
    if data is None:
        return
    if isinstance(data, dict) and "error" in data:
        setattr(answers, f"{kind}_error", _error(name, data["error"]))
        return
    setattr(answers, kind, _items(files, name, data))


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


def _reads(files: _Files) -> list[LogRead]:
    """``logs.json``'s reads, each with its log file's text (absent: no log was read)."""
    data = files.parsed("logs.json", optional=True)
    if data is None:
        return []
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
                text = files.text(entry.file)
                if text is None:
                    raise CommandError(f"recording is missing {entry.file}")
                texts[entry.file] = text
            read.text = texts[entry.file]
        reads.append(read)
    return reads
