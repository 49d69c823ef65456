"""Restart chains: which job continues a walltime-limited one, and what a run is called.

Policy (seed: "Chain-restart TIMEOUTs are normal, NOT failures ... when its afterany successor
is RUNNING/PENDING"). Only an ``afterany`` successor (or ``afternotok``, which SLURM satisfies
with a TIMEOUT: the resume queued to run only if the job did not finish) is a normal restart:
``afterok`` (or ``aftercorr``) is never satisfied by a TIMEOUT, and SLURM leaves such a
dependant PENDING with reason ``DependencyNeverSatisfied`` for ever (unless
``kill_invalid_depend`` cancels it). A TIMEOUT job's successor is, in order of confidence,

1. a PENDING/RUNNING job whose dependency names it with ``afterany``/``afternotok`` (the chain
   as submitted; a record that carries ids but no readable type, e.g. built by hand, counts as
   one), and that is not itself ``DependencyNeverSatisfied``, nor a job of another configured
   bucket (an eval queued behind the run ``afterany`` continues no run: the TIMEOUT's
   ``blocked`` says so);
2. a remembered ``afterany`` edge (predecessor -> successor) from an earlier sweep whose
   successor is still PENDING/RUNNING;
3. a fallback match, because SLURM clears ``Dependency=`` once it is fulfilled, and a restart
   is often renamed (``-r2``, ``_resume``, ``-cont``, ``.2``): a PENDING/RUNNING job of the same
   user in the same workdir, whose name stem (:func:`name_stem`) or StdOut pattern (the path
   with its job id and name put back as ``%j``/``%x``; SLURM's default ``slurm-%j.out`` says
   nothing) matches, submitted after the predecessor and before it ended (plus
   :data:`SUBMIT_SLACK`), i.e. queued by the chain, not relaunched by hand afterwards, and,
   once RUNNING, started when the predecessor ended or later: a job that started before that
   ran beside it (another copy of the run, a seed under the same name), it did not continue
   it. A task of the predecessor's own array (or its pending remainder) is a fallback only
   when the array runs one task at a time (``--array=0-9%1``, squeue's ``array_max_tasks``
   1: a restart chain by array); an array run in waves (``%10``, or unthrottled) starts its
   next task when one ends, a cell of its own, not a restart. A job
   that still names the predecessor with another dependency type is never a fallback. The
   workdir may differ (a launcher that gives each attempt its own run directory) when SLURM's
   own times say the predecessor's end released the job: submitted before that end, made
   eligible only at it (``eligible_time`` within :data:`RELEASE_SLACK` after ``end_time``),
   which is what a cleared ``afterany`` leaves behind. The same times find a restart of
   another name in the same workdir (``-d afterany:A:B``, B of another name: rule 1 names it
   while it waits), when no other job of the user there ended then (:func:`_released_restart`).

4. a job that waited on it together with other jobs (``-d afterany:A:B``, or the OR list
   ``afterany:A?afterany:B``): SLURM deletes each met element of an AND list (``afterany:A:B``
   reads ``afterany:B(unfulfilled)`` once A ended) and clears an OR list at its first met
   element, so A is named no more. A job of the user's workdir queued while the TIMEOUT ran,
   held by a dependency past its end (still pending on ``Dependency``, or made eligible by
   another job's end, before it for an OR list), each job holding it queued no later than it
   and of another run than its own name says (:func:`_co_waiting`). A job named as another
   run's restart is that run's only: without a remembered edge, SLURM's record no longer says
   it waited on this one too.

A restart that already ran and ended (a chain A -> B -> C with B over, or a finished run) is
still the successor: among the fallback candidates (3.) and a remembered edge (2.), an ended
job counts when it started once the predecessor had ended (it ran after it, not beside it);
:attr:`ChainLink.ended` says its state. Otherwise every earlier link of a chain read failed,
"no successor queued", and recurring, as soon as the chain moved past it. A restart that was
cancelled (after it ran, or while still pending: SLURM keeps a cancelled dependant's
``Dependency``) is none: someone stopped the chain there, and :attr:`ChainLink.cancelled`
names it so the TIMEOUT reads so, unless a live job (queued instead) continues the run: the
fallback's match, submitted once the cancel was done and within :data:`RELAUNCH_WINDOW` of it
(a relaunch by hand comes when someone gets to it, later than :data:`SUBMIT_SLACK`, which
bounds jobs queued by the chain; one queued hours or days later is a new run).

A COMPLETED job whose trainer stopped itself ahead of the walltime for a successor
(``report.planned_stop``) is linked the same way, ``afterok`` (which its exit 0 satisfies) and
``aftercorr`` counting as ``afterany``.

When no successor is found but a live job does wait on the TIMEOUT job (``afterok``, or
pending with ``DependencyNeverSatisfied``), :attr:`ChainLink.blocked` says why that job is not
a restart: the judge reports the TIMEOUT as failed with that reason. Only a job that is itself
TIMEOUT gets a successor. Ties go to the earliest-submitted candidate (then the lowest id),
which is the next link of the chain.

A run's attempts share its *name stem* (restart suffixes stripped); what a failed attempt
leaves for the next one to compare with lives in :mod:`report.memory`.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from probes.models import JobState, SchedulerRecord

SUBMIT_SLACK = timedelta(minutes=5)
"""Chains submitted by the job's own epilogue land a little after ``end_time``."""

