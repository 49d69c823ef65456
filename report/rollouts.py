"""RL health checks that need no trial tree: degenerate rollouts, log-ratio ranges, banking.

Policy (seed §RL: standard, non-agentic RL "has no Harbor trial artifacts ... Substitute
reward/avg_raw_reward, banked-step cadence plus durable checkpoints, timing/*, and
generate/avg_num_tokens"; CONTRACT §6 ``dead-rollouts``):

- ``dead-rollouts``: over the window (the last ``th.window`` logged values of a metric), its
  newest ``th.min_window`` or more values all with reward flat at 0, responses about 1 token,
  entropy about 0, or grad norm exactly 0. Any one is enough: each means no learning signal is
  reaching the policy, whatever the row's other numbers say. A reward that has been 0 since
  the run's first logged step (a history that begins one logging interval from step 0, not a
  tail read mid-run or a resumed run's) is not yet dead before a whole window (``th.window``
  values) of it: a healthy run may merely start at reward 0 on a hard task (its responses,
  entropy and gradients say whether it is alive; a note says the reward is still 0); a reward
  that was above 0 and fell flat is read after ``th.min_window`` as before. A grad norm of 0 counts
  only where the log can print a small one: verl before 0.5 and Megatron print 3 decimals,
  SkyRL's step dict and prime-rl 4, so a seqnorm run's ~1e-5 ("that is the regime, NOT
  vanishing gradient", rulebook) is printed 0 there. In a log of such a trainer the zeros are
  read as exact only when the run's policy metrics (grad norm, policy loss, entropy) were
  printed at finer precision (SkyRL's status line, verl >= 0.5's full floats): more decimals
  than those printers give, on a nonzero value of the history. Otherwise the zeros are a note,
  not a reason. Flagged on any state; on a live or COMPLETED run verdict ``warning`` and
  recommendation ``deep_probe`` (read the literal rollouts; a completed run's cleanup would
  ship a model that had stopped learning).
  Standard RL is what needs it (no trial evidence), but it is applied to agentic RL too: a
  degenerate window is dead whatever produced it, and the trial pass-rate signal is judged
  besides.
- Log-ratio health (where the trainer emits the diagnostics): ``log_ratio_abs_mean`` above
  ``th.log_ratio_mean_max``, ``log_ratio_abs_max`` at or above ``th.log_ratio_max_max``,
  ``n_tokens_dp_gt_50pct`` above ``th.gt_50pct_max``, or position buckets whose largest mean is
  more than ``th.log_ratio_bucket_spread`` × the smallest: verdict ``warning`` on the latest
  step. A small mean is the seqnorm regime, never a warning.
- Banked-step cadence: the save cadence is the typical gap between the steps the log says were
  saved (or between durable checkpoints on disk). A live run whose newest durable checkpoint lags
  its step by more than ``th.checkpoint_cadence_factor`` cadences is banking nothing: warning.
- ``pass@N`` (``reward/avg_pass_at_N``) and ``z_clip/triggered`` are shown in the trend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from itertools import pairwise
from statistics import median

from probes.logs.precision import decimals
from probes.models import JobState, MetricPoint
from report.cells import format_value
from report.findings import Findings, JudgeContext, Priority, series
from report.settings import Thresholds


def _dead_run(history: Sequence[MetricPoint], metric: str, th: Thresholds,
              dead: Callable[[float], bool]) -> list[float] | None:
    """The window's newest values that are all ``dead``, when at least ``th.min_window`` of
    them are: a run that died three steps into the window is dead now, not once the live
    steps before its death have left the window (the whole window was asked for: a run
    whose last 8 of 10 steps had entropy 0 and grad norm exactly 0 read healthy)."""
    values = series(history, metric)[-th.window :]
    run = 0
    for value in reversed(values):
        if not (math.isfinite(value) and dead(value)):
            break
        run += 1
    return values[len(values) - run :] if run >= th.min_window else None


FIXED_DECIMAL_FORMATS = frozenset({"skyrl", "verl", "megatron", "prime-rl", "mmengine"})
"""Log formats (``LogSummary.formats``) of trainers that print some versions' metrics with a
fixed 3 or 4 decimals: a printed 0 there may be any value under half the last place."""
FIXED_DECIMALS = 4
"""The most decimals those printers give: a value with more was printed at finer precision."""


def grad_zero_unresolved(history: Sequence[MetricPoint], formats: Collection[str]) -> bool:
    """Whether a grad norm printed 0 may be a small value rounded away (module policy)."""
    if not FIXED_DECIMAL_FORMATS.intersection(formats):
        return False
    for metric in _SAME_PRINTER:
        for value in series(history, metric):
            places = decimals(value) if value else None
            if places is not None and places > FIXED_DECIMALS:
                return False
    return True


_SAME_PRINTER = ("grad_norm", "policy_loss", "entropy")
"""The policy update's own metrics, which every trainer prints the way it prints the grad
norm (SkyRL's status line gives all three at full precision; its reward line is another
printer, precise even where the step dict is not)."""


def degenerate_reasons(history: Sequence[MetricPoint], th: Thresholds,
                       formats: Collection[str] = (), notes: list[str] | None = None,
                       ) -> list[str]:
    """Why the window's rollouts are degenerate (empty when they are not); a grad norm of 0
    that the log's precision cannot tell from a small one goes to ``notes`` instead."""
    reasons = []
    rewards = _dead_run(history, "reward", th, lambda r: abs(r) <= th.dead_reward_abs)
    if rewards and _never_rewarded_yet(history, rewards, th):
        if notes is not None:
            notes.append(f"reward 0 since its first logged step ({len(rewards)} steps): a run "
                         "that starts at reward 0 is read as dead once a whole window "
                         f"({th.window}) is")
    elif rewards:
        reasons.append(f"reward flat at 0 for {len(rewards)} steps")
    lengths = _dead_run(history, "avg_num_tokens", th, lambda n: n <= th.dead_response_tokens)
    if lengths:
        reasons.append(f"responses ~{format_value(lengths[-1])} token for {len(lengths)} steps")
    entropy = _dead_run(history, "entropy", th, lambda e: abs(e) <= th.dead_entropy_max)
    if entropy:
        reasons.append(f"entropy ~0 for {len(entropy)} steps")
    grads = _dead_run(history, "grad_norm", th, lambda g: g == 0.0)
    if grads and grad_zero_unresolved(history, formats):
        if notes is not None:
            notes.append(f"grad norm printed 0 for {len(grads)} steps: below the log's "
                         f"{FIXED_DECIMALS}-decimal precision (the seqnorm regime prints 0 "
                         "there too); a deep probe tells a dead run")
    elif grads:
        reasons.append(f"grad norm exactly 0 for {len(grads)} steps")
    return reasons


