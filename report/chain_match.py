"""The successor rules that read SLURM's times and names once a dependency is gone.

:mod:`report.chain`'s rule 3 (a job of the run's name or ``--output`` pattern queued by the
chain, or one of another name its end released), rule 4 (a job that waited on it together with
other jobs, after SLURM dropped it from an AND or OR list) and a relaunch by hand after a
cancelled restart. Each returns the candidate record, or None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

from probes.models import JobState, SchedulerRecord
from report.chain_index import ChainIndex
from report.chain_records import (
    _AFTER_TIMEOUT,
    RELEASE_SLACK,
    _never_starts,
    _ran_after,
    _released,
    _sibling_restart,
    _stdout_pattern,
    _still_waiting,
    _successor_order,
    _utc,
    dependencies,
    name_stem,
    released_by,
)

SUBMIT_SLACK = timedelta(minutes=5)
"""Chains submitted by the job's own epilogue land a little after ``end_time``."""


RELAUNCH_WINDOW = timedelta(hours=1)
"""How long after its restart was cancelled a relaunch by hand still continues the run: the
seed's own window for a human to have acted on a quiet job (an eval with no new result for
60+ min is a stall). A job of the run queued later is a new run: the TIMEOUT read failed
('chain stopped') in the meantime and stays so, not re-read as restarting days after."""


RELEASE_ALONE = timedelta(seconds=5)
"""How close another job's end must come to make a release by SLURM's times ambiguous."""


def _released_restart(record: SchedulerRecord, candidates: Iterable[SchedulerRecord],
                      named: set[str], index: ChainIndex,
                      may_continue: Callable[[SchedulerRecord], bool],
                      ) -> SchedulerRecord | None:
    """A job of another name in ``record``'s workdir that ``record``'s end released
    (:func:`released_by`): ``-d afterany:A:B`` names B by rule 1 while it waits, whatever its
    name, and SLURM clears that Dependency once it starts. Only where no other job of the user
    in that workdir ended from just before that end to the job's eligibility (a grid's cells
    hitting one walltime together, an array's throttle letting its next task go at that
    moment): their ends would explain it as well. A job elsewhere ending then does not (the
    user's other runs end at any moment); a cell elsewhere is no candidate either."""
    if not record.workdir or record.end_time is None:
        return None
    stem = name_stem(record.name)
    found = sorted((r for r in candidates
                    if r.job_id != record.job_id and r.job_id not in named
                    and r.user == record.user and r.workdir == record.workdir
                    and name_stem(r.name) != stem and r.state is not JobState.CANCELLED
                    and _sibling_restart(record, r) is not False and not _never_starts(r)
                    and released_by(record, r) and may_continue(r)),
                   key=lambda r: _successor_order(record, r))
    end = _utc(record.end_time)
    for r in found:
        until = (_utc(r.eligible_time) if r.eligible_time else end) + timedelta(seconds=1)
        others = (o for o in index.ran_by_place.get((record.user, record.workdir), ())
                  if o.job_id not in (record.job_id, r.job_id))
        if not any(o.end_time is not None and end - RELEASE_ALONE <= _utc(o.end_time) <= until
                   for o in others):
            return r
    return None


def _co_waiting(record: SchedulerRecord, named: set[str], index: ChainIndex,
                may_continue: Callable[[SchedulerRecord], bool]) -> SchedulerRecord | None:
    """A job waiting on ``record`` together with other jobs, after SLURM dropped ``record``
    from its dependency (module docstring of :mod:`report.chain`, 4.): of the user's workdir,
    queued while ``record`` ran, held by a dependency past its end (pending on ``Dependency``
    still, naming only the others, by ``afterany``/``afternotok`` as the TIMEOUT's element
    was: SLURM deletes each met element of an AND list,
    ``afterany:A:B`` reads ``afterany:B(unfulfilled)`` once A ended; or made eligible by
    another job's end, which for an OR list ``afterany:A?afterany:B`` may come first), each of
    those jobs queued no later than it, and not named as their run's restart (its name stem
    one of theirs, not ``record``'s): a restart of another run in the same workdir is that
    run's. Only when no other job of the workdir ended while it waited (to ``record``'s end,
    for an OR list): then which of them it waited on is unknown. The earliest. Only jobs that
    waited are looked at, each question a bisection (:class:`ChainIndex`)."""
    if not record.workdir or record.end_time is None or record.submit_time is None:
        return None
    end, stem = _utc(record.end_time), name_stem(record.name)
    place = (record.user, record.workdir)
    found = []
    # An OR list's dependant started at the first end, beside this job: it may have ended too.
    for s in index.waited_in(place):
        if (s.job_id == record.job_id or s.job_id in named or s.state is JobState.CANCELLED
                or _never_starts(s) or s.submit_time is None
                or not _utc(record.submit_time) <= _utc(s.submit_time) <= end
                or (s.end_time is not None and _utc(s.end_time) < end)
                or _sibling_restart(record, s) is False or not may_continue(s)
                or (record.state is JobState.TIMEOUT and _still_waiting(s)
                    and any(d.kind not in _AFTER_TIMEOUT for d in dependencies(s)))):
            continue  # an AND list a TIMEOUT met waits on the others by a kind it meets too
        holders = _holders(record, s, index)
        if (holders and _held_with(record, s, holders, stem)
                and _alone(record, s, holders, index) and _sole_release(s, index)):
            found.append(s)
    return min(found, key=lambda s: _successor_order(record, s), default=None)


