"""RL rules: the collapse rule and its exemptions, TIS/clip health, shaping, deep-probe.

Policy (seed §RL, CONTRACT §5/§6):

- Collapse: >= ``collapse_min_signals`` signals on one of the last ``collapse_recent_steps``
  logged steps -> flag ``collapse``, verdict ``collapse``, and on a live job the recommendation
  ``cancel_and_salvage`` whose reason lists every fired signal with its value. A run that
  ended in a chain restart (a walltime TIMEOUT or planned stop whose restart is queued or
  running) goes on in that restart, which resumes the collapsed policy from its last save: the
  cancel names the restart (:func:`chain_collapse_rule`); an ended job with no live restart has
  nothing left to cancel, but one that COMPLETED on the collapsed policy is ``diagnose`` (salvage
  the checkpoint before the collapse first), not its cleanup. A
  spike-mitigation ablation (name matches ``settings.ablation_patterns``) is flagged
  ``ablation-exempt`` and gets action ``none``: observing the recovery is the experiment. The
  no-kill rewrite is applied once, for every bucket, in :mod:`report.judge`.
- One signal alone is not a collapse: it is flagged ``signal:<name>`` and named in the trend.
- grad_norm above 1.0 on two consecutive logged steps, the pair ending on one of the last
  ``collapse_recent_steps``, without collapse -> verdict ``warning`` (it predicts collapse 2-5
  steps early, so a dip back under 1.0 does not end it); an ended run has no steps left for
  that window: it warns only on a pair at its last logged steps.
- ``clip-ratio-high`` above ``clip_ratio_max``; ``imp-ratio-out-of-range`` outside
  ``[imp_ratio_low, imp_ratio_high]`` or capped fraction above ``imp_ratio_capped_max``: both
  verdict ``warning``. A ratio mean taken before the cap (``imp_ratio_uncapped_mean``: SkyRL's
  ``is_ratio_mean``, verl's ``rollout_is_mean``) is outlier-dominated: only a value below the
  range is read (the capped mean is at most it). ``rollout_train_prob_diff_mean`` is reported
  and never judged.
- ``shaping-active`` when reward × rollouts_per_step is fractional, decided on the most precise
  reward the log gives (the parser keeps a full-precision reward line over a 4-decimal display
  value). rollouts_per_step comes from the printed config (prompts × samples per prompt,
  ``probes.logs.fingerprint``), else the parser's config lines. A value printed with d decimals
  is only known to ±0.5·10^-d, so when that interval × rollouts holds an integer the regime is
  undecidable from the log: no suffix, and the detail note says so. Otherwise the Job cell reads
  ``<run> (shaped)`` or ``<run> (base)``, so arms from different regimes are never compared blind.
- ``deep-probe`` for a live RL run in a new setting (``report.fingerprint``): its fingerprint
  (model, image, geometry, config as printed, plus labels) was never seen healthy in sweep
  memory, or it is a relaunch of an earlier attempt in this sweep with a new model, image,
  geometry or config, or its name says smoke/test/debug. Without sweep memory and without an
  earlier attempt, a first launch counts as new: no restart, and only its first few logged
  steps (``FIRST_LAUNCH_STEPS``), logged from its start (a history that begins past its
  logging cadence resumed a checkpoint: ``_resumed_log``). The recommendation ``deep_probe``
  is made only when nothing more urgent applies.
- Standard-RL substitute checks and degenerate rollouts (``dead-rollouts``), log-ratio health
  ranges and banked-step cadence live in :mod:`report.rollouts`; pass@N and z-clip triggers are
  shown in the trend.
- A spike-mitigation ablation is recognised from its name or its printed config.
- ``nan-loss`` as for SFT (policy_loss, else loss). ``grad-explosion`` (CONTRACT §5 defines it
  for SFT) is not applied: an RL grad spike is the grad_norm collapse signal, and one signal
  alone must not raise more than ``signal:grad_norm``.
- Standard (non-agentic) RL has no trial tree: the pass-rate signal is simply not evaluated
  and nothing is flagged for the missing artefacts.
"""

from __future__ import annotations

import math
import re
from itertools import pairwise

