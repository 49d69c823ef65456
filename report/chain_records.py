"""What one SLURM record says for restart chains (:mod:`report.chain`'s vocabulary).

Its typed dependency elements, its run's name stem (restart suffixes stripped), its array and
task, when it was queued, made eligible, ran and ended, and the order successors are taken in.
Pure functions of one or two records; :mod:`report.chain` states the policy they serve.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from probes.models import JobState, SchedulerRecord

RELEASE_SLACK = timedelta(minutes=2)
"""How long after a job's end slurmctld may take to mark its dependants eligible (it does so
on its next dependency pass, normally within seconds)."""


NEVER_SATISFIED = "DependencyNeverSatisfied"
"""SLURM's pending reason for a dependant whose dependency can no longer be met."""


DEPENDENCY_REASON = "Dependency"
"""SLURM's reason for a job waiting on its (still unmet) dependency."""


BEGIN_REASON = "BeginTime"
"""SLURM's reason for a job held by ``--begin``: its ``eligible_time`` is that clock time from
its submission on (SLURM 22.05: ``--begin=now+75`` pends ``BeginTime``, eligible at submit +
75 s), no job's end."""


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


# Only the markers that say "restart" in words: a bare number ("-2", ".2") is as often a
# grid's cell or a seed ("exp-1", "exp-2") as a resume's count.
_RESTART_WORD = re.compile(
    r"[-_.](?:r|re|retry|try|attempt|restart|resume|resumed|requeue|cont|continue|part)\d*$",
    re.IGNORECASE,
)


_BARE_NUMBER = re.compile(r"[-_.]\d+$")


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


def run_key(name: str) -> str:
    """``name`` without the suffixes that name a restart in words (``-r2``, ``_resume``,
    ``-part2``, ``-cont``), lowercased: ``exp-1-r2`` -> ``exp-1``. Unlike :func:`name_stem`
    it keeps a bare number, which tells a grid's cells and seeds apart."""
    key = name.strip()
    while (shorter := _RESTART_WORD.sub("", key)) != key and shorter:
        key = shorter
    return key.lower()


def same_run_name(name: str, other: str) -> bool:
    """Whether ``other`` names the run ``name`` names: the same :func:`run_key`, or one that
    key with a bare number appended (``sft-b`` -> ``sft-b.2``, ``exp-1`` -> ``exp-1.2``: a
    resume's count). Two different numbers on one base (``exp-1``, ``exp-2``) are two cells
    or seeds: the name alone says nothing of a restart."""
    key, other_key = run_key(name), run_key(other)
    if key == other_key:
        return True
    shorter, longer = sorted((key, other_key), key=len)
    return (longer.startswith(shorter)
            and _BARE_NUMBER.fullmatch(longer[len(shorter):]) is not None)


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


def _still_waiting(record: SchedulerRecord) -> bool:
    """Pending on its dependency (some element still unmet)."""
    return record.state is JobState.PENDING and record.reason == DEPENDENCY_REASON


def _waits_for_begin(record: SchedulerRecord) -> bool:
    """Pending on its ``--begin`` time: its eligible time is that clock time, no release."""
    return record.state is JobState.PENDING and record.reason == BEGIN_REASON


def _released(record: SchedulerRecord) -> bool:
    """Made eligible after its submission (a met dependency, or ``--begin`` once that time
    came): still pending for room (``Priority``, ``Resources``), running or ended. One still
    pending on its begin time is not yet."""
    return (not _still_waiting(record) and not _waits_for_begin(record)
            and record.eligible_time is not None
            and record.submit_time is not None and record.eligible_time > record.submit_time)


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
    from ``Dependency``). A job with no dependency is eligible at its submit time; one pending
    on its ``--begin`` shows that time as its eligible time from its submission on: a clock
    time, never a release (once it started, SLURM's record no longer tells the two apart)."""
    if record.end_time is None or candidate.eligible_time is None \
            or candidate.submit_time is None or _waits_for_begin(candidate):
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
