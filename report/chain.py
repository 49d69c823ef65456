"""Restart chains: which job continues a walltime-limited one, and what a run is called.

Policy (seed: "Chain-restart TIMEOUTs are normal, NOT failures"): a TIMEOUT job's successor is,
in order of confidence,

1. a PENDING/RUNNING job whose ``depends_on`` names it (the ``afterany`` chain as submitted);
2. a remembered edge (predecessor -> successor) from an earlier sweep whose successor is still
   PENDING/RUNNING: SLURM removes a fulfilled dependency from ``Dependency=``, so once the
   successor starts the edge is visible only in memory;
3. a fallback match: a PENDING/RUNNING job with the same name, user and workdir that was
   submitted before the predecessor ended (plus :data:`SUBMIT_SLACK`), i.e. queued by the
   chain, not relaunched by hand afterwards.

Only a job that is itself TIMEOUT gets a successor. Ties go to the earliest-submitted
candidate (then the lowest id), which is the next link of the chain.

A run's attempts share its *name stem* (restart suffixes stripped); what a failed attempt
leaves for the next one to compare with lives in :mod:`report.memory`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from probes.models import JobState, SchedulerRecord

SUBMIT_SLACK = timedelta(minutes=5)
"""Chains submitted by the job's own epilogue land a little after ``end_time``."""

_LIVE = frozenset({JobState.PENDING, JobState.RUNNING})

# Attempt markers a relaunch appends to a run name: "-r2", "_restart3", "-resume", "-try2", "-v2"
# is deliberately NOT here (a new version is a new run, not a retry).
_ATTEMPT_SUFFIX = re.compile(
    r"(?:[-_.](?:r|re|retry|try|attempt|restart|resume|resumed|requeue|cont|part)\d*|[-_.]\d+)$",
    re.IGNORECASE,
)


def name_stem(name: str) -> str:
    """Return the run name without restart/attempt suffixes (``rl-x-r3`` -> ``rl-x``)."""
    stem = name.strip()
    while True:
        shorter = _ATTEMPT_SUFFIX.sub("", stem)
        if shorter == stem or not shorter:
            return stem.lower()
        stem = shorter


def submit_order(record: SchedulerRecord) -> tuple[datetime, int, str]:
    """Sort key: submitted first (naive times as UTC), then the lower numeric id."""
    submitted = record.submit_time or datetime.max.replace(tzinfo=None)
    if submitted.tzinfo is not None:
        submitted = submitted.replace(tzinfo=None) - (submitted.utcoffset() or timedelta())
    digits = int(record.job_id) if record.job_id.isdigit() else 0
    return submitted, digits, record.job_id


def _fallback_match(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    if (candidate.name, candidate.user, candidate.workdir) != (
        record.name, record.user, record.workdir,
    ):
        return False
    if record.end_time is None or candidate.submit_time is None:
        return False
    return candidate.submit_time <= record.end_time + SUBMIT_SLACK


def find_successor(
    record: SchedulerRecord,
    records: Sequence[SchedulerRecord],
    known_edges: Mapping[str, str],
) -> str | None:
    """Return the id of the PENDING/RUNNING job continuing TIMEOUT ``record``, else None."""
    if record.state is not JobState.TIMEOUT:
        return None
    live = [r for r in records if r.state in _LIVE and r.job_id != record.job_id]
    explicit = sorted((r for r in live if record.job_id in r.depends_on), key=submit_order)
    if explicit:
        return explicit[0].job_id
    remembered = known_edges.get(record.job_id)
    if remembered is not None and any(r.job_id == remembered for r in live):
        return remembered
    fallback = sorted((r for r in live if _fallback_match(record, r)), key=submit_order)
    return fallback[0].job_id if fallback else None


def dependency_edges(records: Sequence[SchedulerRecord]) -> dict[str, str]:
    """Return predecessor -> successor edges visible in ``depends_on`` this sweep."""
    edges: dict[str, str] = {}
    for record in sorted(records, key=submit_order):
        for predecessor in record.depends_on:
            # The earliest-submitted dependant is the chain's next link; later ones are
            # extra jobs that merely wait for the same predecessor.
            edges.setdefault(predecessor, record.job_id)
    return edges
