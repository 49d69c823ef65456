"""RL rules: the collapse rule and its exemptions, TIS/clip health, shaping, deep-probe.

Policy (seed §RL, CONTRACT §5/§6):

- Collapse: >= ``collapse_min_signals`` signals on one of the last ``collapse_recent_steps``
  logged steps -> flag ``collapse``, verdict ``collapse``, and on a live job the recommendation
  ``cancel_and_salvage`` whose reason lists every fired signal with its value. A
  spike-mitigation ablation (name matches ``settings.ablation_patterns``) is flagged
  ``ablation-exempt`` and gets action ``none``: observing the recovery is the experiment. The
  no-kill rewrite is applied once, for every bucket, in :mod:`report.judge`.
- One signal alone is not a collapse: it is flagged ``signal:<name>`` and named in the trend.
- grad_norm above 1.0 on the latest two logged steps without collapse -> verdict ``warning``.
- ``clip-ratio-high`` above ``clip_ratio_max``; ``imp-ratio-out-of-range`` outside
  ``[imp_ratio_low, imp_ratio_high]`` or capped fraction above ``imp_ratio_capped_max``: both
  verdict ``warning``. ``rollout_train_prob_diff_mean`` is reported and never judged.
- ``shaping-active`` when reward × rollouts_per_step is fractional (beyond 1e-6); the Job cell
  then reads ``<run> (shaped)``, else ``<run> (base)``, so arms from different shaping regimes
  are never compared blind.
- ``deep-probe`` for a live RL run in a new setting: its fingerprint (labels naming a config,
  image, model, geometry or commit; else the name stem) was never seen healthy in sweep memory,
  or its name says smoke/test/debug. Without sweep memory (a one-off ``jobtables sweep``) a
  first launch counts as new: no earlier attempt of the same name and user in the sweep, no
  restart, and only its first few logged steps (``FIRST_LAUNCH_STEPS``). The recommendation
  ``deep_probe`` is made only when nothing more urgent applies.
- ``nan-loss`` as for SFT (policy_loss, else loss). ``grad-explosion`` (CONTRACT §5 defines it
  for SFT) is not applied: an RL grad spike is the grad_norm collapse signal, and one signal
  alone must not raise more than ``signal:grad_norm``.
- Standard (non-agentic) RL has no trial tree: the pass-rate signal is simply not evaluated
  and nothing is flagged for the missing artefacts.
"""

from __future__ import annotations

import math
import re

from probes.models import JobState, SchedulerRecord
from report.cells import format_value
from report.chain import name_stem
from report.findings import Findings, JudgeContext, Priority, is_finite, series
from report.models import Flag
from report.rules import buffer_rule, divergence_rule, stall_rule, step_progress
from report.settings import Thresholds
from report.signals import CollapseScan, collapse_scan
from report.trend import collapse_text, describe_reward, shorten, signal_phrase, with_sparkline

SHAPING_TOLERANCE = 1e-6
_SIGNAL_FLAGS: dict[str, Flag] = {
    "grad_norm": "signal:grad_norm",
    "entropy": "signal:entropy",
    "log_ratio": "signal:log_ratio",
    "pass_rate": "signal:pass_rate",
}
_FINGERPRINT_KEY = re.compile(r"config|image|model|geometry|hash|commit|git", re.IGNORECASE)
_UNTESTED_NAME = re.compile(r"(?:^|[-_.])(?:smoke|tests?|debug|dbg)(?=$|[-_.\d])", re.IGNORECASE)


def run_fingerprint(record: SchedulerRecord) -> str:
    """What makes a run's setting new: config/image/model labels, else the name stem."""
    parts = sorted(f"{k}={v}" for k, v in record.labels.items() if _FINGERPRINT_KEY.search(k))
    return ";".join(parts) if parts else name_stem(record.name)


def is_ablation(name: str, patterns: tuple[str, ...]) -> bool:
    """True for a spike-mitigation ablation (never auto-cancelled)."""
    return any(re.search(p, name, re.IGNORECASE) for p in patterns)


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
    f.flag(*(_SIGNAL_FLAGS[name] for name in sorted(scan.latest_fired)))
    exempt = is_ablation(ctx.facts.record.name, ctx.settings.ablation_patterns)
    if exempt:
        f.flag("ablation-exempt")
    if scan.collapse_step is not None:
        _collapse(ctx, f, scan, exempt=exempt)
    elif scan.grad_norm_warning:
        f.verdict("warning")
        latest = series(ctx.history, "grad_norm")[-1]
        f.trend(Priority.INFO + 5,
                f"grad_norm {format_value(latest)} >1.0 for 2+ steps: collapse risk")
    elif scan.latest_fired:
        fired = [e for e in scan.latest_evidence if e.fired]
        f.trend(Priority.INFO, shorten("1 signal, watching: " + signal_phrase(fired[0])))
    _tis_rules(f, ctx.settings.thresholds)
    _shaping(ctx, f)
    _deep_probe(ctx, f)
    if ctx.running and ctx.history and ctx.fetch_ok:
        f.verdict("healthy")
        rewards = series(ctx.history, "reward")
        banked = ctx.facts.checkpoints.banked_step if ctx.facts.checkpoints else None
        saved = ctx.facts.summary.checkpoint_steps if ctx.facts.summary else ()
        fresh = f.step is not None and (banked == f.step or (bool(saved) and max(saved) == f.step))
        text = describe_reward(rewards, checkpoint_saved=fresh) if rewards else "Stepping"
        f.trend(Priority.BACKGROUND, with_sparkline(text, rewards))


