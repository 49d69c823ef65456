"""SLURM jobs stopped by a person or the scheduler: held in the queue, or suspended on nodes.

Policy. A held job (``JobHeldUser``/``JobHeldAdmin``: ``sbatch -H``, ``scontrol hold``,
``scontrol requeuehold``) has priority 0 and never starts until someone releases it: it is in
no queue admission, so no ``buffer-filling``; verdict ``stalled`` (nothing moves without a
human), and the recommendation (``diagnose``: someone decides) says how to release it (an
administrator's hold is to be asked about). A suspended job (``scontrol suspend``, gang
scheduling, preemption by suspension) is RUNNING to the contract, as it holds its nodes, with
the reason ``Suspended`` (``probes.slurm.parse``): its log's silence is the suspension, not a
hang, so no ``stall``, and the Trend says it first; its verdict is otherwise what its metrics
say (gang scheduling suspends jobs every few seconds: a verdict flipping with it would alert
for nothing). A job
SLURM ended at its ``--deadline`` (state DEADLINE, reason ``DeadLine``; TIMEOUT to the contract,
which has no such state) is no walltime TIMEOUT and no chain restart: most never started (the
deadline passed in the queue); verdict ``failed``, a diagnose to resubmit with a later deadline.
A job SLURM is ending at its walltime (COMPLETING, reason ``TimeLimit``: slurmctld's
TIMEOUT|COMPLETING while its processes are killed) is judged as the TIMEOUT it is about to
be (:func:`walltime_ending`): its restart is named now, not after the run is gone. A resume
queued behind its run's live attempt (``sbatch --dependency=afterany:A`` of the same run name
and user, pending ``Dependency``: :func:`resumed_attempt`) waits on that attempt's end, in no
queue admission, so no ``buffer-filling`` either (the seed counts such resume copies apart from
the pending work); its verdict stays ``buffering`` (no metric yet), its Trend names the attempt,
and the summary counts it as a queued resume (:func:`is_queued_resume`).
"""

from __future__ import annotations

from collections.abc import Mapping

from probes.models import JobState, SchedulerRecord
from report.chain import DEADLINE_REASON, HELD_REASONS
from report.chain_records import _AFTER_TIMEOUT, DEPENDENCY_REASON, dependencies, same_run_name
from report.findings import Findings, JudgeContext, Priority, pending_note
from report.models import JobReport
from report.pods import SUSPENDED
from report.trend import shorten


def held_rule(ctx: JudgeContext, f: Findings) -> None:
    """A held pending job: out of the buffer table, stalled, with how to release it."""
    record = ctx.facts.record
    if ctx.state is not JobState.PENDING or record.reason not in HELD_REASONS:
        return
    if "buffer-filling" in f.flags:
        f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")
    f.verdict("stalled")
    f.trend(Priority.TERMINAL, pending_note(record, ctx.now))
    release = f"scontrol release {record.job_id}"
    if record.reason == "JobHeldAdmin":
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"held by an administrator (JobHeldAdmin): it will never start on its own; "
                    f"ask why, then `{release}` (as an operator) or cancel it")
    else:
        # Not ``none``: it never starts on its own, and a ``none`` is shown nowhere (the
        # job-end DM, the catch-all note), which left only the Trend saying it is held.
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"held by its owner (JobHeldUser): it will not start until released; "
                    f"`{release}` lets it start, or cancel it if it is not wanted")


def suspended_rule(ctx: JudgeContext, f: Findings) -> None:
    """A suspended job: its silence is no stall, and the Trend says it is suspended."""
    record = ctx.facts.record
    if ctx.state is not JobState.RUNNING or record.reason != SUSPENDED:
        return
    if "stall" in f.flags:
        f.flags.remove("stall")
        f.verdicts.discard("stalled")
        f.recommendations = [(p, r) for p, r in f.recommendations
                             if not r.why.startswith("STALL")]
    said = f.settled_trend()
    # Above every other Trend (it says why they stand still), keeping the one it leads.
    f.trend(Priority.CANCEL + 5, shorten(f"{SUSPENDED_TEXT}; {said}" if said else SUSPENDED_TEXT))


SUSPENDED_TEXT = "Suspended"


def deadline_rule(ctx: JudgeContext, f: Findings) -> bool:
    """A job ended at its ``--deadline``: said so (True), not judged as a walltime TIMEOUT."""
    record = ctx.facts.record
    if ctx.state is not JobState.TIMEOUT or record.reason != DEADLINE_REASON:
        return False
    ran = bool(record.nodes) or bool(record.elapsed_s)
    when = "at its --deadline" if ran else "its --deadline passed before it started"
    f.verdict("failed")
    f.trend(Priority.TERMINAL, f"DEADLINE: {when}")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"SLURM ended it: {when} (DeadLine), no walltime TIMEOUT; resubmit with a later "
                "--deadline (or none)")
    return True


WALLTIME_REASON = "TimeLimit"
"""SLURM's reason for a job its walltime ended (squeue prints it while it is COMPLETING)."""


def walltime_ending(record: SchedulerRecord) -> bool:
    """COMPLETING because its walltime ran out: a TIMEOUT under way, its run no longer going."""
    return record.state is JobState.COMPLETING and record.reason == WALLTIME_REASON


def as_ended(record: SchedulerRecord) -> SchedulerRecord:
    """The record as the TIMEOUT it is becoming (for the chain rules), else itself."""
    if not walltime_ending(record):
        return record
    return record.model_copy(update={"state": JobState.TIMEOUT})


def resumed_attempt(record: SchedulerRecord, live: Mapping[str, SchedulerRecord]) -> str | None:
    """The live attempt (its id) a pending job is queued to resume: it waits (``Dependency``)
    on it with ``afterany``/``afternotok`` (what a walltime TIMEOUT releases), and it is of the
    same user and run name (:func:`report.chain_records.same_run_name`); an eval or another
    cell queued behind a run continues none. None otherwise."""
    if record.state is not JobState.PENDING or record.reason != DEPENDENCY_REASON:
        return None
    for dependency in dependencies(record):
        ahead = live.get(dependency.job_id)
        if dependency.kind in _AFTER_TIMEOUT and ahead is not None \
                and ahead.user == record.user and same_run_name(record.name, ahead.name):
            return dependency.job_id
    return None


def queued_resume_rule(ctx: JudgeContext, f: Findings) -> None:
    """A resume queued behind its run's live attempt: out of bring-up, the attempt named."""
    if ctx.resumes is None or ctx.state is not JobState.PENDING:
        return
    if "buffer-filling" in f.flags:
        f.flags.remove("buffer-filling")
    f.trend(Priority.INFO, f"Resume queued: starts when {ctx.resumes} ends")


def is_queued_resume(job: JobReport) -> bool:
    """A row :func:`queued_resume_rule` judged: pending, no metric yet, not in bring-up."""
    return job.state is JobState.PENDING and job.verdict == "buffering" \
        and "buffer-filling" not in job.flags