RELAUNCH_WINDOW = timedelta(hours=1)
"""How long after its restart was cancelled a relaunch by hand still continues the run: the
seed's own window for a human to have acted on a quiet job (an eval with no new result for
60+ min is a stall). A job of the run queued later is a new run: the TIMEOUT read failed
('chain stopped') in the meantime and stays so, not re-read as restarting days after."""

RELEASE_SLACK = timedelta(minutes=2)
"""How long after a job's end slurmctld may take to mark its dependants eligible (it does so
on its next dependency pass, normally within seconds)."""

DEADLINE_REASON = "DeadLine"
"""SLURM's reason for a job it ended at its ``--deadline`` (state DEADLINE, TIMEOUT to the
contract; ``probes.slurm`` gives every record in that state this reason): no walltime TIMEOUT,
so no chain restart (``report.holds``)."""

NEVER_SATISFIED = "DependencyNeverSatisfied"
"""SLURM's pending reason for a dependant whose dependency can no longer be met."""

_LIVE = frozenset({JobState.PENDING, JobState.RUNNING})
_RESTART_KINDS = frozenset({"afterany", "unknown"})
_SUCCESS_ONLY = frozenset({"afterok", "aftercorr"})
_AFTER_SUCCESS = _RESTART_KINDS | _SUCCESS_ONLY
"""What a COMPLETED (exit 0) predecessor satisfies."""
_AFTER_TIMEOUT = _RESTART_KINDS | {"afternotok"}
"""What a TIMEOUT predecessor satisfies: ``afternotok`` too (SLURM: the job ended in a failed
state, "timed out" included), the usual ``--dependency=afternotok:$A resume.sh``."""

# Attempt markers a relaunch appends to a run name: "-r2", "_restart3", "-resume", "-try2", "-v2"
# is deliberately NOT here (a new version is a new run, not a retry).
_ATTEMPT_SUFFIX = re.compile(
    r"(?:[-_.](?:r|re|retry|try|attempt|restart|resume|resumed|requeue|cont|continue|part)\d*"
    r"|[-_.]\d+)$",
    re.IGNORECASE,
)
# One dependency element as SLURM prints it: ``afterok:12(failed)``, ``afterany:12+5:13``.
_DEPENDENCY = re.compile(
    r"(?P<kind>[A-Za-z_]+)(?P<targets>(?::[0-9][^,?:()]*)+)(?:\((?P<status>[A-Za-z_]+)\))?"
)
_DEFAULT_STDOUT = "slurm-%j.out"


@dataclass(frozen=True)
class Dependency:
    """One element of a job's dependency: ``kind`` ``afterany``/``afterok``/... or ``unknown``."""

    kind: str
    job_id: str
    status: str | None = None


@dataclass(frozen=True)
class ChainLink:
    """What follows a TIMEOUT job: its restart, or why the job waiting on it is none."""

    successor: str | None = None
    blocked: str | None = None
    """Why the live job waiting on it is no restart (the recommendation's words)."""
    blocked_short: str | None = None
    """The same in a few words, for the Trend cell."""
    ended: str | None = None
    """The successor's own state when it already ran and ended (the chain went on past it)."""
    cancelled: str | None = None
    """A restart that was queued and then cancelled, with no other to continue the run: the
    chain stopped there (someone cancelled it), so the TIMEOUT is no normal restart."""
    cancelled_ran: bool = False
    """Whether that cancelled restart ran before its cancel (else it never started)."""
    held: str | None = None
    """The live successor's hold (``JobHeldUser``/``JobHeldAdmin``): it waits on a human."""


