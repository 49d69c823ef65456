"""The successor rules that read SLURM's times and names once a dependency is gone.

:mod:`report.chain`'s rule 3 (a job of the run's name or ``--output`` pattern queued by the
chain, or one of another name its end released), rule 4 (a job that waited on it together with
other jobs, after SLURM dropped it from an AND or OR list) and a relaunch by hand after a
cancelled restart. Each returns the candidate record, or None.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice

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
    _waits_for_begin,
    dependencies,
    name_stem,
    released_by,
    same_run_name,
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


TRAP_WINDOW = timedelta(minutes=11)
"""How long before its TIMEOUT a run's signal trap may queue its own copy (``sbatch $0`` on
``--signal=USR1@N``, N up to 10 minutes, which SLURM may send up to a minute early)."""


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
    stem, end = name_stem(record.name), _utc(record.end_time)
    # Two other jobs ended by then: whichever job is the candidate, one of them is not.
    if sum(o.job_id != record.job_id for o in islice(index.ended_between(
            (record.user, record.workdir), end - RELEASE_ALONE, end), 3)) >= 2:
        return None
    found = sorted((r for r in candidates
                    if r.job_id != record.job_id and r.job_id not in named
                    and r.user == record.user and r.workdir == record.workdir
                    and name_stem(r.name) != stem and r.state is not JobState.CANCELLED
                    and _sibling_restart(record, r) is not False and not _never_starts(r)
                    and released_by(record, r) and may_continue(r)),
                   key=lambda r: _successor_order(record, r))
    for r in found:
        until = (_utc(r.eligible_time) if r.eligible_time else end) + timedelta(seconds=1)
        ended = index.ended_between((record.user, record.workdir), end - RELEASE_ALONE, until)
        if not any(o.job_id not in (record.job_id, r.job_id) for o in ended):
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
    run's; nor a numbered sibling of ``record`` (``exp-2`` for ``exp-1``), another cell by its
    name. Only when no other job of the workdir ended while it waited (to ``record``'s end,
    for an OR list): then which of them it waited on is unknown. The earliest. Only jobs that
    waited and that ``record`` may pass are looked at, each question a bisection
    (:class:`_Waiters`)."""
    if not record.workdir or record.end_time is None or record.submit_time is None:
        return None
    end, stem = _utc(record.end_time), name_stem(record.name)
    place = (record.user, record.workdir)
    found = []
    # An OR list's dependant started at the first end, beside this job: it may have ended too.
    for s, held in _waiters(index, place).near(record, stem, _utc(record.submit_time), end):
        if (s.job_id == record.job_id or s.job_id in named or s.state is JobState.CANCELLED
                or _never_starts(s) or s.submit_time is None
                or not _utc(record.submit_time) <= _utc(s.submit_time) <= end
                or (s.end_time is not None and _utc(s.end_time) < end)
                or _sibling_restart(record, s) is False or not may_continue(s)
                or (name_stem(s.name) == stem and not same_run_name(record.name, s.name))
                or (record.state is JobState.TIMEOUT and _still_waiting(s)
                    and any(d.kind not in _AFTER_TIMEOUT for d in dependencies(s)))):
            continue  # an AND list a TIMEOUT met waits on the others by a kind it meets too
        holders = held if _still_waiting(s) else [r for r in held if r.job_id != record.job_id]
        if (holders and _held_with(record, s, holders)
                and _alone(record, s, holders, index) and _sole_release(s, index)):
            found.append(s)
    return min(found, key=lambda s: _successor_order(record, s), default=None)


def _holders(candidate: SchedulerRecord, index: ChainIndex) -> list[SchedulerRecord]:
    """The jobs that hold ``candidate`` (named in its pending ``Dependency``, an array's
    ``N_*`` by each of its tasks: ``ChainIndex.named``) or released it
    (ended at its eligibility, in its workdir; :func:`_co_waiting` leaves out the TIMEOUT it
    asks for); none when one it names is not in view (nothing tells whose it is then)."""
    if _still_waiting(candidate):
        named = [index.named(d.job_id) for d in dependencies(candidate)]
        if not all(named):
            return []
        return list({r.job_id: r for jobs in named for r in jobs}.values())
    if candidate.eligible_time is None:
        return []
    at = _utc(candidate.eligible_time)
    place = (candidate.user, candidate.workdir or "")
    return [r for r in index.ended_between(place, at - RELEASE_SLACK, at + timedelta(seconds=1))
            if released_by(r, candidate)]


