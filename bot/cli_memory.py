"""What a one-shot ``jobtables sweep`` or ``job`` of a Kubernetes cluster leaves for the next.

Policy (CONTRACT §6 ``silent-wedge``: a job record that disappeared): a Kubernetes probe knows a
job vanished by remembering the jobs its last sweep saw live (``KubernetesProbe.remembered``).
The bot keeps that memory in Redis (``bot.sweep_state``); each CLI command is a new process, so
without a memory of its own ``jobtables sweep`` never reported a job deleted since the last one.
It is kept here as one JSON file per cluster under :func:`state_dir`, 0600 in a 0700
directory, named by a hash of what the cluster is: its name, the kubeconfig and context, the
API server that context names, the namespace and the label selector (a config pointed at
another server or selection starts afresh, so it never reports the old one's jobs vanished).
``sweep`` writes it after a sweep that read the cluster; ``job`` only reads it (no sweep).
A memory older than :data:`MAX_MEMORY_AGE_S` is not compared with: CLI sweeps come when someone
runs one, and a Job that completed in a long gap may have been garbage-collected by its
``ttlSecondsAfterFinished`` since (gone, but no wedge: a false FAILED would say resubmit).
The memory never fails a command: a file that cannot be read is no memory, one that cannot be
written is logged and the next command compares with the last one that was. It is used only
when it is the user's own: a state dir another user owns or others may write in (a shared
``JOBTABLES_STATE_DIR``), or a memory file that is a link, another user's or writable by
others, could hold a memory someone planted (jobs that never ran reported vanished, real ones
marked cancelled): such a dir is warned of once (one line on stderr) and neither read nor
written, such a file is no memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.logs import get_logger
from probes.config import KubernetesCluster

log = get_logger(__name__)

STATE_DIR_ENV = "JOBTABLES_STATE_DIR"
MAX_MEMORY_BYTES = 64 * 1024 * 1024
"""A memory file larger than this is no memory (the probe's own is a few KB per live job)."""
MAX_MEMORY_AGE_S = 3600.0
"""A memory written longer ago than this is no memory (an hour: two of the bot's sweeps)."""


def state_dir() -> Path:
    """``$JOBTABLES_STATE_DIR``, else ``$XDG_STATE_HOME/jobtables``, else
    ``~/.local/state/jobtables`` (the XDG base directory rule for state)."""
    if named := os.environ.get(STATE_DIR_ENV):
        return Path(named).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or "~/.local/state"
    return Path(base).expanduser() / "jobtables"


class CliProbeMemory:
    """The file-backed memory of the CLI's Kubernetes probes (``bot.sweep.Sweeper``'s
    ``probe_memory``)."""

    def __init__(self, directory: Path | None = None, *, save: bool = True) -> None:
        self._dir = directory or state_dir()
        self._save = save
        self._warned = False

    def load(self, cluster: KubernetesCluster) -> Any:
        """The memory the cluster's last CLI sweep left (``None``: none, unreadable, or not
        the user's own: :meth:`_refused`)."""
        path = self._path(cluster)
        try:
            if self._refused(cluster):
                return None
            data, mtime = _read_own(path)
            if time.time() - mtime > MAX_MEMORY_AGE_S:
                return None
            return json.loads(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("CLI probe memory not read", cluster=cluster.name, error=str(exc))
            return None

    def save(self, cluster: KubernetesCluster, memory: Any) -> None:
        """Replace the cluster's memory (written whole, then renamed into place)."""
        if not self._save:
            return
        path = self._path(cluster)
        try:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if self._refused(cluster):
                return
            fd, temp = tempfile.mkstemp(dir=self._dir, prefix=".k8s-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(memory, out)
                os.replace(temp, path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except (OSError, TypeError, ValueError) as exc:
            log.warning("CLI probe memory not saved", cluster=cluster.name, error=str(exc))

    def _refused(self, cluster: KubernetesCluster) -> bool:
        """Whether the state dir is not the user's own (raises ``FileNotFoundError`` when
        absent). Another user's dir, or one others may write in, could hold a memory they
        planted (jobs that never ran reported vanished): warned of once, then no memory."""
        why = _not_own(os.stat(self._dir), "a directory")
        if why and not self._warned:
            self._warned = True
            log.warning(f"CLI probe memory not used: state dir {self._dir} is {why}"
                        f" (set {STATE_DIR_ENV} to a directory of your own)",
                        cluster=cluster.name)
        return bool(why)

    def _path(self, cluster: KubernetesCluster) -> Path:
        identity = [cluster.name, cluster.kubeconfig or os.environ.get("KUBECONFIG") or "",
                    cluster.context, _server(cluster), cluster.namespace,
                    cluster.label_selector]
        digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]
        return self._dir / f"k8s-{digest}.json"


def _not_own(info: os.stat_result, kind: str) -> str:
    """Why a state dir or memory file is not the user's own ('' when it is)."""
    is_kind = stat.S_ISDIR if kind == "a directory" else stat.S_ISREG
    if not is_kind(info.st_mode):
        return f"not {kind}"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def _read_own(path: Path) -> tuple[bytes, float]:
    """``(bytes, mtime)`` of the memory file if it is the user's own regular file (not a
    link, a FIFO, another user's or one others may write) of at most
    :data:`MAX_MEMORY_BYTES`; else raises (``FileNotFoundError`` when absent, ``ValueError``
    saying why)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if why := _not_own(info, "a regular file"):
            raise ValueError(f"{path}: {why}")
        data = fh.read(MAX_MEMORY_BYTES + 1)
    if len(data) > MAX_MEMORY_BYTES:
        raise ValueError(f"{path}: larger than {MAX_MEMORY_BYTES} bytes")
    return data, info.st_mtime


def _server(cluster: KubernetesCluster) -> str:
    """The API server URL the cluster's kubeconfig context names ('' when it cannot be read:
    the credentials' load says why, in the sweep)."""
    import yaml  # type: ignore[import-untyped]  # no stubs installed

    from probes.local_files import read_regular

    paths = cluster.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    docs = []
    for path in filter(None, paths.split(os.pathsep)):
        try:
            doc = yaml.safe_load(read_regular(os.path.expanduser(path)))
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    context = cluster.context or next(
        (d["current-context"] for d in docs if isinstance(d.get("current-context"), str)), None)
    named = _entry(docs, "contexts", context).get("context") or {}
    found = _entry(docs, "clusters", named.get("cluster") if isinstance(named, dict) else None)
    server = (found.get("cluster") or {}).get("server") if isinstance(found, dict) else None
    return server if isinstance(server, str) else ""


def _entry(docs: list[dict[str, Any]], section: str, name: object) -> dict[str, Any]:
    """The first ``section`` entry called ``name`` in the kubeconfig files (kubectl's merge:
    the first file that names it wins)."""
    for doc in docs:
        for entry in doc.get(section) or ():
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry
    return {}
