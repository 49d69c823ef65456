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
   once RUNNING, started when the predecessor ended or later: one that started before ran
   beside it (a seed under one name; not the copy its trap queued near the end, ``sbatch $0``
   on ``--signal``: ``chain_match._trap_copy``), it did not continue it. A task of its own
   array (or its pending remainder) is a fallback only when the array runs one task at a
   time (``--array=0-9%1``, squeue's ``array_max_tasks`` 1: a restart chain by array); an
   array run in waves (``%10``, or unthrottled) starts its next task when one ends. A job
   that still names the predecessor with another dependency type is never a fallback. The
   workdir may differ (a launcher that gives each attempt its own run directory) when SLURM's
   own times say the predecessor's end released the job: submitted before that end, made
   eligible only at it (``eligible_time`` within :data:`RELEASE_SLACK` after ``end_time``),
   which is what a cleared ``afterany`` leaves behind. The same times find a restart of
   another name in the same workdir (``-d afterany:A:B``, B of another name: rule 1 names it
   while it waits), when no other job of the user there ended then (:func:`_released_restart`).
   A stem joins a grid's numbered cells and seeds (``exp-1``, ``exp-2``): a job not of the
   run's own name (:func:`same_run_name`) or matched by StdOut pattern only needs SLURM's
   evidence (``chain_match._held_for``: queued after the end, or released at it by no other
   end); a job of its own name queued before it started that never waited is a copy beside
   it (``_queued_beside``). The run's own name goes first.
   A ``--begin`` time is no release (:data:`BEGIN_REASON`): the run's own copy queued so is
   its restart (SLURM starts it whatever the predecessor did), a sibling cell's is none, and
   another name tied by ``--output`` only when it begins after the end (``_begins_after``).

4. a job that waited on it together with other jobs (``-d afterany:A:B``, or the OR list
   ``afterany:A?afterany:B``): SLURM deletes each met element of an AND list (``afterany:A:B``
   reads ``afterany:B(unfulfilled)`` once A ended) and clears an OR list at its first met
   element, so A is named no more (an array's ``afterany:N_*`` or ``afterany:N_3`` left
   beside it reads as the array's tasks in view). A job of the user's workdir queued while
   the TIMEOUT ran, held by a dependency past its end (still pending on ``Dependency``, or
   made eligible by another job's end, before it for an OR list), each job holding it
   queued no later than it and of another run than its own name says (:func:`_co_waiting`;
   ``exp-2-r2`` waiting on ``exp-2`` is that cell's, ``exp-2`` no restart of ``exp-1``), of
   the TIMEOUT's own bucket (the judge's ``co_waits``: an upload of another run, waiting on
   that run, reads the same and continues none). A job named as another run's restart is
   that run's only: without a remembered edge, SLURM's record no longer says it waited on
   this one too.

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
leaves for the next one to compare with lives in :mod:`report.memory`. The edges remembered
between sweeps are :mod:`report.chain_edges`; the fallback's candidates :mod:`report.chain_pool`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from probes.models import JobState, SchedulerRecord
from report.chain_edges import dependency_edges, same_owner, success_edges
from report.chain_index import ChainIndex
from report.chain_match import (
    RELAUNCH_WINDOW,
    RELEASE_ALONE,
    SUBMIT_SLACK,
    _co_waiting,
    _fallback_match,
    _relaunch,
    _released_restart,
    fallback_order,
)
from report.chain_pool import _cancelled_pending, _candidates, _released_pool
from report.chain_records import (
    _AFTER_SUCCESS,
    _AFTER_TIMEOUT,
    _LIVE,
    BEGIN_REASON,
    NEVER_SATISFIED,
    NO_NODES,
    RELEASE_SLACK,
    Dependency,
    _never_starts,
    _ran,
    _ran_after,
    array_throttle,
    dependencies,
    dependency_keys,
    name_stem,
    released_by,
    run_key,
    same_run_name,
    strip_attempt,
    submit_order,
)

__all__ = [
    "BEGIN_REASON",
    "DEADLINE_REASON",
    "HELD_REASONS",
    "NEVER_SATISFIED",
    "NO_NODES",
    "RELAUNCH_WINDOW",
    "RELEASE_ALONE",
    "RELEASE_SLACK",
    "SUBMIT_SLACK",
    "_LIVE",
    "ChainIndex",
    "ChainLink",
    "Dependency",
    "array_throttle",
    "chain_link",
    "dependencies",
    "dependency_edges",
    "dependency_keys",
    "fallback_order",
    "find_successor",
    "name_stem",
    "released_by",
    "run_key",
    "same_run_name",
    "strip_attempt",
    "submit_order",
    "success_edges",
]
"""The chain's vocabulary, re-exported from :mod:`report.chain_records`,
:mod:`report.chain_index`, :mod:`report.chain_match` and :mod:`report.chain_edges` for the
judge and the bot's memory
(``_LIVE`` for tests/report/test_chain_index.py, which reads the rules as ``report.chain._...``)."""

DEADLINE_REASON = "DeadLine"
"""SLURM's reason for a job it ended at its ``--deadline`` (state DEADLINE, TIMEOUT to the
contract; ``probes.slurm`` gives every record in that state this reason): no walltime TIMEOUT,
so no chain restart (``report.holds``)."""


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
    stopped: str | None = None
    """A restart that ran and failed (``ended`` says how): the chain stopped there, so the
    TIMEOUT is no normal restart and has no successor."""


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
    co_waits: Callable[[SchedulerRecord], bool] | None = None,
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
    of the run's checkpoint waits the same way, and is none).
    ``co_waits``: whether a job that no longer names ``record`` may be the restart rule 4
    finds (:func:`_co_waiting`; default ``continues``): the judge, of ``record``'s own bucket
    only. Its record is an unrelated job's as well (an upload waiting on another run of the
    workdir), so a catch-all task is none unless the TIMEOUT is one too."""
    index = index if index is not None else ChainIndex(records)
    link = _chain_link(record, known_edges, index=index, planned_stop=planned_stop,
                       success_edges=success_edges, continues=continues, co_waits=co_waits)
    successor = index.live.get(link.successor) if link.successor is not None else None
    if successor is not None and successor.reason in HELD_REASONS:
        return ChainLink(successor=link.successor, held=successor.reason)
    if link.ended in STOPPED_CHAIN and link.successor is not None and not _went_on(
            link.successor, known_edges, index=index, continues=continues, co_waits=co_waits):
        # The restart ran and failed: the run stopped there, nothing continues it (the seed's
        # normal restart has its successor RUNNING/PENDING); its own row says why it failed.
        return ChainLink(stopped=link.successor, ended=link.ended)
    return link


def _went_on(
    failed_id: str,
    known_edges: Mapping[str, str],
    *,
    index: ChainIndex,
    continues: Callable[[SchedulerRecord], bool] | None,
    co_waits: Callable[[SchedulerRecord], bool] | None,
) -> bool:
    """Whether a later attempt continued the run past its failed restart ``failed_id``: an
    ``afterany`` chain releases its next link whatever the last one's end, so the link after
    it is found as a TIMEOUT's would be (the same rules), or one that ran and was cancelled
    (the run stopped at that cancel, told by its own row). Then the chain did not stop there."""
    failed = index.ran.get(failed_id)
    if failed is None:
        return False
    as_timeout = failed.model_copy(update={"state": JobState.TIMEOUT, "reason": None})
    after = _chain_link(as_timeout, known_edges, index=index, planned_stop=False,
                        success_edges=None, continues=continues, co_waits=co_waits)
    return after.successor is not None or (after.cancelled is not None and after.cancelled_ran)


STOPPED_CHAIN = frozenset(s.value for s in (
    JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.PREEMPTED))
"""A restart's end that stops the chain: it failed (a TIMEOUT or COMPLETED went on or
finished the run)."""


def _chain_link(
    record: SchedulerRecord,
    known_edges: Mapping[str, str],
    *,
    index: ChainIndex,
    planned_stop: bool,
    success_edges: Mapping[str, str] | None,
    continues: Callable[[SchedulerRecord], bool] | None,
    co_waits: Callable[[SchedulerRecord], bool] | None,
) -> ChainLink:
    completed = planned_stop and record.state is JobState.COMPLETED
    if (record.state is not JobState.TIMEOUT and not completed) \
            or record.reason == DEADLINE_REASON:
        return ChainLink()
    # Another bucket's job (an eval of the run's checkpoint) waits the same way as a restart,
    # afterany as well as afterok: it continues no run.
    ok: Callable[[SchedulerRecord], bool] = continues or (lambda _r: True)
    waiting = sorted(
        ((r, d) for key in dependency_keys(record) for r, d in index.waiting_on.get(key, ())
         if r.job_id != record.job_id and same_owner(record, r)),
        key=lambda pair: submit_order(pair[0]),
    )
    kinds = _AFTER_SUCCESS if completed else _AFTER_TIMEOUT
    restarts = [r for r, d in waiting if d.kind in kinds and not _never_starts(r) and ok(r)]
    if restarts:
        return ChainLink(successor=restarts[0].job_id)
    link, cancelled = _remembered(record, known_edges, success_edges if completed else None,
                                  index, ok)
    if link is not None:
        return link
    named = {r.job_id for r, _ in waiting}
    pool = _candidates(record, index)
    fallback = sorted((r for r in pool
                       if r.job_id != record.job_id and r.job_id not in named
                       and not _never_starts(r) and _fallback_match(record, r, index)),
                      key=lambda r: fallback_order(record, r))
    first = (next((r for r in fallback if r.state is not JobState.CANCELLED), None)
             or _released_restart(record, _released_pool(record, index), named, index, ok)
             or _co_waiting(record, named, index, co_waits or ok))
    if first is not None:
        return ChainLink(successor=first.job_id,
                         ended=None if first.job_id in index.live else first.state.value)
    cancelled = cancelled or next(iter(fallback), None) or _cancelled_pending(record, index, kinds)
    if cancelled is not None:
        relaunch = _relaunch(record, cancelled, pool, named, index)
        if relaunch is not None:
            return ChainLink(successor=relaunch.job_id)
        return ChainLink(cancelled=cancelled.job_id, cancelled_ran=_ran(cancelled))
    if waiting and not completed:
        return _blocked(*waiting[0])
    return ChainLink()


def _remembered(record: SchedulerRecord, known_edges: Mapping[str, str],
                success_edges: Mapping[str, str] | None, index: ChainIndex,
                ok: Callable[[SchedulerRecord], bool],
                ) -> tuple[ChainLink | None, SchedulerRecord | None]:
    """Rule 2: the successor a remembered edge names (an ``afterany`` one, else, for a
    planned stop, ``success_edges``' ``afterok``), live, or ended once it had run after
    ``record``; or, second, that remembered restart if it was cancelled (a live job may still
    follow it)."""
    keys = dependency_keys(record)
    remembered = next((known_edges[k] for k in keys if k in known_edges), None)
    if remembered is None and success_edges:
        remembered = next((success_edges[k] for k in keys if k in success_edges), None)
    if remembered is None:
        return None, None
    known = index.live_successor(remembered, record)
    if (known is not None and known.job_id != record.job_id and not _never_starts(known)
            and ok(known) and same_owner(record, known)):
        return ChainLink(successor=known.job_id), None
    ran = index.ran.get(remembered)
    if ran is None or ran.job_id == record.job_id or not _ran_after(record, ran) or not ok(ran) \
            or not same_owner(record, ran):
        return None, None
    if ran.state is not JobState.CANCELLED:
        return ChainLink(successor=ran.job_id, ended=ran.state.value), None
    return None, ran


def find_successor(
    record: SchedulerRecord,
    records: Sequence[SchedulerRecord],
    known_edges: Mapping[str, str],
) -> str | None:
    """Return the id of the PENDING/RUNNING job continuing TIMEOUT ``record``, else None."""
    return chain_link(record, records, known_edges).successor