from probes.logs.precision import decimals
from probes.models import JobState
from report.cells import format_value
from report.chain import ChainLink
from report.cleanup import cleanup_routine
from report.findings import (
    Findings,
    JudgeContext,
    Priority,
    is_finite,
    salvage_target,
    series,
)
from report.fingerprint import (
    config_ablation,
    known_in_memory,
    relaunch_change,
    run_fingerprint,
)
from report.models import Flag
from report.rollouts import banking_rule, dead_rollouts_rule, extras_text, log_ratio_health
from report.rules import buffer_rule, divergence_rule, stall_rule, step_progress
from report.settings import Thresholds, compiled
from report.signals import CollapseScan, collapse_scan
from report.trend import (
    REWARD_FLOOR,
    TREND_MAX,
    bound_text,
    collapse_text,
    describe_reward,
    shorten,
    signal_phrase,
    with_sparkline,
)

__all__ = ["FIRST_LAUNCH_STEPS", "chain_collapse_rule", "is_ablation", "judge_rl",
           "run_fingerprint"]

SHAPING_TOLERANCE = 1e-6
_SIGNAL_FLAGS: dict[str, Flag] = {
    "grad_norm": "signal:grad_norm",
    "entropy": "signal:entropy",
    "log_ratio": "signal:log_ratio",
    "pass_rate": "signal:pass_rate",
}
_UNTESTED_NAME = re.compile(r"(?:^|[-_.])(?:smoke|tests?|debug|dbg)(?=$|[-_.\d])", re.IGNORECASE)


def is_ablation(name: str, patterns: tuple[str, ...]) -> bool:
    """True for a spike-mitigation ablation (never auto-cancelled)."""
    return any(p.search(name) for p in compiled(patterns))


def judge_rl(ctx: JudgeContext, f: Findings) -> None:
    """Apply the RL rules to one job."""
    step_progress(ctx, f)
    buffer_rule(ctx, f)
    stall_rule(ctx, f)
    loss_metric = "policy_loss" if "policy_loss" in f.metrics else "loss"
    divergence_rule(ctx, f, loss_metric, explosion=False)
    tree = ctx.facts.trials
    scan = collapse_scan(ctx.history, ctx.settings.thresholds,
                         trials=tree.trials if tree is not None else None)
    f.evidence = tuple(e for s in scan.steps for e in s.evidence)
    f.collapse_step = scan.collapse_step
    f.collapse_onset = scan.collapse_onset
    f.flag(*(_SIGNAL_FLAGS[name] for name in sorted(scan.latest_fired)))
    exempt = _ablation(ctx)
    if exempt:
        f.flag("ablation-exempt")
    if scan.collapse_step is not None:
        _collapse(ctx, f, scan, exempt=exempt)
    elif scan.grad_norm_run is not None and (ctx.running or _grad_pair_last(ctx, scan)):
        f.verdict("warning")
        f.trend(Priority.INFO + 5, _grad_warning_text(ctx, scan.grad_norm_run))
    elif scan.latest_fired:
        fired = [e for e in scan.latest_evidence if e.fired]
        watching = ("1 signal (no entropy logged): " if _no_entropy(ctx)
                    else "1 signal, watching: " if ctx.running
                    else "1 signal at its end: ")  # an ended run is watched no more
        f.trend(Priority.INFO, shorten(watching + signal_phrase(
            fired[0], ctx.settings.thresholds.grad_norm_abs)))
    _tis_rules(f, ctx.settings.thresholds)
    dead_rollouts_rule(ctx, f)
    log_ratio_health(ctx, f)
    banking_rule(ctx, f)
    _step_time(ctx, f)
    _shaping(ctx, f)
    _deep_probe(ctx, f)
    if ctx.running and ctx.history and ctx.fetch_ok:
        f.verdict("healthy")
        rewards = series(ctx.history, "reward")
        text = (describe_reward(rewards, checkpoint_saved=_saved_durably(ctx, f.step))
                if rewards else "Stepping")
        printed = ctx.facts.summary.fingerprint if ctx.facts.summary else None
        text += extras_text(f, (printed.pass_at_k or printed.samples_per_prompt)
                            if printed else None)
        if _no_entropy(ctx):  # the caveat must survive the cell's length limit
            text = shorten(text, TREND_MAX - len(NO_ENTROPY_TREND)) + NO_ENTROPY_TREND
        f.trend(Priority.BACKGROUND, with_sparkline(text, rewards, floor=REWARD_FLOOR))
    if _no_entropy(ctx):
        f.notes.append("no entropy logged: the collapse rule cannot be read (entropy is one of "
                       "its signals); alias the trainer's entropy in [metrics.aliases] if it "
                       "prints one under another name")


