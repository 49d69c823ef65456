"""What changed between two sweeps: the events the day's thread and the job-end DMs report.

Policy: pure. A sweep is reduced to a small :class:`Snapshot` per job (state, verdict, whether
it is stalled, whether a TIMEOUT is a chain restart); :func:`diff` compares the previous
snapshots with the current report and returns at most one :class:`Change` per job, the most
important one: a terminal transition (failed, cancelled, restarted, finished) before a live row
judged failed (``failed``: a Kubernetes silent wedge, a recurring crash loop; not told again
when its state then turns terminal FAILED), a live restart (``restarted``: a Kubernetes Job
restarting a failed attempt), each quoting its Trend, then ``collapsed``, ``stalled``, a
restart count risen since (``restarted``: an attempt that failed and was retried between two
sweeps; once an episode, not at each sweep it rises again), a running job pending again
(``restarted``: preempted and queued again), ``warning`` (a run turning to a warning: grad norm
over 1.0 on two steps, which the seed says has predicted a collapse 2-5 steps early, dead
rollouts, a fault while it runs; told when it begins, not when it ends: the parent shows it
gone), ``recovered``, then ``started``. A chain restart's successor started in the same sweep
is told by the restart's line (which names it), not as started too. A job seen for the first
time while it runs counts as started; a first sight of a pending job says nothing (it has not
started). A job that left the report (aged out) says nothing either. With no previous snapshots
at all (the very first sweep) there is no baseline: the caller reports nothing.

A start (a plain job's, an array task's, a requeued run's again: :func:`through_requeue`) and
an array's waves (a task finished while others still run or wait) are ``routine``: listed only
in a reply that goes out anyway, as a chain restart is.

A pending array's unsplit remainder is one record under the array's own id standing for many
tasks (``report.grouping.pending_task_counts``); its change carries that count (``tasks``), so a
merged line counts tasks, not records, and names the remainder ``A [N tasks]`` after the tasks
split off (a cancelled ``--array=0-9%2`` with two tasks started reads ``×10``, not ``×3``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from probes.models import ACTIVE_STATES, ClusterFacts, Frozen, JobState
from report.cells import one_line
from report.models import JobReport, Report
from report.trend import shorten

ChangeKind = Literal["started", "finished", "failed", "collapsed", "restarted", "stalled",
                     "warning", "recovered", "cancelled"]
Key = tuple[str, str]

WHY_CHARS = 160
"""A live change's Trend quoted in its line (a restart's count and how the attempt ended, a
wedge's or crash loop's why)."""
_TROUBLED = frozenset({"collapse", "stalled"})
"""What a recovery is told from: the troubles the thread told (``collapsed``, ``stalled``).
``unknown`` (a log that could not be fetched: ``bot.log_watch`` tells it) is no trouble of the
run's, and a ``warning``'s end is no news: its beginning is told (``warning``), and a grad norm
hovering at its threshold reads warning and healthy by turns; each turn back was a
'recovered' reply (11 in a simulated day)."""
_UNTOLD_READS = frozenset({"unknown", "warning"})
"""Reads that neither tell nor end a told trouble: a collapse whose window has filled with
its own high grad norms reads ``warning`` (the entropy test no longer fires), and is the same
episode until it reads healthy; its warning is not a new one either."""
_STALL_FLAGS = frozenset({"stall", "zombie"})


class Snapshot(Frozen):
    """What a job looked like at one sweep (what change detection compares)."""

    state: JobState
    verdict: str
    stalled: bool = False
    chain: bool = False
    restarts: int | None = None
    """The scheduler's restart count (SLURM requeues; Kubernetes container restarts, failed
    pods and JobSet restarts): a rise is a restart, also one no sweep saw under way."""
    restarting: bool = False
    """Its restart count rose at this sweep: an episode of restarts under way (an attempt
    failing and retried sweep after sweep), told when it began (:func:`through_restarts`); a
    rise at the next sweep is the same episode, a sweep without one ends it."""
    requeued: bool = False
    """Pending again after it ran (preempted, requeued: told 'restarted'), until it runs:
    its start then is the requeue working (:func:`through_requeue`)."""


class Change(Frozen):
    """One job's change since the last sweep."""

    kind: ChangeKind
    cluster: str
    job_id: str
    name: str
    state: JobState
    verdict: str
    why: str
    tasks: int = 1
    """How many array tasks the job stands for (a pending array's unsplit remainder: many)."""
    routine: bool = False
    """A change that is the run working as planned (a chain restart: a walltime TIMEOUT whose
    afterany successor is queued, the seed's 'normal, NOT a failure'; an array's wave, see
    :func:`_waves`): the day's thread lists it in a reply that goes out anyway, but it opens
    no reply of its own."""


