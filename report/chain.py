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

Attempts of one run share a *memory key* ``cluster:name stem``; a failed attempt leaves a
*failure signature* ``job_id|kind|normalised text|elapsed_s`` (ids, numbers, hex and paths
normalised away) so the next attempt can tell a recurring failure from a transient one; attempts
seen together in one sweep are compared too (``earlier_attempts``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from probes.models import JobFacts, JobState, SchedulerRecord
from report.findings import first_fault

SUBMIT_SLACK = timedelta(minutes=5)
"""Chains submitted by the job's own epilogue land a little after ``end_time``."""

_LIVE = frozenset({JobState.PENDING, JobState.RUNNING})
_FAILED_ATTEMPT = frozenset({
    JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.PREEMPTED,
    JobState.TIMEOUT,
})
SAME_INTERVAL = 0.10
"""Two SIGTERM deaths whose elapsed times differ by at most this fraction: a fixed interval."""

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


def _sort_key(record: SchedulerRecord) -> tuple[datetime, int, str]:
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
    explicit = sorted((r for r in live if record.job_id in r.depends_on), key=_sort_key)
    if explicit:
        return explicit[0].job_id
    remembered = known_edges.get(record.job_id)
    if remembered is not None and any(r.job_id == remembered for r in live):
        return remembered
    fallback = sorted((r for r in live if _fallback_match(record, r)), key=_sort_key)
    return fallback[0].job_id if fallback else None


def dependency_edges(records: Sequence[SchedulerRecord]) -> dict[str, str]:
    """Return predecessor -> successor edges visible in ``depends_on`` this sweep."""
    edges: dict[str, str] = {}
    for record in sorted(records, key=_sort_key):
        for predecessor in record.depends_on:
            # The earliest-submitted dependant is the chain's next link; later ones are
            # extra jobs that merely wait for the same predecessor.
            edges.setdefault(predecessor, record.job_id)
    return edges


_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+|/\S+", re.IGNORECASE)


def failure_signature(facts: JobFacts, verdict: str) -> str | None:
    """``job_id|kind|normalised text|elapsed_s`` for a failed attempt, else None."""
    record = facts.record
    if verdict != "failed" or record.state not in _FAILED_ATTEMPT:
        return None
    fault = first_fault(facts)
    kind = fault.kind if fault else f"exit{record.exit_code}"
    text = (fault.detail or fault.excerpt) if fault else record.state.value
    norm = _VOLATILE.sub("#", text.lower()).replace("|", "/")[:80]
    return f"{record.job_id}|{kind}|{norm}|{record.elapsed_s if record.elapsed_s else ''}"


def memory_key(record: SchedulerRecord) -> str:
    """``cluster:name stem``: attempts of one run share it across restarts."""
    return f"{record.cluster}:{name_stem(record.name)}"


def same_failure(current: str, previous: str) -> bool:
    """Two attempts died the same way (SIGTERM: also after the same elapsed time)."""
    _, kind, text, elapsed = current.split("|", 3)
    _, kind0, text0, elapsed0 = previous.split("|", 3)
    if kind != kind0 or text != text0:
        return False
    if kind != "sigterm":
        return True
    if not elapsed or not elapsed0:
        return False
    a, b = int(elapsed), int(elapsed0)
    return abs(a - b) <= SAME_INTERVAL * max(a, b)


def earlier_attempts(
    failed: Sequence[tuple[SchedulerRecord, str]],
) -> dict[tuple[str, str], list[str]]:
    """(cluster, job id) -> signatures of the same run's attempts submitted before it, oldest
    first, among ``failed`` (one sweep's failed attempts with their signatures): the sweep
    itself shows consecutive attempts when no memory of earlier sweeps exists."""
    runs: dict[str, list[tuple[SchedulerRecord, str]]] = defaultdict(list)
    for record, signature in failed:
        runs[memory_key(record)].append((record, signature))
    earlier: dict[tuple[str, str], list[str]] = {}
    for attempts in runs.values():
        attempts.sort(key=lambda attempt: _sort_key(attempt[0]))
        for index, (record, _) in enumerate(attempts[1:], start=1):
            earlier[(record.cluster, record.job_id)] = [s for _, s in attempts[:index]]
    return earlier

