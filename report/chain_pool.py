"""The jobs a TIMEOUT's fallback may take (:mod:`report.chain`'s rule 3), and its cancelled restart.

Policy: pure queries of one cluster's :class:`report.chain_index.ChainIndex`. A fallback
candidate is a job of the run's name or StdOut pattern, live or ended after the TIMEOUT ran,
of its user's workdir or of its user and made to wait (:func:`_candidates`); a restart of
another name counts only when SLURM made it eligible at the TIMEOUT's end
(:func:`_released_pool`); a restart queued on it and cancelled before it started is what
stopped the chain (:func:`_cancelled_pending`). Another user's job is never one
(``same_owner``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from probes.models import SchedulerRecord
from report.chain_edges import same_owner
from report.chain_index import ChainIndex
from report.chain_records import RELEASE_SLACK, _ran_after, _utc, dependency_keys, submit_order


def _candidates(record: SchedulerRecord, index: ChainIndex) -> list[SchedulerRecord]:
    """The jobs a fallback may take: live ones of ``record``'s user and workdir, or of its
    user that waited (a released one), and those ended that ran after ``record``; of those,
    only the ones of its run's name or StdOut pattern (``ChainIndex.same_run``), as every
    fallback match is."""
    return [r for r in index.same_run(record) if _in_pool(record, r, index)]


def _in_pool(record: SchedulerRecord, candidate: SchedulerRecord, index: ChainIndex) -> bool:
    """Whether a fallback may take ``candidate`` (:func:`_candidates`)."""
    here = bool(candidate.workdir) and (candidate.user, candidate.workdir) == (
        record.user, record.workdir or "")
    waited = (candidate.user == record.user and candidate.eligible_time is not None
              and candidate.submit_time is not None
              and candidate.eligible_time > candidate.submit_time)
    if not (here or waited):
        return False
    return candidate.job_id in index.live or _ran_after(record, candidate)


def _released_pool(record: SchedulerRecord, index: ChainIndex) -> Iterator[SchedulerRecord]:
    """The fallback's jobs of ``record``'s workdir (:func:`_candidates` but of any name) made
    eligible at its end, as :func:`released_by` asks: the only ones rule 3 finds released.
    Lazy: ``_released_restart`` reads none when other ends at that moment rule them all out."""
    if not record.workdir or record.end_time is None:
        return
    end = _utc(record.end_time)
    yield from (r for r in index.eligible_between((record.user, record.workdir),
                                                  end - timedelta(seconds=1), end + RELEASE_SLACK)
                if r.job_id in index.live or _ran_after(record, r))


def _cancelled_pending(record: SchedulerRecord, index: ChainIndex,
                       kinds: frozenset[str]) -> SchedulerRecord | None:
    """The earliest restart queued on ``record`` (a dependency of a kind its end satisfies)
    that was cancelled before it started."""
    queued = [r for key in dependency_keys(record)
              for r, d in index.cancelled_waiting.get(key, ())
              if d.kind in kinds and r.job_id != record.job_id and same_owner(record, r)]
    return min(queued, key=submit_order, default=None)