class _Waiters:
    """One workdir's jobs that waited, with their holders, filed by what a TIMEOUT must be
    for :func:`_held_with` to pass them, so that each asks a bisection of a few short lists,
    not every job of the workdir (a grid of thousands of cells ending together): a holder
    queued after the job (``late``) or of its own run (``own``) fails it unless it is the
    TIMEOUT itself (left out of the holders it released), or, for ``own``, the TIMEOUT is of
    that run too."""

    def __init__(self, waited: Iterable[SchedulerRecord], index: ChainIndex) -> None:
        self.any: list[tuple[datetime, SchedulerRecord, list[SchedulerRecord]]] = []
        self.by_holder: dict[str, list[tuple[datetime, SchedulerRecord,
                                             list[SchedulerRecord]]]] = {}
        self.by_stem: dict[str, list[tuple[datetime, SchedulerRecord,
                                           list[SchedulerRecord]]]] = {}
        for s in waited:
            if (s.submit_time is None or s.state is JobState.CANCELLED or _never_starts(s)
                    or not _sole_release(s, index)):  # passed by no TIMEOUT: its holders unread
                continue
            submitted, held, own = _utc(s.submit_time), _holders(s, index), name_stem(s.name)
            late = {r.job_id for r in held
                    if r.submit_time is None or _utc(r.submit_time) > submitted}
            failing = late | {r.job_id for r in held if name_stem(r.name) == own}
            entry = (submitted, s, held)
            if not failing:
                self.any.append(entry)
            elif len(failing) == 1:
                self.by_holder.setdefault(next(iter(failing)), []).append(entry)
            if len(late) <= 1:
                self.by_stem.setdefault(own, []).append(entry)
        for entries in (self.any, *self.by_holder.values(), *self.by_stem.values()):
            entries.sort(key=lambda e: e[0])

    def near(self, record: SchedulerRecord, stem: str, start: datetime, stop: datetime,
             ) -> list[tuple[SchedulerRecord, list[SchedulerRecord]]]:
        """The jobs queued from ``start`` to ``stop`` that ``record`` (of name stem ``stem``)
        may pass, each with its holders."""
        found: dict[str, tuple[SchedulerRecord, list[SchedulerRecord]]] = {}
        for entries in (self.any, self.by_holder.get(record.job_id, ()),
                        self.by_stem.get(stem, ())):
            first = bisect.bisect_left(entries, start, key=lambda e: e[0])
            last = bisect.bisect_right(entries, stop, key=lambda e: e[0])
            found.update((s.job_id, (s, held)) for _, s, held in entries[first:last])
        return list(found.values())


def _waiters(index: ChainIndex, place: tuple[str | None, str]) -> _Waiters:
    """``place``'s :class:`_Waiters`, built on the first question and kept on ``index``."""
    waiters = index.co_waiters.get(place)
    if not isinstance(waiters, _Waiters):
        waiters = index.co_waiters[place] = _Waiters(index.waited_in(place), index)
    return waiters


def _held_with(record: SchedulerRecord, candidate: SchedulerRecord,
               holders: Sequence[SchedulerRecord]) -> bool:
    """Each holder was queued no later than ``candidate`` and is no run whose restart its
    name may make it (its name stem: ``train-2`` of ``train-1``, ``exp-2-r2`` of ``exp-2``),
    unless ``candidate`` is ``record``'s own run (:func:`same_run_name`; a stem alone would
    give ``exp-2-r2`` to its sibling cell ``exp-1``)."""
    ours, own = same_run_name(candidate.name, record.name), name_stem(candidate.name)
    submitted = _utc(candidate.submit_time) if candidate.submit_time else None
    return submitted is not None and all(
        r.job_id != record.job_id and r.submit_time is not None
        and _utc(r.submit_time) <= submitted and (ours or name_stem(r.name) != own)
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
             and not _never_starts(r) and _fallback_match(record, r, index, late=True)]
    return min(found, key=lambda r: fallback_order(record, r), default=None)


def fallback_order(record: SchedulerRecord, candidate: SchedulerRecord,
                   ) -> tuple[bool, tuple[datetime, int, bool, bool, int, str]]:
    """A fallback's candidates in order: those of ``record``'s own run name first
    (:func:`same_run_name`), then the earliest (``_successor_order``): where two cells ended
    together, each one's own restart before its sibling's queued earlier."""
    return not same_run_name(record.name, candidate.name), _successor_order(record, candidate)