def strip_attempt(name: str) -> str:
    """``name`` without its last restart/attempt suffix (``rl-x-r3-resume`` -> ``rl-x-r3``),
    or ``name`` unchanged when it ends in none."""
    return _ATTEMPT_SUFFIX.sub("", name)


def name_stem(name: str) -> str:
    """Return the run name without restart/attempt suffixes (``rl-x-r3`` -> ``rl-x``)."""
    stem = name.strip()
    while True:
        shorter = strip_attempt(stem)
        if shorter == stem or not shorter:
            return stem.lower()
        stem = shorter


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def submit_order(record: SchedulerRecord) -> tuple[datetime, int, str]:
    """Sort key: submitted first (naive times as UTC), then the lower numeric id."""
    submitted = _utc(record.submit_time) if record.submit_time else datetime.max.replace(tzinfo=UTC)
    digits = int(record.job_id) if record.job_id.isdigit() else 0
    return submitted, digits, record.job_id


def _attempt_key(record: SchedulerRecord) -> tuple[datetime, int] | None:
    """(submit time, the job's own number: an array's or a hetjob's id for its tasks), or None
    without a submit time."""
    if record.submit_time is None:
        return None
    base = record.array_job_id or re.split(r"[_+]", record.job_id, maxsplit=1)[0]
    return _utc(record.submit_time), int(base) if base.isdigit() else 0


def dependencies(record: SchedulerRecord) -> tuple[Dependency, ...]:
    """The typed elements of ``record.dependency``, plus any ``depends_on`` id it lacks."""
    found: list[Dependency] = []
    raw = record.dependency or ""
    for match in _DEPENDENCY.finditer(raw):
        for target in match["targets"].split(":")[1:]:
            found.append(Dependency(match["kind"].lower(), target.split("+")[0], match["status"]))
    named = {d.job_id for d in found}
    found.extend(Dependency("unknown", job) for job in record.depends_on if job not in named)
    return tuple(found)


def _never_starts(record: SchedulerRecord) -> bool:
    return record.state is JobState.PENDING and (record.reason or "") == NEVER_SATISFIED


def _stdout_pattern(record: SchedulerRecord) -> str | None:
    """The StdOut path with this job's id and name put back as ``%j``/``%x``."""
    path = record.stdout_path
    if not path:
        return None
    for value, placeholder in ((record.job_id, "%j"), (record.array_job_id, "%A"),
                               (record.name, "%x")):
        if value and len(value) >= 2:
            path = path.replace(value, placeholder)
    return None if posixpath.basename(path) == _DEFAULT_STDOUT else path


