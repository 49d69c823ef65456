"""A RUNNING job's neighbours for ``jobtables job``: its user's jobs of other names that ran
from its workdir, whose saves may lie under the same default checkpoint roots.

Policy: the sweep keeps each run's banked step to the directories it claims
(``probes.slurm.shared_roots``), and one claim is progress: only this run's log reached the
steps and every other run there is known to be below them. The sweep reads every job's log,
so it knows the neighbours' progress; ``jobtables job`` read none of theirs, so a directory
placed by progress banked for neither (a shared-workdir torchtitan run read ``banked_step``
null in ``job``, 200 in the sweep). So the neighbours' logs are read too, in command 2 itself
(issue 12: at most two commands): the collector lists them (:func:`neighbour_argv`) and reads
their logs on the login node in the same trip (:func:`neighbour_request`,
``probes.remote.neighbour_listing``), with no checkpoint or trial root: their progress only,
never their saves. At most :data:`NEIGHBOURS_READ` are read (running ones first); an unread
neighbour's progress stays unknown, which only ever banks less (a claim needs every other run
known). The probe parses the same listing with the collector's own parser, so both sides name
the same jobs and log paths.

The same listing holds the run's own earlier attempts (its name, ended, a lower id, any
workdir): the latest :data:`ATTEMPTS_READ` are read in that trip too, whatever the roots
(:func:`parse_attempts`), so the one-job read compares the run's printed setting with its
latest ended attempt's, as the sweep does (a relaunch in a new setting is ``deep-probe``).
"""

from __future__ import annotations

from typing import Any

from probes.models import JobState, SchedulerRecord
from probes.remote.neighbour_listing import (
    ATTEMPTS_READ,
    NEIGHBOUR_FIELDS,
    NEIGHBOURS_READ,
    attempt_rows,
    neighbour_rows,
)

__all__ = ["ATTEMPTS_READ", "NEIGHBOURS_READ", "neighbour_argv", "neighbour_request",
           "parse_attempts", "parse_neighbours"]

_STATES = frozenset(state.value for state in JobState)


def neighbour_argv(nonce: str, user: str) -> list[str]:
    """``squeue -O`` of the user's jobs: id (``A_T`` for an array task), own id, state,
    workdir, raw ``--output``, nodes, and the name last (it may hold anything), each record
    ended by ``<N:nonce>``."""
    head = ",".join(f"{field}:0<F:{nonce}>" for field in NEIGHBOUR_FIELDS)
    return ["squeue", "-h", "-t", "all", "-u", user, "-O", f"{head},Name:0<N:{nonce}>"]


def neighbour_request(command: int, nonce: str, record: SchedulerRecord, *,
                      neighbours: bool = True) -> dict[str, Any]:
    """The collector request's ``neighbours`` section: read the logs of the neighbours that
    scheduler command ``command`` (:func:`neighbour_argv`) lists (none unless ``neighbours``)
    and of the job's latest earlier attempts, in the same trip."""
    return {"command": command, "nonce": nonce, "id": record.job_id, "name": record.name,
            "workdir": record.workdir, "user": str(record.user),
            "read": NEIGHBOURS_READ if neighbours else 0, "attempts": ATTEMPTS_READ}


def _records(rows: list[dict[str, Any]], record: SchedulerRecord) -> list[SchedulerRecord]:
    return [SchedulerRecord(
        cluster=record.cluster, job_id=row["id"], name=row["name"], user=record.user,
        state=JobState(row["state"]) if row["state"] in _STATES else JobState.UNKNOWN,
        workdir=row["workdir"], stdout_path=row["stdout"], nodes=row["nodes"] or None,
        labels={"slurm_job_id": row["own"]} if row["own"] else {})
        for row in rows]


def parse_neighbours(text: str, nonce: str, record: SchedulerRecord) -> list[SchedulerRecord]:
    """The jobs of :func:`neighbour_argv`'s listing that ran from ``record``'s workdir under
    another name, each with its log path where squeue's pattern gives it (else none)."""
    return _records(neighbour_rows(text, neighbour_request(0, nonce, record)), record)


def parse_attempts(text: str, nonce: str, record: SchedulerRecord) -> list[SchedulerRecord]:
    """The earlier attempts of ``record`` the collector read from the same listing (its name,
    ended, a lower id; the latest :data:`ATTEMPTS_READ`), each with its log path."""
    return _records(attempt_rows(text, neighbour_request(0, nonce, record)), record)