def _holders(record: SchedulerRecord, candidate: SchedulerRecord,
             index: ChainIndex) -> list[SchedulerRecord]:
    """The jobs other than ``record`` that hold ``candidate`` (named in its pending
    ``Dependency``) or released it (ended at its eligibility); none when one it names is not
    in view (nothing tells whose it is then)."""
    if _still_waiting(candidate):
        ids = {d.job_id for d in dependencies(candidate)}
        found = [r for i in ids if (r := index.live.get(i) or index.ran.get(i)) is not None]
        return found if len(found) == len(ids) else []
    if candidate.eligible_time is None:
        return []
    at = _utc(candidate.eligible_time)
    place = (record.user, record.workdir or "")
    return [r for r in index.ended_between(place, at - RELEASE_SLACK, at + timedelta(seconds=1))
            if r.job_id != record.job_id and released_by(r, candidate)]


def _held_with(record: SchedulerRecord, candidate: SchedulerRecord,
               holders: Sequence[SchedulerRecord], stem: str) -> bool:
    """Each holder was queued no later than ``candidate`` and is no run whose restart its
    name makes it (unless its name is ``record``'s run's too)."""
    own = name_stem(candidate.name)
    submitted = _utc(candidate.submit_time) if candidate.submit_time else None
    return submitted is not None and all(
        r.job_id != record.job_id and r.submit_time is not None
        and _utc(r.submit_time) <= submitted and (own == stem or name_stem(r.name) != own)
        for r in holders)


def _sole_release(candidate: SchedulerRecord, index: ChainIndex) -> bool:
    """No other job of ``candidate``'s workdir waited and was made eligible with it: several
    jobs ending at once that released as many (a grid's cells hitting one walltime, each with
    its restart) say nothing of which is whose; one released by them all is their AND list."""
    if not _released(candidate) or candidate.eligible_time is None:
        return True
    at = _utc(candidate.eligible_time)
    place = (candidate.user, candidate.workdir or "")
    return not any(r.job_id != candidate.job_id for r in
                   index.released_between(place, at - RELEASE_ALONE, at + RELEASE_ALONE))


def _alone(record: SchedulerRecord, candidate: SchedulerRecord,
           holders: Sequence[SchedulerRecord], index: ChainIndex) -> bool:
    """No job of the workdir but ``record`` and the holders ended while ``candidate`` waited
    (from its submission to its eligibility, or to ``record``'s end when that came later):
    another such end would explain the dropped element as well."""
    if candidate.submit_time is None or record.end_time is None:
        return False
    start, stop = _utc(candidate.submit_time), _utc(record.end_time)
    if not _released(candidate) or candidate.eligible_time is None:
        stop = datetime.max.replace(tzinfo=UTC)  # still waiting: any end since counts
    else:
        stop = max(stop, _utc(candidate.eligible_time)) + RELEASE_ALONE
    skip = {record.job_id, candidate.job_id, *(r.job_id for r in holders)}
    place = (record.user, record.workdir or "")
    return not any(r.job_id not in skip for r in index.ended_between(place, start, stop))


def _relaunch(record: SchedulerRecord, cancelled: SchedulerRecord,
              candidates: Iterable[SchedulerRecord], named: set[str],
              index: ChainIndex) -> SchedulerRecord | None:
    """The live job that relaunched the run by hand after its restart ``cancelled`` was
    cancelled: the fallback's match but for :data:`SUBMIT_SLACK` (a relaunch after a cancel
    comes when someone gets to it), submitted once that cancel was done and within
    :data:`RELAUNCH_WINDOW` of it, so the run goes on. The earliest such job, as for the
    fallback."""
    cancel_at = cancelled.end_time or record.end_time
    if cancel_at is None:
        return None
    found = [r for r in candidates
             if r.job_id in index.live and r.job_id not in named and r.job_id != record.job_id
             and r.submit_time is not None
             and _utc(cancel_at) <= _utc(r.submit_time) <= _utc(cancel_at) + RELAUNCH_WINDOW
             and not _never_starts(r) and _fallback_match(record, r, late=True)]
    return min(found, key=lambda r: _successor_order(record, r), default=None)


def _fallback_match(record: SchedulerRecord, candidate: SchedulerRecord, *,
                    late: bool = False) -> bool:
    """``candidate`` continues ``record`` by the fallback (module docstring, 3.); ``late``:
    whenever it was submitted after the TIMEOUT (a relaunch after a cancel)."""
    if candidate.user != record.user:
        return False
    if _sibling_restart(record, candidate) is False:
        return False  # the array's next task by its throttle, no restart of this one
    elsewhere = candidate.workdir != record.workdir or not record.workdir
    if elsewhere and not released_by(record, candidate):
        return False
    pattern = _stdout_pattern(record)
    # Another name: the same ``--output`` template ties it to this run, unless the template
    # holds the name itself (``%x``: each name its own log, the same template for every run).
    if (name_stem(candidate.name) != name_stem(record.name)
            and (pattern is None or "%x" in pattern or pattern != _stdout_pattern(candidate))):
        return False
    if record.end_time is None or candidate.submit_time is None:
        return False
    if candidate.state is JobState.RUNNING and candidate.start_time is not None \
            and not _ran_after(record, candidate):
        return False  # it ran beside the predecessor (started before its end): no restart
    submitted = _utc(candidate.submit_time)
    if record.submit_time is not None and submitted < _utc(record.submit_time):
        return False  # queued before the predecessor: an older job, not its continuation
    return late or submitted <= _utc(record.end_time) + SUBMIT_SLACK
