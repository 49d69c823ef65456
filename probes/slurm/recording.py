"""Writing a SLURM recording: the replay directory format of ``probes/replay.py``.

Policy: the files hold only the kept (selected) jobs, each scheduler object and scontrol line
verbatim, so a recording carries no other user's jobs and replays through the same parsers.
``SlurmProbe.capture`` gathers; ``record`` writes what it captured.

A recording holds other users' job names, paths and log tails, so it is written for its owner
only: the directory 0700, each file 0600, every file opened below the directory's own
descriptor with ``O_NOFOLLOW`` (a symlink planted inside DIR is refused, never written
through). A non-empty DIR that is not a recording (no ``cluster.json`` of this format) is
refused before anything connects. Nothing from the environment is captured: the files hold
what the scheduler and the collector answered, and the meta below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.config import SlurmCluster
from probes.errors import ProbeError
from probes.ids import scheduler_job
from probes.models import SchedulerRecord
from probes.slurm.parse import record_from_squeue
from probes.slurm.probe import SlurmProbe
from probes.slurm.scontrol import parse_scontrol_all
from probes.slurm.snapshot import Snapshot
from probes.slurm.transport import RunnerFactory


def write_recording(dest: Path, meta: dict[str, Any], snap: Snapshot, keep: set[str],
                    collected: Mapping[str, Any]) -> None:
    """Write one recording (``cluster.json``, ``squeue.json``, ``scontrol.txt`` ...).

    Only the ``keep`` jobs' objects and scontrol lines are written, each verbatim; a cluster
    that only speaks ``squeue -o`` gets a synthesized ``squeue --json``.
    """
    name = str(meta["name"])
    now = datetime.fromisoformat(str(meta["recorded_at"]).replace("Z", "+00:00"))
    if snap.document is not None:
        squeue = _only_jobs(snap.document, keep, name, now)
    else:
        squeue = _synthesized_squeue([r for r in snap.records if r.job_id in keep])
    lines = [ln for ln in snap.scontrol.splitlines() if parse_scontrol_all(ln).keys() & keep]
    files = {"cluster.json": _json(meta), "squeue.json": _json(squeue),
             "scontrol.txt": "".join(f"{ln}\n" for ln in lines),
             "collected.json": _json({"protocol": 1, "jobs": collected})}
    if snap.sacct:
        files["sacct.json"] = _json(_only_jobs(json.loads(snap.sacct), keep, name, now))
    fd = _open_dest(dest)
    try:
        for file_name, text in files.items():
            _write_private(fd, file_name, text)
        for file_name in RECORDING_FILES - files.keys():  # an earlier recording's, else mixed in
            with contextlib.suppress(FileNotFoundError):
                os.unlink(file_name, dir_fd=fd)
    finally:
        os.close(fd)


RECORDING_FILES = frozenset({"cluster.json", "squeue.json", "scontrol.txt", "collected.json",
                             "sacct.json"})
"""Every file a recording may hold: re-recorded in place, those this one does not write are
removed (a cluster's ``sacct.json`` from last time would replay as this recording's)."""


def check_dest(dest: Path) -> None:
    """Refuse a DIR that is a symlink, not a directory, or non-empty and not a recording."""
    if dest.is_symlink():
        raise RecordingRefused(f"{dest} is a symbolic link: not written through")
    if not dest.exists():
        return
    if not dest.is_dir():
        raise RecordingRefused(f"{dest} exists and is not a directory")
    if any(dest.iterdir()) and not _is_recording(dest / "cluster.json"):
        raise RecordingRefused(f"{dest} is not empty and is not a recording: refusing to"
                               " write into it")


def _is_recording(path: Path) -> bool:
    try:
        meta = json.loads(path.read_text(encoding="utf-8")) if not path.is_symlink() else None
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == 1 and "recorded_at" in meta


def _open_dest(dest: Path) -> int:
    """DIR created 0700 (or tightened to it), opened without following a link."""
    check_dest(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            dest.mkdir(mode=0o700)
        fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:  # a parent that is a file, no permission, a read-only or full disk
        raise RecordingRefused(f"cannot create {dest}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, 0o700)
    except OSError as exc:
        os.close(fd)
        raise RecordingRefused(f"cannot create {dest}: {exc.strerror or exc}") from exc
    return fd


def _write_private(dir_fd: int, name: str, text: str) -> None:
    """One file 0600 under ``dir_fd``; a symlink (or anything not a regular file) there is
    refused, never written through."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600,
                     dir_fd=dir_fd)
    except OSError as exc:
        raise RecordingRefused(f"cannot write {name} in the recording: {exc}") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # a hard link: someone else's
            raise RecordingRefused(f"{name} in the recording is not a file of its own")
        os.fchmod(fd, 0o600)
        fh.truncate(0)
        fh.write(text)


def _json(data: Any) -> str:
    return json.dumps(data, indent=1) + "\n"


class RecordingRefused(ProbeError):
    """DIR cannot safely hold a recording (the message says why)."""


def _only_jobs(data: Mapping[str, Any], keep: set[str], cluster: str, now: datetime,
               ) -> dict[str, Any]:
    """The scheduler's parsed JSON with only the kept jobs' objects (each verbatim)."""
    jobs = []
    for job in data.get("jobs") or []:
        parsed = record_from_squeue(cluster, job, now) if isinstance(job, dict) else None
        if parsed is not None and parsed.job_id in keep:
            jobs.append(job)
    return {**data, "jobs": jobs}


def _synthesized_squeue(records: Sequence[SchedulerRecord]) -> dict[str, Any]:
    """A v0.0.38-shaped ``squeue --json`` for clusters that only speak ``squeue -o``."""
    def epoch(at: datetime | None) -> int:
        return int(at.timestamp()) if at else 0

    jobs = [{
        "job_id": int(scheduler_job(r.job_id)), "name": r.name,
        "user_name": r.user, "job_state": r.state.value, "state_reason": r.reason or "None",
        "submit_time": epoch(r.submit_time), "eligible_time": epoch(r.eligible_time),
        "start_time": epoch(r.start_time),
        "end_time": epoch(r.end_time),
        "time_limit": r.time_limit_s // 60 if r.time_limit_s is not None else None,
        "current_working_directory": r.workdir or "", "standard_output": r.stdout_path or "",
        "dependency": r.dependency or "", "command": r.command or "",
    } for r in records]
    return {"meta": {"plugin": {"type": "jobtables", "name": "synthesized from squeue -o"}},
            "errors": [], "jobs": jobs}


async def record(
    cluster: SlurmCluster,
    dest: Path,
    *,
    aliases: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
    runner_factory: RunnerFactory | None = None,
) -> Path:
    """Capture a live cluster into a replay directory (format: ``probes/slurm/replay.py``).

    Only the selected jobs (configured users, active or recent) are written, each job object
    and scontrol line verbatim, so a recording carries no other user's jobs. Raises
    ``ProbeError`` when the cluster cannot be read.
    """
    check_dest(dest)  # before anything connects
    probe = SlurmProbe(cluster, aliases=aliases, clock=clock, runner_factory=runner_factory)
    cap = await probe.capture()
    meta = {"format": 1, "name": cluster.name, "kind": "slurm",
            "recorded_at": cap.now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "users": cap.users, "slurm_version": cap.snapshot.slurm_version}
    await asyncio.to_thread(write_recording, dest, meta, cap.snapshot, cap.keep, cap.collected)
    return dest
