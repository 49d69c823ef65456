"""The cross-cutting rules :func:`report.judge.judge_job` applies to every job, any bucket.

Policy: the seed's "Cross-cutting" rules, as :mod:`report.judge`'s docstring states them: a
log's status (mismatch, missing, a failed fetch), faults as flags and on a live job as a
warning, a bring-up that hit a real fault, a dependency never satisfied, the scheduler's
states (TIMEOUT and its chain restart, failures, cancel, completion, unknown), a recurring
failure signature, no-kill, and checkpoints that could not be read. Each rule is a function
of (context, findings); precedence between findings is settled in :mod:`report.findings`.
"""

from __future__ import annotations

from typing import TypeGuard, get_args

from probes.models import TERMINAL_STATES, FaultKind, JobState, TerminalSignal
from report.cells import format_duration, shown_path
from report.chain import NEVER_SATISFIED, ChainLink
from report.failure_text import (
    AGENT_LOGS_NOTE,
    FAILED_NEXT,
    failure_why,
    fault_text,
    first_fault,
)
from report.findings import NO_KILL_PREFIX, Findings, JudgeContext, Priority, salvage_target
from report.holds import deadline_rule, walltime_ending
from report.memory import SweepMemory, failure_signature, memory_key, repeated_failure
from report.models import FailureSignature
from report.pods import KIND_LABEL
from report.trend import shorten, signal_phrase

_TERMINAL_SIGNALS: frozenset[str] = frozenset(get_args(TerminalSignal))


_FAILED_STATES = frozenset(
    {JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.PREEMPTED}
)


def log_rules(ctx: JudgeContext, f: Findings) -> None:
    log = ctx.facts.log
    if log is None:
        return
    if log.status == "mismatch":
        f.flag("log-path-mismatch")
        # The collector says why when StdOut exists (a preamble beside the job's own log).
        f.notes.append(shown_path(log.error or f"StdOut {log.requested_path} absent;"
                                  f" read {log.path}"))
    elif log.status == "missing" and ctx.state is not JobState.PENDING and not _never_ran(ctx):
        f.flag("log-missing")
        f.verdict("unknown")
        found = log.error or log.requested_path or "no StdOut"  # the collector's why, if any
        f.trend(Priority.INFO, shorten(shown_path(f"No log found ({found})")))
    elif log.status == "failed":
        f.flag("fetch-failed")
        f.verdict("unknown")
        f.trend(Priority.INFO, shorten(shown_path(
            f"Log fetch failed: {log.error or 'error'}; state unknown")))


def _never_ran(ctx: JudgeContext) -> bool:
    """An ended job that was never given a node or a second of run time (cancelled while
    pending, a dependency never satisfied): it wrote no log, and none is missing."""
    record = ctx.facts.record
    return (ctx.state in TERMINAL_STATES and record.pods_total is None  # a scheduler's record
            and not record.nodes and not record.elapsed_s)


def is_terminal_signal(kind: FaultKind) -> TypeGuard[TerminalSignal]:
    """A fault kind that is its own flag (``time-limit`` is the TIMEOUT state itself)."""
    return kind in _TERMINAL_SIGNALS


def fault_rules(ctx: JudgeContext, f: Findings) -> None:
    faults = ctx.facts.summary.faults if ctx.facts.summary else ()
    f.flag(*(x.kind for x in sorted(faults, key=lambda x: x.line_no)
             if is_terminal_signal(x.kind)))
    fault = first_fault(ctx.facts)
    if fault is not None and ctx.running:
        f.verdict("warning")
        f.trend(Priority.INFO, shorten(f"{fault.kind} in log: {fault_text(fault)}"))


def bring_up_fault_rule(ctx: JudgeContext, f: Findings) -> None:
    """A live job with no step yet whose log holds a real fault is no benign bring-up (seed:
    the shm broadcast heartbeat is a fault co-firing with a WorkNCCL timeout, "preparing to dump
    debug info" or a SIGABRT): it leaves the buffer table, and the fault is to be diagnosed."""
    if not ctx.running or "buffer-filling" not in f.flags:
        return
    fault = first_fault(ctx.facts)
    if fault is None:
        return
    f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"bring-up hit {fault.kind}, not a benign wait: {fault_text(fault)}")


def never_starts_rule(ctx: JudgeContext, f: Findings) -> None:
    """A job pending with ``DependencyNeverSatisfied`` (its dependency can no longer be met:
    an ``afterok`` on a run that TIMEOUT or failed) is kept pending for ever by SLURM (without
    ``kill_invalid_depend``): no queue admission, so no buffer filling; stalled, with a
    diagnose naming what it waits on."""
    record = ctx.facts.record
    if ctx.state is not JobState.PENDING or record.reason != NEVER_SATISFIED:
        return
    if "buffer-filling" in f.flags:
        f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")
    f.verdict("stalled")
    f.trend(Priority.TERMINAL, f"Pending ({NEVER_SATISFIED}): will never start")
    waits = record.dependency or ", ".join(record.depends_on) or "its dependency"
    f.recommend(Priority.DIAGNOSE, "diagnose", shorten(
        f"pending with {NEVER_SATISFIED} on {waits}: SLURM will never start it; cancel it, "
        "or resubmit it without that dependency", 300))


