"""A RUNNING job's neighbours for ``jobtables job``: its user's jobs of other names that ran
from its workdir, whose saves may lie under the same default checkpoint roots.

Policy: the sweep keeps each run's banked step to the directories it claims
(``probes.slurm.shared_roots``), and one claim is progress: only this run's log reached the
steps and every other run there is known to be below them. The sweep reads every job's log,
so it knows the neighbours' progress; ``jobtables job`` read none of theirs, so a directory
placed by progress banked for neither (a shared-workdir torchtitan run read ``banked_step``
null in ``job``, 200 in the sweep). So the neighbours' logs are read too, in one more
collector round trip, with no checkpoint or trial root: their progress only, never their
saves. At most :data:`NEIGHBOURS_READ` are read (running ones first); an unread neighbour's
progress stays unknown, which only ever banks less (a claim needs every other run known).
"""

from __future__ import annotations

import os

from probes.models import JobState, SchedulerRecord
from probes.slurm.parse import expand_stdout, stdout_final

NEIGHBOURS_READ = 16
"""Neighbours whose logs one ``jobtables job`` reads at most (a grid's cells share a workdir)."""
_FIELDS = ("JobArrayID", "JobID", "State", "WorkDir", "STDOUT", "NodeList")
_STATES = frozenset(state.value for state in JobState)


def neighbour_argv(nonce: str, user: str) -> list[str]:
    """``squeue -O`` of the user's jobs: id (``A_T`` for an array task), own id, state,
    workdir, raw ``--output``, nodes, and the name last (it may hold anything), each record
    ended by ``<N:nonce>``."""
    head = ",".join(f"{field}:0<F:{nonce}>" for field in _FIELDS)
    return ["squeue", "-h", "-t", "all", "-u", user, "-O", f"{head},Name:0<N:{nonce}>"]


def parse_neighbours(text: str, nonce: str, record: SchedulerRecord) -> list[SchedulerRecord]:
    """The jobs of :func:`neighbour_argv`'s listing that ran from ``record``'s workdir under
    another name, each with its log path where squeue's pattern gives it (else none)."""
    workdir = os.path.normpath(record.workdir or "/")
    found = []
    for chunk in text.split(f"<N:{nonce}>")[:-1]:
        fields = chunk.lstrip("\n").split(f"<F:{nonce}>")
        if len(fields) != len(_FIELDS) + 1:
            continue
        key, own, state, where, stdout, nodes, name = fields
        key, own, state, nodes = key.strip(), own.strip(), state.strip(), nodes.strip()
        if (key == record.job_id or name == record.name or not where
                or os.path.normpath(where) != workdir):
            continue
        raw = SchedulerRecord(
            cluster=record.cluster, job_id=key, name=name, user=record.user,
            state=JobState(state) if state in _STATES else JobState.UNKNOWN, workdir=where,
            stdout_path=stdout or None, nodes=nodes or None,
            labels={"slurm_job_id": own} if "_" in key and own.isdigit() else {})
        filled = expand_stdout(raw)
        found.append(filled if stdout_final(raw, filled)
                     else raw.model_copy(update={"stdout_path": None}))
    return found


def to_read(neighbours: list[SchedulerRecord]) -> list[SchedulerRecord]:
    """The neighbours whose logs are read: started, with a log path, running ones first."""
    started = [r for r in neighbours
               if r.state is not JobState.PENDING and r.stdout_path is not None]
    started.sort(key=lambda r: r.state is not JobState.RUNNING)
    return started[:NEIGHBOURS_READ]
