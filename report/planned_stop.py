"""A COMPLETED run that stopped itself ahead of its walltime: a chain restart, not a failure.

Policy (seed, "Chain-restart TIMEOUTs are normal, NOT failures ... report it as a normal restart
and name the successor"): a trainer that saves and exits 0 before the walltime so a chain
successor resumes (NeMo-RL's ``checkpoint_must_save_by``, Megatron-LM's
``--exit-duration-in-mins`` / ``--exit-interval``: ``probes.logs.planned_stop``) ends COMPLETED
short of its total, and its log says why. Such a run is

- a planned stop when its log's last planned-stop line has no logged step after it (a step
  after it is a later run's, appending to the same log), the log does not say the trainer
  finished, and neither its completion files nor its log put it at its total (a stop on the
  last step is a finish);
- with a successor (:func:`report.chain.chain_link` with ``planned_stop``: a live job waiting
  on it ``afterany``/``afterok``, which its exit 0 satisfies, a remembered edge, or the same
  fallback match as a TIMEOUT's): ``chain-restart``, verdict ``restarting``, ``successor`` set,
  the Trend naming it, as a chain-restart TIMEOUT;
- without one: no ``incomplete-run``, but verdict ``warning``, the Trend saying it stopped at
  its time budget with no successor queued, and ``diagnose``: resubmit to resume from the
  banked step.

Either way no cleanup is named: the run is not done.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState, PlannedStop
from report.findings import Findings, JudgeContext, Priority
from report.trend import shorten

__all__ = ["planned_stop", "planned_stop_rule"]


def planned_stop(facts: JobFacts) -> PlannedStop | None:
    """The planned-stop line a COMPLETED job's log ends on (no logged step after it, no
    finish line), else None; whether it stopped short of its total is the rule's."""
    summary = facts.summary
    if facts.record.state is not JobState.COMPLETED or summary is None or summary.finished:
        return None
    stop = summary.planned_stop
    if stop is None:
        return None
    last = max((p.line_no for p in summary.points if p.line_no is not None), default=None)
    return stop if last is None or stop.line_no > last else None


def _at_total(ctx: JudgeContext, f: Findings) -> bool:
    """The completion files, else the log, put the run at its total."""
    check = ctx.facts.completion
    reached = check.reached if check is not None else None
    if reached is not None:
        if reached.finished:
            return True
        if reached.current_steps is not None and reached.total_steps:
            return reached.current_steps >= reached.total_steps
    return f.step is not None and bool(f.total_steps) and f.step >= (f.total_steps or 0)


def planned_stop_rule(ctx: JudgeContext, f: Findings) -> bool:
    """Judge a COMPLETED run that stopped at its time budget (see the module policy); True
    when it did, so the completion check and the cleanup are not applied."""
    stop = planned_stop(ctx.facts)
    if stop is None or _at_total(ctx, f):
        return False
    where = f"step {f.step}/{f.total_steps}" if f.step is not None and f.total_steps else (
        f"step {f.step}" if f.step is not None else "its last step")
    if ctx.successor is not None:
        f.flag("chain-restart")
        f.verdict("restarting")
        # The successor first: a long Trend is cut at its end (``shorten``).
        f.trend(Priority.TERMINAL,
                shorten(f"Planned stop; normal chain restart → {ctx.successor} ({where})"))
        return True
    banked = ctx.facts.checkpoints.banked_step if ctx.facts.checkpoints else None
    resume = (f"resubmit to resume from banked step {banked}" if banked is not None
              else "resubmit it; no durable checkpoint was found to resume from")
    f.verdict("warning")
    said = f"stopped itself at its time budget at {where} ('{shorten(stop.text, 120)}')"
    if ctx.stopped is not None:  # its restart ran and failed: the chain stopped there
        restart, ended = ctx.stopped
        how = ended.lower().replace("_", " ")
        f.trend(Priority.DIAGNOSE, shorten(
            f"Stopped at time budget; restart {restart} {how}: chain stopped ({where})"))
        f.recommend(Priority.DIAGNOSE, "diagnose",
                    f"{said}; its restart {restart} ran and ended {ended}: find why {restart} "
                    f"failed (its row), then {resume}")
        return True
    f.trend(Priority.DIAGNOSE, shorten(f"Stopped at time budget; no successor queued ({where})"))
    f.recommend(Priority.DIAGNOSE, "diagnose", f"{said} with no successor queued: {resume}")
    return True