def _never_rewarded_yet(history: Sequence[MetricPoint], zeros: Sequence[float],
                        th: Thresholds) -> bool:
    """The zero run is every reward the run has logged, and it is shorter than a window: a
    healthy run that merely starts at reward 0 (a hard task's first steps), not yet a dead one
    (module policy). The history must begin at the run's first logging step (at most one
    logging interval from 0): a tail read mid-run, or a run resumed from a checkpoint, shows
    only its latest rewards, and zeros there are a reward that may have fallen flat."""
    steps = [p.step for p in history if "reward" in p.values]
    if len(zeros) >= th.window or len(zeros) != len(steps):
        return False
    interval = steps[1] - steps[0] if len(steps) >= 2 else 1
    return steps[0] <= interval


def dead_rollouts_rule(ctx: JudgeContext, f: Findings) -> None:
    """Flag ``dead-rollouts``; on a live run, warn and ask for a deep probe."""
    summary = ctx.facts.summary
    reasons = degenerate_reasons(ctx.history, ctx.settings.thresholds,
                                 summary.formats if summary is not None else (), f.notes)
    if not reasons:
        return
    f.flag("dead-rollouts")
    text = "DEAD ROLLOUTS: " + "; ".join(reasons)
    f.trend(Priority.INFO + 8, text)
    if ctx.running or ctx.state is JobState.COMPLETED:
        # CONTRACT §6: warning, deep_probe. A run that completed on a dead window is no
        # "done": its cleanup would consolidate and upload a model that had stopped learning.
        f.verdict("warning")
        ended = "" if ctx.running else "it completed so; "
        f.recommend(Priority.DIAGNOSE - 5, "deep_probe",
                    f"dispatch rl-job-health-deep-dive on {ctx.facts.record.name}: "
                    f"{'; '.join(reasons)}; {ended}the row can read healthy on a silently "
                    "dead run")