def _fallback_match(record: SchedulerRecord, candidate: SchedulerRecord, index: ChainIndex,
                    *, late: bool = False) -> bool:
    """``candidate`` continues ``record`` by the fallback (module docstring, 3.); ``late``:
    whenever it was submitted after the TIMEOUT (a relaunch after a cancel). One not of
    ``record``'s own run name (a sibling cell ``exp-2`` of ``exp-1``, a job matched by its
    StdOut pattern) needs :func:`_held_for`'s evidence too."""
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
            and not _ran_after(record, candidate) and not _trap_copy(record, candidate):
        return False  # it ran beside the predecessor (started before its end): no restart
    submitted = _utc(candidate.submit_time)
    if record.submit_time is not None and submitted < _utc(record.submit_time):
        return False  # queued before the predecessor: an older job, not its continuation
    if _queued_beside(record, candidate):
        return False
    if not (late or submitted <= _utc(record.end_time) + SUBMIT_SLACK):
        return False
    return same_run_name(record.name, candidate.name) or _held_for(record, candidate, index)


def _trap_copy(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    """``candidate`` is the copy ``record``'s signal trap queued (``sbatch $0`` on
    ``--signal``): its exact name, in its workdir, queued while it ran and within
    :data:`TRAP_WINDOW` of its end. With room free it starts at once, beside the job about to
    time out, and continues the run all the same. A copy queued earlier in the run is a seed
    beside it."""
    if (record.start_time is None or record.end_time is None or candidate.submit_time is None
            or not record.workdir or candidate.workdir != record.workdir
            or candidate.name != record.name or _sibling_restart(record, candidate) is not None):
        return False
    submitted = _utc(candidate.submit_time)
    return (submitted >= _utc(record.start_time)
            and submitted >= _utc(record.end_time) - TRAP_WINDOW)


def _queued_beside(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    """``candidate`` was queued before ``record`` started and never waited (eligible at its
    submission): the user's copy beside it (a second seed under one name, pending for room),
    not a job the run queued to continue itself, which comes once it runs or waits on it. A
    task of its own array is the throttle rule's (``_sibling_restart``)."""
    if (record.start_time is None or candidate.submit_time is None
            or candidate.eligible_time is None or _sibling_restart(record, candidate) is not None):
        return False
    submitted = _utc(candidate.submit_time)
    return (submitted < _utc(record.start_time) and not _still_waiting(candidate)
            and _utc(candidate.eligible_time) <= submitted)


def _begins_after(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    """A job pending on its ``--begin`` held past ``record``'s end (``-d afterany:A
    --begin=...``: SLURM clears the met dependency and leaves ``BeginTime``) by its
    ``--output`` template alone, of another name stem: the run's log template ties it to the
    run. A numbered sibling (``exp-2`` of ``exp-1``) is another cell by its name."""
    return (name_stem(candidate.name) != name_stem(record.name)
            and candidate.eligible_time is not None and record.end_time is not None
            and _utc(candidate.eligible_time) >= _utc(record.end_time) - timedelta(seconds=1))


def _held_for(record: SchedulerRecord, candidate: SchedulerRecord, index: ChainIndex) -> bool:
    """SLURM's evidence that ``candidate``, of another name than ``record``'s run, continues
    it: queued once it had ended (by its epilogue, or by hand), or held until its end
    (:func:`released_by`: a met ``afterany`` SLURM cleared) and not released as well by
    another job of its workdir ending then (two cells ending at one walltime, the sibling's
    restart its own cell's; a prep job the sibling waited on): a name of another run does
    not choose between two ends. One queued before the end that never waited (eligible at
    submission: pending for room only, or running since), was made eligible at another moment,
    waits on other jobs or on a ``--begin`` time, ran or waits beside it: a grid's cell, a
    seed. Only when SLURM's record gives no eligible time do the name and StdOut pattern
    decide. One pending on a ``--begin`` time: :func:`_begins_after`."""
    if record.end_time is None or candidate.submit_time is None:
        return False
    if _utc(candidate.submit_time) >= _utc(record.end_time) - timedelta(seconds=1):
        return True
    if _waits_for_begin(candidate):
        return _begins_after(record, candidate)
    if _still_waiting(candidate):
        return False
    if candidate.eligible_time is None:
        return True
    if not released_by(record, candidate):
        return False
    place = (candidate.user, candidate.workdir or "")
    ended = index.ended_between(place, _utc(record.end_time) - RELEASE_ALONE,
                                _utc(candidate.eligible_time) + timedelta(seconds=1))
    return not any(o.job_id not in (record.job_id, candidate.job_id) for o in islice(ended, 3))