NO_ENTROPY_TREND = "; no entropy: collapse rule unread"


def _grad_pair_last(ctx: JudgeContext, scan: CollapseScan) -> bool:
    """The pair ends on the latest logged grad norm. An ended run has no steps left for the
    prediction window, so only then does its early warning stand (as a single signal on an
    ended run is "watched no more")."""
    logged = [p.step for p in ctx.history if "grad_norm" in p.values]
    return scan.grad_norm_run is not None and bool(logged) and logged[-1] == scan.grad_norm_run[1]


def _grad_warning_text(ctx: JudgeContext, run: tuple[int, int]) -> str:
    """The early warning's cell: still above ``grad_norm_abs``, or back under it inside the
    window (the configured numbers, as the rule was judged by)."""
    th = ctx.settings.thresholds
    bound = bound_text(th.grad_norm_abs)
    logged = [p for p in ctx.history if "grad_norm" in p.values]
    latest = logged[-1]
    now = format_value(latest.values["grad_norm"])
    if latest.step == run[1]:
        return f"grad_norm {now} >{bound} for {th.grad_norm_warning_steps}+ steps: collapse risk"
    return f"grad_norm >{bound} on steps {run[0]}–{run[1]}, now {now}: collapse risk"
"""Rulebook: entropy is mandatory for RL; without it the collapse rule cannot be applied, so a
run that logs none is never shown as plainly fine."""


def _no_entropy(ctx: JudgeContext) -> bool:
    """The run has logged steps and not one of them carries an entropy."""
    return bool(ctx.history) and not any("entropy" in p.values for p in ctx.history)


def _ablation(ctx: JudgeContext) -> bool:
    """Spike-mitigation ablation by name, or by a set entry of its printed config."""
    patterns = ctx.settings.ablation_patterns
    if is_ablation(ctx.facts.record.name, patterns):
        return True
    printed = ctx.facts.summary.fingerprint if ctx.facts.summary else None
    return printed is not None and config_ablation(printed.config, patterns) is not None


def _step_time(ctx: JudgeContext, f: Findings) -> None:
    """sec_per_step is a trailing-window rate: the log's, else the window mean of timing/step."""
    summary = ctx.facts.summary
    if summary is not None and summary.sec_per_step:
        f.metrics["sec_per_step"] = summary.sec_per_step
        return
    timed = [v for v in series(ctx.history, "sec_per_step") if is_finite(v)]
    tail = timed[-ctx.settings.thresholds.window :]
    if tail:
        f.metrics["sec_per_step"] = sum(tail) / len(tail)


def _collapse(ctx: JudgeContext, f: Findings, scan: CollapseScan, *, exempt: bool) -> None:
    fired = scan.collapse_evidence
    f.flag("collapse")
    f.verdict("collapse")
    f.trend(Priority.CANCEL, collapse_text(fired, ctx.settings.thresholds.grad_norm_abs))
    why = f"collapse at step {scan.collapse_step}: " + "; ".join(e.why for e in fired)
    if ctx.state is JobState.COMPLETED and not exempt:
        _completed_collapse(ctx, f, why, scan.collapse_onset)
    if ctx.state not in (JobState.RUNNING, JobState.COMPLETING):
        return  # nothing left to cancel; the evidence still shows in flags and trend
    if exempt:
        f.recommend(Priority.EXEMPT, "none",
                    f"spike-mitigation ablation: observing recovery is the experiment ({why})")
    else:
        f.recommend(Priority.CANCEL, "cancel_and_salvage",
                    f"{why}; salvage {salvage_target(ctx.facts, scan.collapse_onset)} first")


def _completed_collapse(ctx: JudgeContext, f: Findings, why: str, onset: int | None) -> None:
    """A run that completed on a collapsed policy: its final weights are past the collapse, so
    the salvage (the last checkpoint before it, the rollouts) and a diagnosis come before its
    cleanup routine, as for a completed SFT run whose loss went NaN (the job-end DM is then no
    plain success). A spike-mitigation ablation's collapse is its result: not applied."""
    routine = cleanup_routine("rl", ctx.facts)
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"{why}; the run completed on a collapsed policy, its final weights past the "
                f"collapse: salvage {salvage_target(ctx.facts, onset)}, and find why before "
                f"{routine}")