def log_ratio_health(ctx: JudgeContext, f: Findings) -> None:
    """Warn when the latest step's per-token log-ratio diagnostics leave the healthy ranges."""
    if not ctx.history:
        return
    th = ctx.settings.thresholds
    values = ctx.history[-1].values
    problems = []
    mean = values.get("log_ratio_abs_mean")
    if mean is not None and (not math.isfinite(mean) or mean > th.log_ratio_mean_max):
        problems.append(f"mean {format_value(mean)} >{th.log_ratio_mean_max:g}")
    top = values.get("log_ratio_abs_max")
    if top is not None and (not math.isfinite(top) or top >= th.log_ratio_max_max):
        problems.append(f"max {format_value(top)} ≥{th.log_ratio_max_max:g}")
    gt50 = values.get("n_tokens_dp_gt_50pct")
    if gt50 is not None and (not math.isfinite(gt50) or gt50 > th.gt_50pct_max):
        problems.append(f"gt_50pct {format_value(gt50)}")
    buckets = [v for k, v in sorted(values.items()) if k.startswith("log_ratio_pos_")]
    if len(buckets) >= 2 and all(math.isfinite(b) and b >= 0 for b in buckets):
        low, high = min(buckets), max(buckets)
        if high > 0 and (low == 0 or high / low > th.log_ratio_bucket_spread):
            problems.append("position buckets uneven")
    if problems:
        f.verdict("warning")
        f.trend(Priority.INFO + 1, "log-ratio out of range: " + ", ".join(problems))


def _cadence(steps: Sequence[int]) -> float | None:
    ordered = sorted(set(steps))
    gaps = [b - a for a, b in pairwise(ordered) if b > a]
    return float(median(gaps)) if gaps else None


def banking_rule(ctx: JudgeContext, f: Findings) -> None:
    """Warn when a live run's durable checkpoints stopped landing at its save cadence."""
    if not ctx.running or f.step is None or ctx.facts.checkpoints is None:
        return
    saved = ctx.facts.summary.checkpoint_steps if ctx.facts.summary else ()
    cadence = _cadence(saved) or _cadence(ctx.facts.checkpoints.steps)
    banked = ctx.facts.checkpoints.banked_step
    if cadence is None or (banked is None and not saved):
        return
    if banked is None and ctx.facts.checkpoints.unreadable:
        return  # the steps on disk are unknown, not absent (the Trend says it)
    lag = f.step - (banked or 0)
    if lag > ctx.settings.thresholds.checkpoint_cadence_factor * cadence:
        f.verdict("warning")
        since = f"since step {banked}" if banked is not None else "on disk"
        f.trend(Priority.INFO + 2, f"No durable checkpoint {since} "
                f"(cadence {cadence:g}, now step {f.step}): banking nothing")


def extras_text(f: Findings, samples_per_prompt: int | None) -> str:
    """``; pass@8 0.62; z-clip 3×`` for the trend, from the latest metrics."""
    parts = []
    pass_at = f.metrics.get("pass_at_n")
    if isinstance(pass_at, float) and math.isfinite(pass_at):
        parts.append(f"pass@{samples_per_prompt or 'N'} {format_value(pass_at)}")
    triggered = f.metrics.get("z_clip_triggered")
    if isinstance(triggered, float) and math.isfinite(triggered) and triggered > 0:
        parts.append(f"z-clip {format_value(triggered)}×")
    return "".join(f"; {p}" for p in parts)
