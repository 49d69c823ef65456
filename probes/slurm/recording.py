"""Writing a SLURM recording: the replay directory format of ``probes/replay.py``.

Policy: the files hold only the kept (selected) jobs, each scheduler object and scontrol line
verbatim, so a recording carries no other user's jobs and replays through the same parsers.
``SlurmProbe.capture`` gathers; ``record`` writes what it captured.

A recording holds other users' job names, paths and log tails, so it is written for its owner
only (``probes.recording_files``: the directory 0700, each file 0600, no planted link written
through, a non-empty DIR that is not a recording refused before anything connects). Nothing
from the environment is captured: the files hold what the scheduler and the collector
answered, and the meta below.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.config import SlurmCluster
from probes.ids import scheduler_job
from probes.models import SchedulerRecord
from probes.recording_files import RecordingRefused, check_dest, to_json, write_files
from probes.slurm.parse import record_from_squeue
from probes.slurm.probe import SlurmProbe
from probes.slurm.scontrol import parse_scontrol_all
from probes.slurm.snapshot import Snapshot
from probes.slurm.transport import RunnerFactory

__all__ = ["RecordingRefused", "check_dest", "record", "write_recording"]


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
    files = {"cluster.json": to_json(meta), "squeue.json": to_json(squeue),
             "scontrol.txt": "".join(f"{ln}\n" for ln in lines),
             "collected.json": to_json({"protocol": 1, "jobs": collected})}
    if snap.sacct:
        files["sacct.json"] = to_json(_only_jobs(json.loads(snap.sacct), keep, name, now))
    write_files(dest, files)


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
