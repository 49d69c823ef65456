"""One cluster's records indexed once per sweep for :mod:`report.chain`.

Live jobs by id, by (user, workdir) and by user, who waits on whom, the ended jobs that ran,
restarts cancelled while pending, each run's attempts in order, and, built on the first
question, the jobs by run name and StdOut pattern and each workdir's jobs by end and
eligibility time, so judging N jobs costs about O(N log N), not O(N^2) (a grid of thousands
of TIMEOUTs in one workdir included: ``tests/bench/bench_chain.py``).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta

from probes.models import JobState, SchedulerRecord
from report.chain_records import (
    _LIVE,
    RELEASE_SLACK,
    Dependency,
    _array_id,
    _attempt_key,
    _own_array,
    _ran,
    _released,
    _stdout_pattern,
    _still_waiting,
    _successor_order,
    _task_index,
    _utc,
    array_throttle,
    dependencies,
    name_stem,
)


class ChainIndex:
    """One cluster's records indexed once per sweep, so judging N jobs costs O(N), not
    O(N^2): live jobs by id and by (user, workdir), who waits on whom, and how many attempts
    each run has."""

    def __init__(self, records: Sequence[SchedulerRecord]) -> None:
        self.live = {r.job_id: r for r in records if r.state in _LIVE}
        self.live_by_place: dict[tuple[str | None, str], list[SchedulerRecord]] = {}
        self.live_by_user: dict[str | None, list[SchedulerRecord]] = {}
        self.waiting_on: dict[str, list[tuple[SchedulerRecord, Dependency]]] = {}
        self.live_tasks: dict[str, list[SchedulerRecord]] = {}
        # Ended jobs that ran: a restart that already ran (and ended) still continued its
        # predecessor, as SLURM shows them for MinJobAge and sacct for recent_hours.
        self.ran = {r.job_id: r for r in records
                    if r.job_id not in self.live and _ran(r)}
        self.ran_by_place: dict[tuple[str | None, str], list[SchedulerRecord]] = {}
        self.ran_by_user: dict[str | None, list[SchedulerRecord]] = {}
        for r in self.ran.values():
            if r.workdir:
                self.ran_by_place.setdefault((r.user, r.workdir), []).append(r)
            if (r.eligible_time is not None and r.submit_time is not None
                    and r.eligible_time > r.submit_time):
                self.ran_by_user.setdefault(r.user, []).append(r)
        for r in self.live.values():
            if (array := _array_id(r.job_id, r.array_job_id)) is not None:
                self.live_tasks.setdefault(array, []).append(r)
            if r.workdir:  # a fallback successor shares the user and the workdir
                self.live_by_place.setdefault((r.user, r.workdir), []).append(r)
            if (r.eligible_time is not None and r.submit_time is not None
                    and r.eligible_time > r.submit_time):  # ... or it waited (a released one)
                self.live_by_user.setdefault(r.user, []).append(r)
            for d in dependencies(r):
                self.waiting_on.setdefault(d.job_id, []).append((r, d))
        # Restarts cancelled while still pending: SLURM keeps their dependency on record.
        self.cancelled_waiting: dict[str, list[tuple[SchedulerRecord, Dependency]]] = {}
        for r in records:
            if r.state is JobState.CANCELLED and r.job_id not in self.live and not _ran(r):
                for d in dependencies(r):
                    self.cancelled_waiting.setdefault(d.job_id, []).append((r, d))
        self._live_names: Counter[tuple[str | None, str]] | None = None
        self._waited: dict[tuple[str | None, str], list[SchedulerRecord]] = {}
        self._ends: dict[tuple[str | None, str],
                         tuple[list[datetime], list[SchedulerRecord]]] = {}
        self._eligible: dict[tuple[str | None, str],
                             tuple[list[datetime], list[SchedulerRecord]]] = {}
        self._became_eligible: dict[tuple[str | None, str],
                                    tuple[list[datetime], list[SchedulerRecord]]] = {}
        self._by_name: dict[tuple[str | None, str, str], list[SchedulerRecord]] | None = None
        self._by_stdout: dict[tuple[str | None, str, str], list[SchedulerRecord]] = {}
        self._of_user: dict[tuple[str | None, str], list[SchedulerRecord]] = {}
        self._user_eligible: dict[tuple[str | None, str],
                                  tuple[list[datetime], list[SchedulerRecord]]] = {}
        self.co_waiters: dict[tuple[str | None, str], object] = {}
        """Per place, its jobs that waited as ``report.chain_match._Waiters`` files them."""
        self._arrays: dict[str, list[SchedulerRecord]] | None = None
        self._index_attempts(records)

    def _index_attempts(self, records: Sequence[SchedulerRecord]) -> None:
        """Each repeated run name's attempts in order, for :meth:`earlier_attempts`."""
        self.attempts = Counter((r.name, r.user) for r in records)
        # Per repeated name: its timed records' attempt keys, sorted, and how many are untimed.
        self._order: dict[tuple[str, str | None], list[tuple[datetime, int]]] = {}
        self._untimed: Counter[tuple[str, str | None]] = Counter()
        self._same: Counter[tuple[str, str | None, tuple[datetime, int]]] = Counter()
        # An array's tasks (one id, one submit time) by array; the task indexes of those run
        # one at a time (``%1``), sorted: only there is an earlier task an earlier attempt.
        self._tasks: Counter[tuple[str, str | None, tuple[datetime, int], str]] = Counter()
        self._chained: dict[tuple[str, str | None, str], list[int]] = {}
        self._one_at_a_time: set[tuple[str, str | None, str]] = set()
        for r in records:
            name = (r.name, r.user)
            if self.attempts[name] < 2:
                continue
            key = _attempt_key(r)
            if key is None:
                self._untimed[name] += 1
                continue
            self._order.setdefault(name, []).append(key)
            self._same[(*name, key)] += 1
            if (array := _own_array(r)) is not None:
                self._tasks[(*name, key, array)] += 1
                if array_throttle(r) == 1:
                    self._one_at_a_time.add((*name, array))
                if (index := _task_index(r)) is not None:
                    self._chained.setdefault((*name, array), []).append(index)
        for keys in self._order.values():
            keys.sort()
        for indexes in self._chained.values():
            indexes.sort()

    def live_successor(self, job_id: str, record: SchedulerRecord) -> SchedulerRecord | None:
        """The live job ``job_id`` (a remembered successor), or, once that pending array has
        been split into tasks (``1820`` / ``1820_[0-1]`` -> ``1820_0``, ``1820_1``), its task
        with ``record``'s task index, else its first."""
        if job_id in self.live:
            return self.live[job_id]
        tasks = self.live_tasks.get(_array_id(job_id) or job_id, ())
        return min(tasks, key=lambda r: _successor_order(record, r), default=None)

    def named(self, job_id: str) -> list[SchedulerRecord]:
        """The jobs a dependency element's id (:func:`dependencies`) names, live or ran: that
        job, or for an array's ``N_*`` (``-d afterany:N_*``; SLURM prints a dependency on a
        whole array so) each of its tasks in view and its pending remainder, and for a task
        ``N_3`` not split off yet that remainder (squeue: one record, job N, with its
        ``array_task_string``). Empty when none is in view. The arrays are filed on the first
        such id asked."""
        found = self.live.get(job_id) or self.ran.get(job_id)
        if found is not None:
            return [found]
        array, _, task = job_id.partition("_")
        if not task:
            return []
        if self._arrays is None:
            self._arrays = {}
            for r in (*self.live.values(), *self.ran.values()):
                if (own := _own_array(r)) is not None:
                    self._arrays.setdefault(own, []).append(r)
        tasks = self._arrays.get(array, ())
        if task == "*":
            return list(tasks)
        return [r for r in tasks if _task_index(r) is None]

    def waited_in(self, place: tuple[str | None, str]) -> list[SchedulerRecord]:
        """The jobs of ``place`` (user, workdir), live or ran, that waited on something:
        pending on ``Dependency``, or made eligible after their submission (a released job may
    still be pending for room). Built once per
        place, on the first question (only a TIMEOUT no other rule continued asks)."""
        if place not in self._waited:
            self._waited[place] = [
                r for r in (*self.live_by_place.get(place, ()), *self.ran_by_place.get(place, ()))
                if _still_waiting(r) or _released(r)]
        return self._waited[place]

    def ended_between(self, place: tuple[str | None, str], start: datetime,
                      stop: datetime) -> Iterator[SchedulerRecord]:
        """The jobs of ``place`` that ran and ended from ``start`` to ``stop``, by end time:
        O(log n) to the first (a sorted list per place, built on the first question)."""
        return _between(self._ends, self.ran_by_place.get(place, ()), place, (start, stop),
                        lambda r: r.end_time)

    def released_between(self, place: tuple[str | None, str], start: datetime,
                         stop: datetime) -> Iterator[SchedulerRecord]:
        """The jobs of ``place`` that waited and became eligible from ``start`` to ``stop``."""
        return _between(self._eligible, self.waited_in(place), place, (start, stop),
                        lambda r: r.eligible_time if _released(r) else None)

    def eligible_between(self, place: tuple[str | None, str], start: datetime,
                         stop: datetime) -> Iterator[SchedulerRecord]:
        """The jobs of ``place``, live or ran, made eligible from ``start`` to ``stop``."""
        return _between(self._became_eligible,
                        (*self.live_by_place.get(place, ()), *self.ran_by_place.get(place, ())),
                        place, (start, stop), lambda r: r.eligible_time)

    def same_run(self, record: SchedulerRecord) -> list[SchedulerRecord]:
        """The live and ran jobs of ``record``'s user with its name stem or its StdOut
        pattern (:func:`_stdout_pattern`, unless it holds ``%x``), of its workdir or made
        eligible at its end: the only jobs a fallback may match
        (:func:`report.chain_match._fallback_match`). Built on the first question."""
        if self._by_name is None:
            self._by_name = {}
            for r in (*self.live.values(), *self.ran.values()):
                stem, pattern = name_stem(r.name), _stdout_pattern(r)
                self._of_user.setdefault((r.user, stem), []).append(r)
                if pattern is not None:
                    self._of_user.setdefault((r.user, "\0" + pattern), []).append(r)
                if r.workdir:
                    self._by_name.setdefault((r.user, stem, r.workdir), []).append(r)
                    if pattern is not None:
                        self._by_stdout.setdefault((r.user, pattern, r.workdir), []).append(r)
        stem, pattern = name_stem(record.name), _stdout_pattern(record)
        pattern = pattern if pattern is not None and "%x" not in pattern else None
        found: dict[str, SchedulerRecord] = {}
        if record.workdir:
            found.update((r.job_id, r) for r in
                         self._by_name.get((record.user, stem, record.workdir), ()))
            if pattern is not None:
                found.update((r.job_id, r) for r in
                             self._by_stdout.get((record.user, pattern, record.workdir), ()))
        if record.end_time is not None:  # elsewhere, only a job its end released matches
            end = _utc(record.end_time)
            # "\0": a pattern's key apart from a stem's (no job name holds a NUL).
            for key in (stem, *(() if pattern is None else ("\0" + pattern,))):
                group = (record.user, key)
                found.update((r.job_id, r) for r in _between(
                    self._user_eligible, self._of_user.get(group, ()), group,
                    (end - timedelta(seconds=1), end + RELEASE_SLACK), lambda r: r.eligible_time))
        return list(found.values())

    def others_live(self, record: SchedulerRecord,
                    of_run: Callable[[SchedulerRecord], bool] | None = None) -> bool:
        """Another live job that can still write this run's files: the same user and workdir
        (an array's tasks, a run's chunk jobs), of the run by ``of_run`` (the judge's: of its
        bucket or a catch-all consolidate/upload; the user's other runs launched from the
        same directory write none of its files), or the same user and name stem. O(the
        live jobs in its workdir)."""
        if record.workdir and any(r.job_id != record.job_id and (of_run is None or of_run(r))
                                  for r in self.live_by_place.get((record.user, record.workdir),
                                                                  ())):
            return True
        if self._live_names is None:  # built on the first question (rare: a finished chunk)
            self._live_names = Counter((r.user, name_stem(r.name)) for r in self.live.values())
        mine = 1 if record.job_id in self.live else 0
        return self._live_names[(record.user, name_stem(record.name))] > mine

    def earlier_attempts(self, record: SchedulerRecord) -> int:
        """Other jobs of the same user with the same name submitted before this one (by
        submit time, then id: SLURM's times are whole seconds, and a chain's restart queued
        at launch, in the same second, has the higher id), those without a submit time (order
        unknown), and, of its own array (one id, one time), the tasks before it when the array
        runs one task at a time (``--array=0-9%1``: a restart chain by array). An array run in
        waves (``%2``, or unthrottled) runs a grid: its other tasks are cells of their own,
        no attempts of this one (the rule of :func:`_sibling_restart`). O(log n) a call."""
        name = (record.name, record.user)
        if self.attempts[name] < 2:
            return 0
        key = _attempt_key(record)
        if key is None:
            return self.attempts[name] - 1
        earlier = (bisect.bisect_left(self._order[name], key) + self._untimed[name]
                   + self._same[(*name, key)] - 1)
        array = _own_array(record)
        if array is None:
            return earlier
        earlier -= self._tasks[(*name, key, array)] - 1  # its siblings, counted above
        if (*name, array) not in self._one_at_a_time:
            return earlier
        indexes = self._chained.get((*name, array), [])
        index = _task_index(record)  # the pending remainder: after every task that ran
        return earlier + (len(indexes) if index is None else bisect.bisect_left(indexes, index))


_Place = tuple[str | None, str]


def _between(cache: dict[_Place, tuple[list[datetime], list[SchedulerRecord]]],
             records: Iterable[SchedulerRecord], place: _Place,
             span: tuple[datetime, datetime],
             when: Callable[[SchedulerRecord], datetime | None]) -> Iterator[SchedulerRecord]:
    """``records``' jobs whose ``when`` falls in ``span``, in that order; the sorted list is
    kept in ``cache`` for ``place``."""
    if place not in cache:
        timed = sorted(((_utc(t), r) for r in records if (t := when(r)) is not None),
                       key=lambda pair: pair[0])
        cache[place] = ([t for t, _ in timed], [r for _, r in timed])
    times, found = cache[place]
    for i in range(bisect.bisect_left(times, span[0]), bisect.bisect_right(times, span[1])):
        yield found[i]