def _collapse(ctx: JudgeContext, f: Findings, scan: CollapseScan, *, exempt: bool) -> None:
    fired = scan.collapse_evidence
    f.flag("collapse")
    f.verdict("collapse")
    f.trend(Priority.CANCEL, collapse_text(fired))
    why = f"collapse at step {scan.collapse_step}: " + "; ".join(e.why for e in fired)
    if ctx.state not in (JobState.RUNNING, JobState.COMPLETING):
        return  # nothing left to cancel; the evidence still shows in flags and trend
    if exempt:
        f.recommend(Priority.EXEMPT, "none",
                    f"spike-mitigation ablation: observing recovery is the experiment ({why})")
    else:
        f.recommend(Priority.CANCEL, "cancel_and_salvage",
                    why + "; salvage the last banked checkpoint and the rollouts first")


def _tis_rules(f: Findings, th: Thresholds) -> None:
    clip = f.metrics.get("clip_ratio")
    if isinstance(clip, float) and _above(clip, th.clip_ratio_max):
        f.flag("clip-ratio-high")
        f.verdict("warning")
        f.trend(Priority.INFO,
                f"clip ratio {clip:.1%} (>{th.clip_ratio_max:.0%}): LR↔eps_clip mismatch")
    imp = f.metrics.get("imp_ratio_mean")
    capped = f.metrics.get("imp_ratio_capped_fraction")
    imp_out = isinstance(imp, float) and (
        not math.isfinite(imp) or not th.imp_ratio_low <= imp <= th.imp_ratio_high
    )
    capped_out = isinstance(capped, float) and _above(capped, th.imp_ratio_capped_max)
    if imp_out or capped_out:
        f.flag("imp-ratio-out-of-range")
        f.verdict("warning")
        shown = f"imp_ratio {format_value(imp)}" if isinstance(imp, float) and imp_out else (
            f"capped {capped:.1%}" if isinstance(capped, float) else "imp_ratio"
        )
        f.trend(Priority.INFO,
                f"TIS {shown} out of range ({th.imp_ratio_low:g}–{th.imp_ratio_high:g})")


def _above(value: float, limit: float) -> bool:
    return not math.isfinite(value) or value > limit


def _shaping(ctx: JudgeContext, f: Findings) -> None:
    summary = ctx.facts.summary
    rewards = [r for r in series(ctx.history, "reward") if is_finite(r)]
    if summary is None or not summary.rollouts_per_step or not rewards:
        return
    product = rewards[-1] * summary.rollouts_per_step
    if abs(product - round(product)) > SHAPING_TOLERANCE:
        f.flag("shaping-active")
        f.name_suffix = " (shaped)"
    else:
        f.name_suffix = " (base)"


FIRST_LAUNCH_STEPS = 10
"""Without sweep memory, a run with no earlier attempt and fewer logged steps than this is new."""


def _first_launch(ctx: JudgeContext) -> bool:
    """A one-off sweep cannot compare fingerprints; a brand-new launch is the next best sign."""
    record = ctx.facts.record
    summary = ctx.facts.summary
    in_bring_up = summary is not None and summary.bring_up
    return (record.state is JobState.RUNNING and record.restarts == 0 and ctx.fetch_ok
            and not in_bring_up and ctx.earlier_attempts == 0
            and 1 <= len(ctx.history) < FIRST_LAUNCH_STEPS)


def _deep_probe(ctx: JudgeContext, f: Findings) -> None:
    record = ctx.facts.record
    if record.state not in (JobState.PENDING, JobState.RUNNING):
        return
    fingerprint = run_fingerprint(record)
    if _UNTESTED_NAME.search(record.name):
        reason = "smoke/test/debug run"
    elif ctx.seen_configs is not None and fingerprint not in ctx.seen_configs:
        reason = f"new setting ({fingerprint})"
    elif ctx.seen_configs is None and _first_launch(ctx):
        reason = "first launch, still in its first steps"
    else:
        return
    f.flag("deep-probe")
    # Above the reward description (BACKGROUND), below anything that needs a human sooner.
    f.trend(Priority.DEEP_PROBE, "New run: deep-probe before trusting this row")
    if record.state is JobState.RUNNING:
        f.recommend(Priority.DEEP_PROBE, "deep_probe",
                    f"dispatch rl-job-health-deep-dive on {record.name}: {reason}; "
                    "a healthy row can hide a silently dead run")