def snapshot(job: JobReport, restarts: int | None = None) -> Snapshot:
    return Snapshot(state=job.state, verdict=job.verdict,
                    stalled=job.verdict == "stalled" or bool(_STALL_FLAGS & set(job.flags)),
                    chain="chain-restart" in job.flags, restarts=restarts)


def through_untold(before: Snapshot | None, now: Snapshot) -> Snapshot:
    """``now``, or, for a job read ``unknown`` (its log not fetched) or ``warning``
    (:data:`_UNTOLD_READS`) whose last snapshot was a trouble told (:data:`_TROUBLED`, a
    stall) in the same state, that trouble kept: its end is still news once the job reads
    healthy (collapse, unknown or warning, healthy is 'recovered: was collapse'), and the
    trouble again is none (collapse, warning, collapse says nothing)."""
    if now.verdict not in _UNTOLD_READS or before is None or before.state is not now.state \
            or not (before.verdict in _TROUBLED or before.stalled):
        return now
    return now.model_copy(update={"verdict": before.verdict, "stalled": before.stalled})


def through_requeue(before: Snapshot | None, now: Snapshot) -> Snapshot:
    """``now``, marked ``requeued`` while it is pending after it ran (``before`` running or
    completing, or already marked): its next start is routine, not a reply of its own."""
    if now.state is not JobState.PENDING or before is None or not (
            before.requeued or before.state in {JobState.RUNNING, JobState.COMPLETING}):
        return now
    return now.model_copy(update={"requeued": True})


def through_restarts(before: Snapshot | None, now: Snapshot) -> Snapshot:
    """``now``, marked ``restarting`` when its restart count rose since ``before``: a rise
    at the next sweep too is the episode going on, not told again."""
    if before is None or before.restarts is None or now.restarts is None \
            or now.restarts <= before.restarts:
        return now
    return now.model_copy(update={"restarting": True})


def snapshots(report: Report, restarts: Mapping[Key, int] | None = None) -> dict[Key, Snapshot]:
    counts = restarts or {}
    return {(j.cluster, j.job_id): snapshot(j, counts.get((j.cluster, j.job_id)))
            for j in report.jobs}


def restart_counts(facts: Sequence[ClusterFacts]) -> dict[Key, int]:
    """Each job's restart count as its scheduler gives it (``SchedulerRecord.restarts``)."""
    return {(c.name, j.record.job_id): j.record.restarts for c in facts for j in c.jobs}


def encode_key(key: Key) -> str:
    return f"{key[0]}\x1f{key[1]}"


def decode_key(text: str) -> Key:
    cluster, _, job_id = text.partition("\x1f")
    return cluster, job_id


def _terminal(prev: Snapshot | None, cur: Snapshot, job: JobReport) -> Change | None:
    if cur.state in ACTIVE_STATES or cur.state is JobState.UNKNOWN:
        return None
    if prev is not None and prev.state == cur.state:
        return None
    if cur.state is JobState.COMPLETED:
        return _change("finished", job, "completed")
    if cur.state is JobState.CANCELLED:
        return _change("cancelled", job, "cancelled")
    if cur.state is JobState.TIMEOUT and cur.chain:
        if prev is not None and prev.chain:
            return None  # told while SLURM was ending it at its walltime (COMPLETING)
        return _change("restarted", job, f"chain restart → {job.successor or 'successor'}"
                       ).model_copy(update={"routine": True})
    if prev is not None and prev.verdict == "failed":
        return None  # told when its live row was judged failed (a wedge, a crash loop)
    if cur.state is JobState.PREEMPTED:
        # Terminal: a preempted job that is requeued is PENDING again (told above as such);
        # this one ended, and is resubmitted by hand or not at all.
        return _change("failed", job, "preempted")
    return _change("failed", job, cur.state.value)