def chain_collapse_rule(ctx: JudgeContext, f: Findings, link: ChainLink) -> None:
    """A collapse on the last steps of a run that ended in a chain restart: the restart
    resumes the collapsed policy from the run's last save, so the collapse rule's cancel +
    salvage is its (seed: "≥2 fire same step → cancel + salvage"). Applied once the chain
    restart is known (a planned stop's is told after the bucket's judge); a restart that
    already ran and ended leaves nothing to cancel, and one that has logged a collapse window
    of its own steps is judged by its own row (:func:`_restart_past_window`)."""
    if ctx.running or "collapse" not in f.flags or "chain-restart" not in f.flags:
        return
    successor = ctx.successor
    if successor is None or link.ended or _restart_past_window(ctx, successor):
        return
    fired = [e for e in f.evidence if e.step == f.collapse_step and e.fired]
    why = f"collapse at step {f.collapse_step}: " + "; ".join(e.why for e in fired)
    if "ablation-exempt" in f.flags:
        f.recommend(Priority.EXEMPT, "none",
                    f"spike-mitigation ablation: observing recovery is the experiment ({why}; "
                    f"the run goes on as its restart {successor})", restart=successor)
        return
    f.recommend(Priority.CANCEL, "cancel_and_salvage",
                f"{why}; the run goes on as its restart {successor}, which resumes the "
                f"collapsed policy: cancel {successor} and salvage "
                f"{salvage_target(ctx.facts, f.collapse_onset)} first", restart=successor)


def _restart_past_window(ctx: JudgeContext, successor: str) -> bool:
    """Whether the restart has logged a collapse window of steps of its own (read in this
    sweep): the run's last ``collapse_recent_steps`` logged steps are then the restart's, the
    collapse is on none of them, and the restart's own row judges the run (a TIMEOUT row stays
    for ``recent_hours``: it must not go on asking to cancel a run that recovered)."""
    restart = ctx.attempts.job(ctx.facts.record, successor)
    logged = len(restart.summary.points) if restart is not None and restart.summary else 0
    return logged >= ctx.settings.thresholds.collapse_recent_steps


def _tis_rules(f: Findings, th: Thresholds) -> None:
    clip = f.metrics.get("clip_ratio")
    if isinstance(clip, float) and _above(clip, th.clip_ratio_max):
        f.flag("clip-ratio-high")
        f.verdict("warning")
        f.trend(Priority.INFO,
                f"clip ratio {clip:.1%} (>{th.clip_ratio_max:.0%}): LR↔eps_clip mismatch")
    imp, uncapped = _imp_ratio(f, th)
    capped = f.metrics.get("imp_ratio_capped_fraction")
    capped_out = isinstance(capped, float) and _above(capped, th.imp_ratio_capped_max)
    if imp is not None or capped_out:
        f.flag("imp-ratio-out-of-range")
        f.verdict("warning")
        if imp is not None:
            raw = " (uncapped mean)" if uncapped else ""
            f.trend(Priority.INFO, f"TIS imp_ratio {format_value(imp)}{raw} out of range "
                    f"({th.imp_ratio_low:g}–{th.imp_ratio_high:g})")
        elif isinstance(capped, float):
            share = f"{capped:.1%}" if math.isfinite(capped) else format_value(capped)
            f.trend(Priority.INFO, f"TIS capped fraction {share} "
                    f"(>{th.imp_ratio_capped_max:.0%}: the mismatch is truncated routinely)")


def _imp_ratio(f: Findings, th: Thresholds) -> tuple[float | None, bool]:
    """The importance-ratio mean out of its healthy range, if it is, and whether it is the
    mean taken before the cap. The capped mean is judged on both sides; an uncapped one
    (one outlier token sets it: rulebook, rollout_train_prob_diff_mean) only below the range,
    since capping only lowers a weight: the capped mean is at most the uncapped one."""
    imp = f.metrics.get("imp_ratio_mean")
    if isinstance(imp, float):
        out = not math.isfinite(imp) or not th.imp_ratio_low <= imp <= th.imp_ratio_high
        return (imp if out else None), False
    raw = f.metrics.get("imp_ratio_uncapped_mean")
    if isinstance(raw, float) and math.isfinite(raw) and raw < th.imp_ratio_low:
        return raw, True
    return None, False


def _above(value: float, limit: float) -> bool:
    return not math.isfinite(value) or value > limit


def _rollouts_per_step(ctx: JudgeContext) -> int | None:
    summary = ctx.facts.summary
    if summary is None:
        return None
    printed = summary.fingerprint
    return (printed.rollouts_per_step if printed else None) or summary.rollouts_per_step