def state_rules(ctx: JudgeContext, f: Findings, link: ChainLink) -> None:
    state = ctx.state
    if state is JobState.TIMEOUT or walltime_ending(ctx.facts.record):
        _timeout_rule(ctx, f, link)
    elif state in _FAILED_STATES:
        f.verdict("failed")
        if state is JobState.OUT_OF_MEMORY:
            f.flag("oom")
        # With no fault in the log, its failing line (a bare "RuntimeError: NCCL error in:
        # ...", a missing module) says why, never the exit code alone (any bucket).
        why = failure_why(ctx)
        f.trend(Priority.TERMINAL, shorten(why))
        f.recommend(Priority.DIAGNOSE, "diagnose", f"{shorten(why, 300)}{FAILED_NEXT}")
    elif state is JobState.CANCELLED:
        f.verdict("done")
        f.trend(Priority.TERMINAL - 2, "Cancelled")
    elif state is JobState.COMPLETED:
        f.verdict("done")
        f.trend(Priority.BACKGROUND + 2, "Completed")
    elif state is JobState.UNKNOWN:
        f.verdict("unknown")
        # What the scheduler said of it (a Kubernetes pod whose node stopped reporting).
        reason = ctx.facts.record.reason
        f.trend(Priority.TERMINAL - 2, shorten(f"State unknown ({reason})" if reason
                                               else "State unknown"))


def _timeout_rule(ctx: JudgeContext, f: Findings, link: ChainLink) -> None:
    """A walltime TIMEOUT: a chain restart only with a live ``afterany`` successor."""
    if deadline_rule(ctx, f):  # SLURM's DEADLINE: no walltime, no restart
        return
    # COMPLETING at its walltime: the TIMEOUT is under way, its processes being killed.
    ending = walltime_ending(ctx.facts.record)
    head = "Walltime TIMEOUT (ending)" if ending else "Walltime TIMEOUT"
    if ctx.successor is not None:
        f.flag("chain-restart")
        f.verdict("restarting")
        # An ended restart's state says whether the run went on (its own row says why).
        ran = f" ({link.ended.lower().replace('_', ' ')})" if link.ended else ""
        if link.held:  # still its restart, but it starts only once someone releases it
            ran = " (held)"
        f.trend(Priority.TERMINAL,
                f"{head}; normal chain restart → {ctx.successor}{ran}")
        return
    f.verdict("failed")
    banked = ctx.facts.checkpoints.banked_step if ctx.facts.checkpoints else None
    resume = f"; resume from banked step {banked}" if banked is not None else ""
    record = ctx.facts.record
    if link.stopped is not None:
        how = (link.ended or "FAILED").lower().replace("_", " ")
        f.trend(Priority.TERMINAL - 1, f"{head}; restart {link.stopped} {how}: chain stopped")
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"walltime TIMEOUT: its restart {link.stopped} ran and ended "
                    f"{link.ended or 'FAILED'}, so the "
                    f"run stopped there; find why {link.stopped} failed (its row), then "
                    f"resubmit{resume}")
        return
    if link.cancelled is not None:
        when = "after it ran" if link.cancelled_ran else "before it started"
        f.trend(Priority.TERMINAL - 1,
                f"{head}; restart {link.cancelled} cancelled: chain stopped")
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"walltime TIMEOUT: its restart {link.cancelled} was cancelled {when}, so "
                    f"the run stopped here{resume}; resubmit to continue, unless the cancel "
                    "was meant to end it")
        return
    if record.labels.get(KIND_LABEL):  # Kubernetes: no afterany chain, a Job's own deadline
        limit = (f" ({format_duration(record.time_limit_s)})"
                 if record.time_limit_s is not None else "")
        f.trend(Priority.TERMINAL - 1, f"TIMEOUT: activeDeadlineSeconds{limit} reached")
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"the Job ran past its activeDeadlineSeconds{limit} and was stopped"
                    f"{resume}; resubmit (or raise the deadline) to continue")
        return
    if link.blocked is not None:
        f.trend(Priority.TERMINAL - 1, shorten(f"TIMEOUT, no restart: {link.blocked_short}"))
        f.recommend(Priority.DIAGNOSE, "diagnose", f"walltime TIMEOUT: {link.blocked}{resume}")
        return
    f.trend(Priority.TERMINAL - 1, f"{head}; no successor queued")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"walltime TIMEOUT with no afterany successor{resume}")


_ENDED_OVER: frozenset[str] = frozenset({"collapse", "warning", "stalled", "buffering", "healthy"})
"""Verdicts about what a run is doing or will do: none holds for one that was cancelled."""