def _change(kind: ChangeKind, job: JobReport, why: str) -> Change:
    return Change(kind=kind, cluster=job.cluster, job_id=job.job_id, name=one_line(job.name),
                  state=job.state, verdict=job.verdict, why=why)


def _why(job: JobReport, default: str) -> str:
    """A live change's why: the row's Trend, shortened (how it ended, the count, the error)."""
    return shorten(one_line(job.trend), WHY_CHARS) if job.trend.strip() else default


def change_of(prev: Snapshot | None, job: JobReport,
              restarts: int | None = None) -> Change | None:
    """The one change worth telling for ``job`` (``prev``: its last snapshot, if any;
    ``restarts``: its scheduler's restart count now, where known)."""
    cur = snapshot(job, restarts)
    terminal = _terminal(prev, cur, job)
    if terminal is not None or cur.state not in ACTIVE_STATES:
        return terminal
    was = prev or Snapshot(state=JobState.PENDING, verdict="buffering")
    if cur.verdict == "failed":
        # A live row judged failed (Kubernetes running with 0 pods, a recurring crash loop):
        # terminal per the rulebook while the scheduler still calls it live; told once.
        if was.verdict == "failed":
            return None
        return _change("failed", job, _why(job, "judged failed"))
    if cur.verdict == "restarting":
        # A live job restarting a failed attempt (a Kubernetes Job under its backoffLimit):
        # an attempt ended, as a terminal transition is; told when it turns so, once.
        if was.verdict == "restarting":
            return None
        return _change("restarted", job, _why(job, "an attempt failed; restarting"))
    if cur.verdict == "collapse" and was.verdict != "collapse":
        return _change("collapsed", job, "collapse rule fired")
    if cur.stalled and not was.stalled:
        # The Trend says why it stands still (a stall's silence, a hold and its remedy).
        return _change("stalled", job,
                       "zombie" if "zombie" in job.flags else _why(job, "no progress"))
    if prev is not None and prev.restarts is not None and restarts is not None \
            and restarts > prev.restarts:
        # An attempt ended and the job runs (or waits) again, maybe never seen restarting;
        # told once an episode: a rise at the sweep before was told (or was the same run of
        # retries), and the recurring-failure rule, when it fires, is told as 'failed'.
        if prev.restarting:
            return None
        n = restarts - prev.restarts
        return _change("restarted", job, f"{n} restart{'s' if n > 1 else ''} since the last "
                       f"sweep; {job.state.value.lower()} again")
    if prev is not None and prev.state in {JobState.RUNNING, JobState.COMPLETING} \
            and cur.state is JobState.PENDING:
        # Off its nodes and queued again (Kueue preempted and suspended it; a requeue).
        return _change("restarted", job, _why(job, "pending again"))
    if cur.verdict == "warning" and was.verdict not in {"warning", *_TROUBLED} \
            and not was.stalled:
        # The seed's early notice (grad norm over 1.0 on two steps has predicted a collapse
        # 2-5 steps early), told while it can still be acted on: once, when it begins (a
        # warning told today again is left out by bot.repeats), not when it ends.
        return _change("warning", job, _why(job, "judged warning"))
    if (was.verdict in _TROUBLED or was.stalled) and cur.verdict in {"healthy", "buffering"} \
            and not cur.stalled:
        return _change("recovered", job, f"was {was.verdict}")
    if cur.state is not JobState.PENDING and (prev is None or prev.state not in
                                              {JobState.RUNNING, JobState.COMPLETING}):
        # A start is the queue working (a busy cluster starts dozens a day; a requeued run
        # starting again is its told requeue working): listed only in a reply that goes out
        # anyway, never a reply of its own. Its trouble, when it comes, is the news.
        return _change("started", job, "running").model_copy(update={"routine": True})
    return None


