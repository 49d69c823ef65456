"""The dependency edges a sweep remembers for the next, and whose job may continue whose.

Policy: pure functions of one sweep's records, for :mod:`report.chain` (its rule 2, a
remembered edge) and :mod:`report.memory` (which keeps them). SLURM clears a met dependency
once the successor starts, so each sweep keeps predecessor -> successor edges as it sees them:
``afterany``/``afternotok`` ones for a TIMEOUT's restart (:func:`dependency_edges`), and
``afterok``/``aftercorr`` ones for a planned stop's (:func:`success_edges`). The
earliest-submitted dependant is the chain's next link, and another user's job queued behind a
run never is (:func:`same_owner`).
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.models import SchedulerRecord
from report.chain_records import (
    _AFTER_TIMEOUT,
    _SUCCESS_ONLY,
    dependencies,
    dependency_keys,
    submit_order,
)


def dependency_edges(records: Sequence[SchedulerRecord],
                     kinds: frozenset[str] = _AFTER_TIMEOUT) -> dict[str, str]:
    """Return predecessor -> successor ``afterany``/``afternotok`` edges (or ``kinds``)
    visible this sweep (an ``afternotok`` one read back for a planned stop's exit 0 is
    pending ``DependencyNeverSatisfied`` or gone: never its successor)."""
    edges: dict[str, str] = {}
    owners = {key: r for r in records for key in dependency_keys(r)}
    for record in sorted(records, key=submit_order):
        for dependency in dependencies(record):
            # The earliest-submitted dependant is the chain's next link; later ones are
            # extra jobs that merely wait for the same predecessor. Another user's job
            # queued behind it first does not displace the run's own (same_owner).
            predecessor = owners.get(dependency.job_id)
            if dependency.kind in kinds and (predecessor is None
                                             or same_owner(predecessor, record)):
                edges.setdefault(dependency.job_id, record.job_id)
    return edges


def same_owner(record: SchedulerRecord, other: SchedulerRecord) -> bool:
    """Whether ``other`` may continue ``record``'s run as far as its user says: the same user,
    or either unknown (SLURM names both; a record built by hand may not). Any user may queue
    a job behind anyone's (``--dependency=afterany:N`` is accepted whoever owns N): another
    user's job waiting on a run is no restart of it, as every fallback rule asks already."""
    return record.user is None or other.user is None or other.user == record.user


def success_edges(records: Sequence[SchedulerRecord]) -> dict[str, str]:
    """Return predecessor -> successor ``afterok``/``aftercorr`` edges visible this sweep: the
    restart of a planned stop (whose exit 0 satisfies them), kept because SLURM clears a met
    dependency once the successor starts, and a renamed one elsewhere has nothing else to
    match it by."""
    return dependency_edges(records, _SUCCESS_ONLY)
