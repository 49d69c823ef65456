"""What a SLURM sweep asks its collector for: built before the answer is read, so from the
standard library and the roster alone.

Policy: nothing here imports the fold stack (``probes.logs``, ``probes.slurm.assemble``,
``probes.slurm.cursors``). A cold ``jobtables sweep`` or ``job`` sends its request first and
imports what folds the answer while the cluster runs it (``probes.slurm.early.load_fold_stack``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from probes.config import ReplayCluster, SlurmCluster
from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import expand_roots, run_templates

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState

FileCluster = SlurmCluster | ReplayCluster


def collector_request(
    records: Sequence[SchedulerRecord],
    cluster: FileCluster,
    *,
    offsets: Mapping[str, int] | None = None,
    cursors: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The collector request for ``records``: paths only, as data (never a command line).

    With ``cursors`` (job id -> the cursor its last read gave, the bot's warm sweeps), each
    RUNNING job's log is resumed from its cursor (``probes.remote.logread``; none yet: a
    tracked cold read); an ended job is read whole."""
    jobs = []
    for r in records:
        def roots(templates: Sequence[str], r: SchedulerRecord = r) -> list[str]:
            return expand_roots(templates, workdir=r.workdir, name=r.name, job_id=r.job_id,
                                user=r.user)

        job: dict[str, Any] = {
            "id": r.job_id,
            "user": r.user,  # the collector reads only files this user owns
            "stdout": r.stdout_path,
            "workdir": r.workdir,
            "offset": (offsets or {}).get(r.stdout_path or "", 0),
            "completed": r.state is JobState.COMPLETED,
            "checkpoint_roots": roots(cluster.checkpoint_roots),
            # Of those, the run's own (``{name}``/``{job_id}``): their steps count whoever
            # the file system says owns them (probes.remote.tree).
            "run_checkpoint_roots": roots(run_templates(cluster.checkpoint_roots)),
            "trial_roots": roots(cluster.trial_roots),
        }
        if r.stderr_path:  # sbatch -e: its faults (or its whole log) are there
            job["stderr"] = r.stderr_path
        if r.command:  # its save flags (--ckpt_path ...) name checkpoint dirs (probes.remote.tree)
            job["command"] = r.command[:16384]
        if cursors is not None and r.state is JobState.RUNNING:
            job["cursor"] = cursors.get(r.job_id)
        jobs.append(job)
    request: dict[str, Any] = {
        "tail_bytes": cluster.tail_bytes,
        "min_lines": cluster.min_log_lines,
        # trials are counted whole, bounded by time (probes.remote.trial_roots)
        "trial_budget_s": 20.0,
        "jobs": jobs,
    }
    if isinstance(cluster, SlurmCluster):
        # The collector answers before the command's own timeout (with what it has read).
        request.update(read_timeout_s=cluster.read_timeout_s,
                       deadline_s=0.8 * min(cluster.command_timeout_s, cluster.timeout_s),
                       answer_budget=cluster.answer_budget_bytes)
    return request


def request_cursors(prior: Mapping[str, LogState]) -> dict[str, Any]:
    """The collector's ``cursors`` (job id -> cursor) for the stored states. Python mode: a
    path's bytes that are not UTF-8 go as they are (the request's JSON escapes them), not as
    the stored form (``LogCursor.path``), so the collector knows the file again."""
    return {job_id: state.cursor.model_dump() for job_id, state in prior.items()}