def diff(previous: Mapping[Key, Snapshot], report: Report, *,
         pending_tasks: Mapping[Key, int] | None = None,
         restarts: Mapping[Key, int] | None = None) -> list[Change]:
    """Every job's change since ``previous``, in the report's order (a chain restart's
    successor started with it is told by the restart's line). ``pending_tasks``: unsplit
    array remainders -> the tasks each stands for (``report.grouping.pending_task_counts``);
    ``restarts``: each job's restart count now (:func:`restart_counts`)."""
    changes = []
    counts = restarts or {}
    for job in report.jobs:
        key = (job.cluster, job.job_id)
        found = change_of(previous.get(key), job, counts.get(key))
        if found is not None:
            tasks = (pending_tasks or {}).get(key)
            changes.append(found.model_copy(update={"tasks": tasks}) if tasks else found)
    changes = _waves(changes, report)
    # A chain restart's line names its successor: the successor's start in the same sweep is
    # that line, not one more (six restarts of a day were twelve lines).
    restarted = {(c.cluster, c.job_id) for c in changes if c.kind == "restarted"}
    successors = {(j.cluster, j.successor) for j in report.jobs
                  if j.successor and "chain-restart" in j.flags
                  and (j.cluster, j.job_id) in restarted}
    return [c for c in changes
            if not (c.kind == "started" and (c.cluster, c.job_id) in successors)]


_ARRAY_TASK = re.compile(r"^(?P<array>\d+)_\d+$")


def _array(job_id: str) -> str:
    """The array an id belongs to (``8800_3`` -> ``8800``; its unsplit remainder is the
    array's own id); any other id is its own."""
    match = _ARRAY_TASK.match(job_id)
    return match["array"] if match else job_id


def _waves(changes: list[Change], report: Report) -> list[Change]:
    """``changes`` with an array's waves made routine: a task that finished while other tasks
    of its array are still pending or running (``--array=0-15%4``: a wave ends and the next
    starts every hour; the array is one run going as planned; every start is routine anyway).
    Its end (the last task done: the follow-up line and the DM count every task) stays news,
    as does any task failing."""
    if not any(_ARRAY_TASK.match(c.job_id) for c in changes):
        return changes
    live: dict[Key, set[str]] = {}
    for job in report.jobs:
        if job.state in ACTIVE_STATES:
            live.setdefault((job.cluster, _array(job.job_id)), set()).add(job.job_id)

    def others(pool: dict[Key, set[str]], change: Change) -> bool:
        ids = pool.get((change.cluster, _array(change.job_id)), set())
        return len(ids - {change.job_id}) > 0

    return [c.model_copy(update={"routine": True})
            if _ARRAY_TASK.match(c.job_id) and c.kind == "finished" and others(live, c)
            else c for c in changes]


def _shown_id(change: Change) -> str:
    ref = f"{change.cluster}:{change.job_id}"
    return f"{ref} [{change.tasks} tasks]" if change.tasks > 1 else ref


def merged_lines(changes: Sequence[Change], *, shown: int = 3) -> list[str]:
    """One line per (kind, job name): array tasks that changed alike share a line."""
    groups: dict[tuple[str, str, str], list[Change]] = {}
    for change in changes:
        groups.setdefault((change.kind, change.cluster, change.name), []).append(change)
    lines = []
    for (kind, _, name), group in groups.items():
        # Split-off tasks first: a remainder is no task among them but the tasks never split.
        members = sorted(group, key=lambda c: c.tasks > 1)
        ids = ", ".join(_shown_id(c) for c in members[:shown])
        more = f" +{len(members) - shown} more" if len(members) > shown else ""
        total = sum(c.tasks for c in members)
        count = f" ×{total}" if total > 1 else ""
        lines.append(f"• {kind}: {name}{count} ({ids}{more}) — {members[0].why}")
    return lines


def read_before(seen: Any) -> set[str] | None:
    """The clusters the digest has read (status ok) at some sweep, as the last one stored
    them; None for a record written before it kept them (every cluster taken as known)."""
    names = seen.get("clusters") if isinstance(seen, dict) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else None


def clusters_read(known: set[str] | None, report: Report) -> list[str]:
    """:func:`read_before` for the next sweep: the clusters read now, and those read before
    that this sweep could not read (unreachable, inactive: their jobs are kept by
    ``bot.digest.seen_now``). A cluster gone from the config (renamed) is forgotten, and a cluster
    first read (added, renamed) tells nothing its first sweep reports: its ended jobs ended
    before the bot watched it, as at the very first sweep."""
    ok = {c.name for c in report.clusters if c.status == "ok"}
    unread = {c.name for c in report.clusters if c.status != "ok"}
    return sorted(ok | ((known or set()) & unread))