def released_by(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    """Did ``record``'s end make ``candidate`` eligible? It was submitted before that end and
    became eligible only at it: a dependency on ``record`` that SLURM met (and then cleared
    from ``Dependency``). A job with no dependency is eligible at its submit time."""
    if record.end_time is None or candidate.eligible_time is None \
            or candidate.submit_time is None:
        return False
    end, eligible = _utc(record.end_time), _utc(candidate.eligible_time)
    submitted = _utc(candidate.submit_time)
    return (submitted <= end and eligible > submitted
            and end - timedelta(seconds=1) <= eligible <= end + RELEASE_SLACK)


def _own_array(record: SchedulerRecord) -> str | None:
    """The array's own id of a task (``123_4``), or of the array's pending remainder
    (``123`` with its task spec, or squeue -o's ``123_[5-9%2]``), else None."""
    array = _array_id(record.job_id, record.array_job_id)
    return array or (record.job_id if record.labels.get("array_tasks") else None)


_THROTTLE = re.compile(r"%(\d+)\]?$")


def array_throttle(record: SchedulerRecord) -> int | None:
    """How many of the record's array's tasks SLURM runs at once (``--array=0-9%2``: 2; 0
    for no limit), or None when its record does not say."""
    value = record.labels.get("array_throttle")
    if value is not None and value.isdigit():
        return int(value)
    spec = record.labels.get("array_tasks") or record.job_id.partition("_")[2]
    found = _THROTTLE.search(spec)
    return int(found[1]) if found else None


def _sibling_restart(record: SchedulerRecord, candidate: SchedulerRecord) -> bool | None:
    """None when ``candidate`` is not a task of ``record``'s own array; else whether it may
    continue it: only in an array SLURM runs one task at a time (``%1``, a restart chain by
    array). An array run in waves (``%10``, or unthrottled and a few at a time by the
    cluster's room) starts its next task when one ends, a cell of its own, not a restart."""
    own = _own_array(record)
    if own is None or own != _own_array(candidate):
        return None
    return 1 in (array_throttle(record), array_throttle(candidate))


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


DEPENDENCY_REASON = "Dependency"
"""SLURM's reason for a job waiting on its (still unmet) dependency."""


def _co_waiting(record: SchedulerRecord, candidates: Iterable[SchedulerRecord],
                named: set[str], index: ChainIndex,
                may_continue: Callable[[SchedulerRecord], bool]) -> SchedulerRecord | None:
    """A job waiting on ``record`` together with other jobs, after SLURM dropped ``record``
    from its dependency (module docstring, 4.): of the user's workdir, queued while ``record``
    ran, held by a dependency past its end (pending on ``Dependency`` still, naming only the
    others: SLURM deletes each met element of an AND list, ``afterany:A:B`` reads
    ``afterany:B(unfulfilled)`` once A ended; or made eligible by another job's end, which for
    an OR list ``afterany:A?afterany:B`` may come first), each of those jobs queued no later
    than it, and not named as their run's restart (its name stem one of theirs, not
    ``record``'s): a restart of another run in the same workdir is that run's. Only when no
    other job of the workdir ended while it waited (to ``record``'s end, for an OR list):
    then which of them it waited on is unknown. The earliest."""
    if not record.workdir or record.end_time is None or record.submit_time is None:
        return None
    end, stem = _utc(record.end_time), name_stem(record.name)
    # An OR list's dependant started at the first end, beside this job: it may have ended too.
    ran = index.ran_by_place.get((record.user, record.workdir), ())
    found = []
    for s in {r.job_id: r for r in (*candidates, *ran)}.values():
        if (s.job_id == record.job_id or s.job_id in named or s.user != record.user
                or s.workdir != record.workdir or s.state is JobState.CANCELLED
                or _never_starts(s) or _sibling_restart(record, s) is False
                or s.submit_time is None
                or not _utc(record.submit_time) <= _utc(s.submit_time) <= end
                or (s.end_time is not None and _utc(s.end_time) < end) or not may_continue(s)):
            continue
        holders = _holders(record, s, index)
        if (holders and _held_with(record, s, holders, stem) and _alone(record, s, holders, ran)
                and _sole_release(s, index)):
            found.append(s)
    return min(found, key=lambda s: _successor_order(record, s), default=None)


def _holders(record: SchedulerRecord, candidate: SchedulerRecord,
             index: ChainIndex) -> list[SchedulerRecord]:
    """The jobs other than ``record`` that hold ``candidate`` (named in its pending
    ``Dependency``) or released it (ended at its eligibility); none when one it names is not
    in view (nothing tells whose it is then)."""
    if candidate.state is JobState.PENDING:
        if candidate.reason != DEPENDENCY_REASON:
            return []
        ids = {d.job_id for d in dependencies(candidate)}
        found = [r for i in ids if (r := index.live.get(i) or index.ran.get(i)) is not None]
        return found if len(found) == len(ids) else []
    return [r for r in index.ran_by_place.get((record.user, record.workdir or ""), ())
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
    if candidate.state is JobState.PENDING or candidate.eligible_time is None:
        return True
    at = _utc(candidate.eligible_time)
    place = (candidate.user, candidate.workdir or "")
    return not any(
        r.job_id != candidate.job_id and r.eligible_time is not None
        and r.submit_time is not None and r.eligible_time > r.submit_time
        and abs(_utc(r.eligible_time) - at) <= RELEASE_ALONE
        for r in (*index.live_by_place.get(place, ()), *index.ran_by_place.get(place, ())))


def _alone(record: SchedulerRecord, candidate: SchedulerRecord,
           holders: Sequence[SchedulerRecord], ran: Iterable[SchedulerRecord]) -> bool:
    """No job of the workdir but ``record`` and the holders ended while ``candidate`` waited
    (from its submission to its eligibility, or to ``record``'s end when that came later):
    another such end would explain the dropped element as well."""
    if candidate.submit_time is None or record.end_time is None:
        return False
    start, stop = _utc(candidate.submit_time), _utc(record.end_time)
    if candidate.state is JobState.PENDING or candidate.eligible_time is None:
        stop = datetime.max.replace(tzinfo=UTC)  # still waiting: any end since counts
    else:
        stop = max(stop, _utc(candidate.eligible_time)) + RELEASE_ALONE
    skip = {record.job_id, candidate.job_id, *(r.job_id for r in holders)}
    return not any(r.job_id not in skip and r.end_time is not None
                   and start <= _utc(r.end_time) <= stop for r in ran)


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


def _ran_after(record: SchedulerRecord, candidate: SchedulerRecord) -> bool:
    """An ended ``candidate`` started once ``record`` had ended (within a second): it ran
    after it, as its restart does, not beside it."""
    if record.end_time is None or candidate.start_time is None:
        return False
    return _utc(candidate.start_time) >= _utc(record.end_time) - timedelta(seconds=1)


NO_NODES = "None assigned"
"""slurmdbd's node list of a job that never held a node (``sacct``)."""


def _ran(record: SchedulerRecord) -> bool:
    """Whether an ended job ran. SLURM stamps a job cancelled while still pending (a
    dependant left ``DependencyNeverSatisfied``, one given up in the queue) or ended past its
    ``--deadline`` with that moment as its start too: its start is its end and it held no
    node (squeue: none; sacct: slurmdbd's 'None assigned'). Such a job never continued
    anything."""
    if record.start_time is None:
        return False
    held = bool(record.nodes) and record.nodes != NO_NODES
    return held or record.end_time is None or _utc(record.start_time) < _utc(record.end_time)


def _not_continuing(candidate: SchedulerRecord, dependency: Dependency) -> ChainLink:
    job, kind = candidate.job_id, dependency.kind
    return ChainLink(
        blocked=f"only {job} ({candidate.name}) waits on it ({kind}), another kind of job "
                "than this run: no restart queued",
        blocked_short=f"only {job} waits ({candidate.name})")


def _blocked(candidate: SchedulerRecord, dependency: Dependency) -> ChainLink:
    job, kind = candidate.job_id, dependency.kind
    if _never_starts(candidate):
        return ChainLink(
            blocked=f"successor {job} is pending with {NEVER_SATISFIED} ({kind}): "
                    "it will never start",
            blocked_short=f"{job} {NEVER_SATISFIED}")
    if kind in ("afterok", "aftercorr"):
        return ChainLink(
            blocked=f"successor {job} waits {kind}, which a TIMEOUT never satisfies: "
                    "not a chain restart",
            blocked_short=f"successor {job} is {kind}")
    if kind in _AFTER_TIMEOUT:  # a restart's kind: it is another bucket's job
        return _not_continuing(candidate, dependency)
    return ChainLink(blocked=f"successor {job} depends {kind}, not afterany",
                     blocked_short=f"successor {job} is {kind}")


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
        self.attempts = Counter((r.name, r.user) for r in records)
        self._live_names: Counter[tuple[str | None, str]] | None = None
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

    def others_live(self, record: SchedulerRecord) -> bool:
        """Another live job that can still write this run's files: the same user and workdir
        (an array's tasks, a run's chunk jobs) or the same user and name stem. O(1)."""
        if record.workdir and any(r.job_id != record.job_id for r in
                                  self.live_by_place.get((record.user, record.workdir), ())):
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


def _array_id(job_id: str, array_job_id: str | None = None) -> str | None:
    """The array's own id of task ``123_4`` (or of its pending ``123_[5-9]``), else None."""
    array = array_job_id or (job_id.partition("_")[0] if "_" in job_id else None)
    return array if array and array != job_id else None


def _task_id(record: SchedulerRecord) -> str | None:
    return record.array_task_id or (record.job_id.partition("_")[2] or None
                                    if "_" in record.job_id else None)


def _task_index(record: SchedulerRecord) -> int | None:
    """The index of an array's task (``123_4``: 4), None for its pending remainder."""
    task = _task_id(record)
    return int(task) if task is not None and task.isdigit() else None


def _successor_order(record: SchedulerRecord, candidate: SchedulerRecord,
                     ) -> tuple[datetime, int, bool, bool, int, str]:
    """Earliest submitted, lowest id first; among one array's tasks the one with
    ``record``'s task index (a task-wise restart array: 1819_1 -> 1820_1), then the lowest
    task index (by number: 279_9 before 279_10), the array's pending remainder (``279``, one
    id for the tasks not split off yet) last: in a ``%1`` array the task that took over
    continues the TIMEOUT, not the ones still waiting behind it."""
    submitted, _, _ = submit_order(candidate)
    base = (_array_id(candidate.job_id, candidate.array_job_id) or candidate.job_id)
    same = _task_id(record) is not None and _task_id(candidate) == _task_id(record)
    index = _task_index(candidate)
    remainder = index is None and _own_array(candidate) is not None
    return (submitted, int(base) if base.isdigit() else 0, not same, remainder, index or 0,
            candidate.job_id)


def dependency_keys(record: SchedulerRecord) -> tuple[str, ...]:
    """The ids a dependency on ``record`` may name: its own, for an array task its array's
    ``N_*`` (SLURM prints ``--dependency=afterany:N`` on an array so), and for a hetjob's
    component ``N+k`` the hetjob's ``N`` (a dependency names the whole hetjob)."""
    array = _array_id(record.job_id, record.array_job_id)
    if array:
        return record.job_id, f"{array}_*"
    leader, plus, _ = record.job_id.partition("+")
    return (record.job_id, leader) if plus and leader else (record.job_id,)


HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
"""SLURM's reasons for a held job: it never starts until someone releases it."""


def chain_link(
    record: SchedulerRecord,
    records: Sequence[SchedulerRecord],
    known_edges: Mapping[str, str],
    *,
    index: ChainIndex | None = None,
    planned_stop: bool = False,
    success_edges: Mapping[str, str] | None = None,
    continues: Callable[[SchedulerRecord], bool] | None = None,
) -> ChainLink:
    """The restart continuing TIMEOUT ``record``, or why the job waiting on it is none.

    ``index``: ``records`` already indexed (``ChainIndex``); built here when not given.
    ``planned_stop``: ``record`` is COMPLETED, its trainer having stopped itself ahead of the
    walltime for a successor (``report.planned_stop``): found as a TIMEOUT's, but its exit 0
    satisfies ``afterok`` too, so a job waiting so is its restart; no ``blocked`` is given.
    ``success_edges``: remembered ``afterok``/``aftercorr`` edges (:func:`success_edges`),
    read for such a planned stop only (a TIMEOUT never satisfies them).
    ``continues``: whether a job that waits on such a planned stop only by ``afterok`` or
    ``aftercorr`` may continue its run (the judge: not in another configured bucket; an eval
    of the run's checkpoint waits the same way, and is none)."""
    index = index if index is not None else ChainIndex(records)
    link = _chain_link(record, known_edges, index=index, planned_stop=planned_stop,
                       success_edges=success_edges, continues=continues)
    successor = index.live.get(link.successor) if link.successor is not None else None
    if successor is not None and successor.reason in HELD_REASONS:
        return ChainLink(successor=link.successor, held=successor.reason)
    return link


def _chain_link(
    record: SchedulerRecord,
    known_edges: Mapping[str, str],
    *,
    index: ChainIndex,
    planned_stop: bool,
    success_edges: Mapping[str, str] | None,
    continues: Callable[[SchedulerRecord], bool] | None,
) -> ChainLink:
    completed = planned_stop and record.state is JobState.COMPLETED
    if (record.state is not JobState.TIMEOUT and not completed) \
            or record.reason == DEADLINE_REASON:
        return ChainLink()
    keys = dependency_keys(record)
    waiting = sorted(
        ((r, d) for key in keys for r, d in index.waiting_on.get(key, ())
         if r.job_id != record.job_id),
        key=lambda pair: submit_order(pair[0]),
    )
    kinds = _AFTER_SUCCESS if completed else _AFTER_TIMEOUT
    def may_continue(r: SchedulerRecord, kind: str) -> bool:
        # Another bucket's job (an eval of the run's checkpoint) waits the same way as a
        # restart, afterany as well as afterok: it continues no run.
        return continues is None or continues(r)

    restarts = [r for r, d in waiting
                if d.kind in kinds and not _never_starts(r) and may_continue(r, d.kind)]
    if restarts:
        return ChainLink(successor=restarts[0].job_id)
    remembered = next((known_edges[k] for k in keys if k in known_edges), None)
    kind = "afterany"
    if remembered is None and completed and success_edges:
        remembered = next((success_edges[k] for k in keys if k in success_edges), None)
        kind = "afterok"
    known = index.live_successor(remembered, record) if remembered is not None else None
    if (known is not None and known.job_id != record.job_id and not _never_starts(known)
            and may_continue(known, kind)):
        return ChainLink(successor=known.job_id)
    ran = index.ran.get(remembered) if remembered is not None else None
    cancelled: SchedulerRecord | None = None  # a cancelled restart: a live one may follow it
    if (ran is not None and ran.job_id != record.job_id and _ran_after(record, ran)
            and may_continue(ran, kind)):
        if ran.state is not JobState.CANCELLED:
            return ChainLink(successor=ran.job_id, ended=ran.state.value)
        cancelled = ran
    named = {r.job_id for r, _ in waiting}
    place = (record.user, record.workdir or "")
    candidates = {r.job_id: r for r in (*index.live_by_place.get(place, ()),
                                        *index.live_by_user.get(record.user, ()))}
    candidates.update((r.job_id, r) for r in (*index.ran_by_place.get(place, ()),
                                              *index.ran_by_user.get(record.user, ()))
                      if _ran_after(record, r))
    fallback = sorted((r for r in candidates.values()
                       if r.job_id != record.job_id and r.job_id not in named
                       and not _never_starts(r) and _fallback_match(record, r)),
                      key=lambda r: _successor_order(record, r))
    first = next((r for r in fallback if r.state is not JobState.CANCELLED), None)
    if first is None:
        first = _released_restart(record, candidates.values(), named, index,
                                  lambda r: may_continue(r, "afterany"))
    if first is None:
        first = _co_waiting(record, candidates.values(), named, index,
                            lambda r: may_continue(r, "afterany"))
    if first is not None:
        return ChainLink(successor=first.job_id,
                         ended=None if first.job_id in index.live else first.state.value)
    cancelled = cancelled or next(iter(fallback), None) or _cancelled_pending(record, index, kinds)
    if cancelled is not None:
        relaunch = _relaunch(record, cancelled, candidates.values(), named, index)
        if relaunch is not None:
            return ChainLink(successor=relaunch.job_id)
        return ChainLink(cancelled=cancelled.job_id, cancelled_ran=_ran(cancelled))
    if waiting and not completed:
        return _blocked(*waiting[0])
    return ChainLink()



def _cancelled_pending(record: SchedulerRecord, index: ChainIndex,
                       kinds: frozenset[str]) -> SchedulerRecord | None:
    """The earliest restart queued on ``record`` (a dependency of a kind its end satisfies)
    that was cancelled before it started."""
    queued = [r for key in dependency_keys(record)
              for r, d in index.cancelled_waiting.get(key, ())
              if d.kind in kinds and r.job_id != record.job_id]
    return min(queued, key=submit_order, default=None)


def find_successor(
    record: SchedulerRecord,
    records: Sequence[SchedulerRecord],
    known_edges: Mapping[str, str],
) -> str | None:
    """Return the id of the PENDING/RUNNING job continuing TIMEOUT ``record``, else None."""
    return chain_link(record, records, known_edges).successor


def dependency_edges(records: Sequence[SchedulerRecord],
                     kinds: frozenset[str] = _AFTER_TIMEOUT) -> dict[str, str]:
    """Return predecessor -> successor ``afterany``/``afternotok`` edges (or ``kinds``)
    visible this sweep (an ``afternotok`` one read back for a planned stop's exit 0 is
    pending ``DependencyNeverSatisfied`` or gone: never its successor)."""
    edges: dict[str, str] = {}
    for record in sorted(records, key=submit_order):
        for dependency in dependencies(record):
            # The earliest-submitted dependant is the chain's next link; later ones are
            # extra jobs that merely wait for the same predecessor.
            if dependency.kind in kinds:
                edges.setdefault(dependency.job_id, record.job_id)
    return edges


def success_edges(records: Sequence[SchedulerRecord]) -> dict[str, str]:
    """Return predecessor -> successor ``afterok``/``aftercorr`` edges visible this sweep: the
    restart of a planned stop (whose exit 0 satisfies them), kept because SLURM clears a met
    dependency once the successor starts, and a renamed one elsewhere has nothing else to
    match it by."""
    return dependency_edges(records, _SUCCESS_ONLY)