def _shaping(ctx: JudgeContext, f: Findings) -> None:
    rollouts = _rollouts_per_step(ctx)
    rewards = [r for r in series(ctx.history, "reward") if is_finite(r)]
    if not rollouts or not rewards:
        return
    value = rewards[-1]
    product = value * rollouts
    if abs(product - round(product)) <= SHAPING_TOLERANCE:
        f.name_suffix = " (base)"
        return
    places = decimals(value)
    half = 0.5 * 10.0 ** -places * rollouts if places is not None else 0.0
    low, high = product - half, product + half
    if half > SHAPING_TOLERANCE and math.floor(high + SHAPING_TOLERANCE) >= math.ceil(
        low - SHAPING_TOLERANCE
    ):
        f.notes.append(f"shaping undecidable: reward {value:g} is printed to {places} decimals "
                       f"and × {rollouts} rollouts/step could be whole")
        return
    f.flag("shaping-active")
    f.name_suffix = " (shaped)"


FIRST_LAUNCH_STEPS = 10
"""Without sweep memory, a run with no earlier attempt and fewer logged steps than this is new."""


def _first_launch(ctx: JudgeContext) -> bool:
    """A one-off sweep cannot compare fingerprints; a brand-new launch is the next best sign."""
    record = ctx.facts.record
    summary = ctx.facts.summary
    in_bring_up = summary is not None and summary.bring_up
    return (record.state is JobState.RUNNING and record.restarts == 0 and ctx.fetch_ok
            and not in_bring_up and ctx.earlier_attempts == 0
            and not ctx.attempts.any_earlier(ctx.facts)
            and 1 <= len(ctx.history) < FIRST_LAUNCH_STEPS and not _resumed_log(ctx))


def _resumed_log(ctx: JudgeContext) -> bool:
    """The history starts past step 1 and past twice its own logging spacing: the run resumed
    from a checkpoint (a first launch logs from its first steps), whether or not the earlier
    attempt is in view (``jobtables job`` asks SLURM for one job only). Unanchored steps (a
    point's count only) and a lone point (no spacing) say nothing."""
    summary = ctx.facts.summary
    steps = sorted({p.step for p in ctx.history})
    if (summary is not None and summary.steps_unanchored) or len(steps) < 2:
        return False
    spacing = min(b - a for a, b in pairwise(steps))
    return steps[0] > 1 and steps[0] > 2 * spacing


def _deep_probe(ctx: JudgeContext, f: Findings) -> None:
    record = ctx.facts.record
    if record.state not in (JobState.PENDING, JobState.RUNNING):
        return
    relaunch = relaunch_change(ctx.facts, ctx.attempts)
    # Memory that holds no healthy setting of this cluster yet (a fresh store, a cluster just
    # added) cannot tell a new setting from one that ran before the bot looked: every running
    # run would read new. It is judged as without memory (relaunch, first launch) instead.
    seen = ctx.seen_configs or None
    if _UNTESTED_NAME.search(record.name):
        reason = "smoke/test/debug run"
    elif seen is not None and not known_in_memory(ctx.facts, seen):
        fingerprint = run_fingerprint(ctx.facts)  # only this reason shows it
        shown = shorten(fingerprint.rsplit("|", 1)[0] or fingerprint, 80)
        reason = relaunch or f"new setting ({shown})"
    elif seen is None and relaunch is not None:
        reason = relaunch
    elif seen is None and _first_launch(ctx):
        reason = "first launch, still in its first steps"
    else:
        return
    f.flag("deep-probe")
    # Above the reward description (BACKGROUND), below anything that needs a human sooner.
    headline = ("Relaunched in a new setting: deep-probe it" if relaunch and relaunch in reason
                else "New run: deep-probe before trusting this row")
    f.trend(Priority.DEEP_PROBE, headline)
    if record.state is JobState.RUNNING:
        f.recommend(Priority.DEEP_PROBE, "deep_probe",
                    f"dispatch rl-job-health-deep-dive on {record.name}: {reason}; "
                    "a healthy row can hide a silently dead run")


def _saved_durably(ctx: JudgeContext, step: int | None) -> bool:
    """"Checkpoint saved" needs a durable checkpoint at the current step (seed: banked steps
    come from durable evidence, not a progress line): the log's "saved" alone is not enough,
    nor is an export (a running job writes periodic saves there)."""
    listing = ctx.facts.checkpoints
    return step is not None and listing is not None and step in listing.steps