def cancelled_rule(ctx: JudgeContext, f: Findings, restart: str | None = None) -> None:
    """A CANCELLED job reads as cancelled (someone stopped it on purpose): verdict ``done``,
    whatever its last steps predicted (a grad-norm pair warns of steps it will not take). A
    collapse on its last steps stays flagged as the evidence, the Trend says it was cancelled
    after it (the RL table has no State column: a bare 'COLLAPSE' reads as a live run to
    cancel), and the collapse rule's other half, the salvage, is what is left to make sure of
    (a ``scancel`` by hand salvaged nothing); a spike-mitigation ablation's is its result.
    ``restart``: the run's ``afterany`` restart the cancel released (queued before it,
    ``report.judge``): the run goes on collapsed in it, so it is the one to cancel."""
    if ctx.state is not JobState.CANCELLED:
        return
    if "collapse" in f.flags and restart is not None \
            and "ablation-exempt" not in f.flags:
        _cancel_released_restart(ctx, f, restart)
        return
    f.verdicts.difference_update(_ENDED_OVER)
    f.verdict("done")
    if "collapse" not in f.flags:
        return
    fired = [e for e in f.evidence if e.step == f.collapse_step and e.fired]
    # " vs trend" dropped: the signals, not the words, are what must fit the cell.
    said = ", ".join(signal_phrase(e, ctx.settings.thresholds.grad_norm_abs)
                     .removesuffix(" vs trend") for e in fired)
    f.trend(Priority.CANCEL + 1, shorten(f"Cancelled; COLLAPSE: {said}"))
    if "ablation-exempt" in f.flags:
        return
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"collapse at step {f.collapse_step}: " + "; ".join(e.why for e in fired)
                + f"; cancelled after it: make sure {salvage_target(ctx.facts, f.collapse_onset)}"
                " are salvaged "
                "(a cancel by hand salvages nothing) and find why before relaunching")


def _cancel_released_restart(ctx: JudgeContext, f: Findings, restart: str) -> None:
    """A collapsed run cancelled while its ``afterany`` restart waited: the cancel released
    the restart, which resumes the collapsed policy from the last save. The collapse rule's
    cancel is the restart's (as for a walltime TIMEOUT's, ``chain_collapse_rule``)."""
    fired = [e for e in f.evidence if e.step == f.collapse_step and e.fired]
    f.trend(Priority.CANCEL + 1, shorten(f"Cancelled; restart {restart} goes on from the "
                                         "collapse"))
    f.recommend(Priority.CANCEL, "cancel_and_salvage",
                f"collapse at step {f.collapse_step}: " + "; ".join(e.why for e in fired)
                + f"; cancelled, but its afterany restart {restart}, queued before the cancel, "
                f"was released by it and resumes the collapsed policy: cancel {restart} and "
                f"salvage {salvage_target(ctx.facts, f.collapse_onset)} first", restart=restart)


def recurring_rule(
    ctx: JudgeContext, f: Findings, memory: SweepMemory | None,
) -> tuple[FailureSignature | None, FailureSignature | None]:
    """This attempt's failure signature, and the earlier attempt's it repeats (if any)."""
    signature = failure_signature(ctx.facts, f.settled_verdict(), failed_on=lambda: ctx.failed_on)
    if signature is None or memory is None:
        return signature, None
    earlier = memory.failure_signatures.get(memory_key(ctx.facts.record), [])
    repeated = repeated_failure(signature, earlier)
    if repeated is not None:
        previous = repeated.job_id
        f.flag("recurring-failure")
        why = failure_why(ctx)
        f.trend(Priority.TERMINAL + 2, shorten(f"RECURRING as in {previous}: {why}"))
        f.recommend(Priority.DIAGNOSE + 4, "diagnose",
                    f"same failure as attempt {previous}: {shorten(why, 300)}; not "
                    f"transient, find the cause before resubmitting, and {AGENT_LOGS_NOTE}")
    return signature, repeated


def no_kill_rule(ctx: JudgeContext, f: Findings) -> None:
    chosen = f.settled_recommendation()
    if ctx.settings.no_kill and chosen is not None and chosen.action == "cancel_and_salvage":
        f.flag("no-kill")
        f.recommend(Priority.CANCEL + 1, "cancel_and_salvage", NO_KILL_PREFIX + chosen.why
                    + "; capture the evidence that disappears at termination and leave it "
                    "running", restart=f.settled_restart())


UNREADABLE_CHECKPOINTS = "; checkpoints unreadable"
"""The Trend's end for a training run with no banked step whose checkpoint search met a
directory it could not read: its steps are unknown, not absent (the note says where, why)."""


def unreadable_checkpoints_note(ctx: JudgeContext, f: Findings) -> None:
    """Name the checkpoint directories that could not be read, and what that leaves unknown."""
    listing = ctx.facts.checkpoints
    if listing is None or not listing.unreadable:
        return
    left = ("no banked step known" if listing.banked_step is None
            else f"banked step {listing.banked_step} found elsewhere; it may be higher")
    f.notes.append(f"checkpoints unreadable ({left}): " + "; ".join(listing.unreadable))
