"""The training-loop rules the SFT, RL and Harbor judges share.

Policy (seed §SFT/§RL and CONTRACT §5/§6):

- Progress: ``step`` is the latest logged step or the training progress bar, whichever is
  further; ``total_steps`` comes from the banner/config (``LogSummary.total_steps``) or the
  training bar's denominator, never an example count. ``sec_per_step`` is the trailing-window
  rate (log summary, else Δwall/Δstep over the history: :func:`sec_per_step`), never one tailed
  s/it while anything better is known.
- Stall: RUNNING with no new step for ``max(stall_step_multiple × sec_per_step,
  stall_min_minutes)``, timed from the latest step's wall time, else the log's last timestamp,
  else the log file's mtime. Only judged when the log was actually read.
- Buffer-filling: RUNNING with no step yet, a bring-up-only log, or PENDING (queue admission
  is bring-up too). Never when the fetch failed: a failed fetch looks exactly like an idle job.
- ``nan-loss``: a non-finite loss, or loss exactly 0 with a non-finite grad_norm, on one of the
  last ``collapse_recent_steps`` steps (or a nan-loss fault). Verdict ``failed``: the weights
  are poisoned even if the process is still running. The Trend names the step the diverged
  run began at (looked for over the whole history), the step to resume before; "at or before"
  it when every point held is diverged from there (the run may have gone bad before a tail).
- Empty log (:func:`empty_log_rule`): RUNNING past the bucket's bring-up window
  (``AbsenceRules``) with nothing logged is no buffer filling: a 0-byte file is ``stall``, a
  non-empty file read as nothing is ``fetch-failed``.
- ``grad-explosion``: grad_norm > ``sft_grad_explosion_factor`` × window mean, or non-finite,
  on one of the recent steps. Verdict ``warning``: a single spike can recover. RL turns it off
  (a grad spike there is the grad_norm collapse signal). A finite spike before the window
  holds ``min_window`` values is no ``grad-explosion`` (CONTRACT §5: a windowed test needs 5
  values; "or not finite" is the only clause that needs none): there is no mean to be 10 x.
- No gradient (:func:`no_gradient_rule`, SFT): grad_norm exactly 0 on the newest
  ``min_window`` or more logged values (RL's ``dead-rollouts`` reads "grad norm exactly 0" the
  same way) is a run whose weights stopped updating, however calm its loss looks (a model
  diverged and zeroed sits at ln(vocab), "Loss flat"). No flag (CONTRACT §6 has none for SFT;
  ``dead-rollouts`` is about RL rollouts): verdict ``warning``, a trend saying for how many
  steps, and ``diagnose`` naming the last nonzero grad norm; on a COMPLETED run the
  recommendation replaces its cleanup (the run is no finished training). A 0 that a
  fixed-decimal printer may have rounded (:func:`report.rollouts.grad_zero_unresolved`) is a
  note instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import Field

from probes.logs.clock import minutes_on_log_clock
from probes.logs.progress import trailing_rate
from probes.logs.scan_steps import OPENRLHF_UNSTEPPED
from probes.models import Frozen, JobState, LogSummary, MetricPoint
from report.cells import format_duration, format_value
from report.cleanup import cleanup_routine
from report.findings import (
    Findings,
    JudgeContext,
    Priority,
    is_finite,
    latest_values,
    minutes_since,
    pending_note,
    series,
)
from report.harbor_trials import last_activity_minutes
from report.rollouts import grad_zero_unresolved
from report.settings import Thresholds
from report.signals import Windows


def step_progress(ctx: JudgeContext, f: Findings) -> None:
    """Fill step, total_steps, metrics and sec_per_step from the history and the log summary."""
    f.metrics.update(latest_values(ctx.history))
    summary = ctx.facts.summary
    unanchored = summary is not None and summary.steps_unanchored
    # A cut tail's bar-less HF dicts carry their order only: no step is claimed from them.
    steps = [] if unanchored else [p.step for p in ctx.history]
    if summary is not None and summary.progress is not None:
        steps.append(summary.progress.current)
    f.step = max(steps) if steps else None
    if summary is not None:
        bar_total = summary.progress.total if summary.progress else None
        f.total_steps = summary.total_steps or bar_total
        _past_total(f)
    rate = sec_per_step(ctx)
    if rate is not None:
        # The contract's sec_per_step is the trailing-window rate (what ETAs and the grid's
        # long pole are computed from), never the latest single step time.
        f.metrics["sec_per_step"] = rate


def _past_total(f: Findings) -> None:
    """A step past the run's total (a run resumed from a checkpoint beyond a lowered
    ``max_steps``: HF's bar, ``tqdm(total=max_steps)`` updated by the global step, reads
    ``70/30``) is no progress to show: the total is left unknown and the Trend says why."""
    if f.step is None or not f.total_steps or f.step <= f.total_steps:
        return
    text = f"step {f.step} past its total {f.total_steps}: max_steps lowered on resume?"
    f.trend(Priority.INFO, text)
    f.notes.append(text)
    f.total_steps = None


def sec_per_step(ctx: JudgeContext) -> float | None:
    """The run's own trailing-window step time, if known.

    In order: the log summary's trailing rate; Δwall/Δstep over the history's last steps (the
    bot's stored history spans more than one tail); the mean of a logged per-step time over the
    window; only then the progress bar's one tailed s/it.
    """
    summary = ctx.facts.summary
    if summary is not None and summary.sec_per_step:
        return summary.sec_per_step
    timed = [(p.step, p.wall_time.timestamp()) for p in ctx.history if p.wall_time is not None]
    rate = trailing_rate(timed)
    if rate is not None:
        return rate
    recent = [v for v in series(ctx.history, "sec_per_step") if is_finite(v)]
    window = recent[-ctx.settings.thresholds.window:]
    if window:
        return sum(window) / len(window)
    if summary is not None and summary.progress is not None:
        return summary.progress.sec_per_it
    return None


def stall_rule(ctx: JudgeContext, f: Findings) -> None:
    """Flag ``stall`` when a RUNNING job has logged no new step for its stall window; one
    whose trainer said it finished is told as stuck after training, not mid-way; one with no
    step yet whose log went silent is hung in bring-up (:func:`_bring_up_stall`)."""
    if not ctx.running or not ctx.fetch_ok:
        return
    if not ctx.history:
        _bring_up_stall(ctx, f)
        return
    th = ctx.settings.thresholds
    rate = sec_per_step(ctx)
    limit = max(th.stall_step_multiple * rate / 60.0 if rate else 0.0, th.stall_min_minutes)
    silent = silent_minutes(ctx)
    if silent is not None and silent > limit:
        f.flag("stall")
        f.verdict("stalled")
        summary = ctx.facts.summary
        if summary is not None and summary.finished:
            # The trainer said it finished (HF's train_runtime, ...): no step is left, the
            # job is stuck after training, not mid-way.
            done = ctx.history[-1].step
            total = f"/{summary.total_steps}" if summary.total_steps else ""
            text = (f"STALL after training done ({done}{total}): silent "
                    f"{format_duration(silent * 60)} (limit {format_duration(limit * 60)})")
            why = "; look for a hang after training (final save, hub push, exit barrier)"
        else:
            text = (f"STALL: no new step for {format_duration(silent * 60)} "
                    f"(limit {format_duration(limit * 60)})")
            why = "; look for a hung actor or rank"
        f.trend(Priority.DIAGNOSE, text)
        f.recommend(Priority.DIAGNOSE, "diagnose", text + why)


def _bring_up_stall(ctx: JudgeContext, f: Findings) -> None:
    """A run still in bring-up (no step yet) whose log has said nothing for
    ``stall_min_minutes``, timed from no earlier than the job's start: no bring-up but a hang
    before the first step (a collective that never forms, a trainer resumed at its
    ``max_steps`` waiting for a batch that never comes: prime-rl before #3352). The seed's
    benign bring-up keeps its log moving (loading bars, heartbeats); an empty log is
    :func:`empty_log_rule`'s."""
    log = ctx.facts.log
    # Timed by the file's mtime only: with none (a pod's log) the lines' zone-less stamps
    # would be compared with now, hours off west of UTC (probes.logs.clock's zone policy).
    if "buffer-filling" not in f.flags or log is None or not log.text or log.mtime is None:
        return
    silent = last_activity_minutes(ctx)
    limit = ctx.settings.thresholds.stall_min_minutes
    if silent is None or silent <= limit:
        return
    f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")
    f.flag("stall")
    f.verdict("stalled")
    text = (f"STALL in bring-up: no step and no new log line for "
            f"{format_duration(silent * 60)} (limit {format_duration(limit * 60)})")
    f.trend(Priority.DIAGNOSE, text)
    f.recommend(Priority.DIAGNOSE, "diagnose",
                text + "; look for a hang before the first step (a collective, a resume past "
                "max_steps, a download)")


def silent_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the run's last logged step.

    Log timestamps are the cluster's local time with no zone, so they are never compared with
    ``now``: the gap between the last step and the newest timestamped line is measured on the
    log's own clock, and the time since the file was last written on the file's (tz-aware)
    mtime (``probes.logs.clock.minutes_on_log_clock``). Heartbeat noise after the last step
    therefore still counts as silence; a step logged with no stamp is timed from the first
    stamped engine line after it (``LogSummary.step_quiet_since``), a lower bound.
    """
    log = ctx.facts.log
    summary = ctx.facts.summary
    newest = summary.last_timestamp if summary else None
    mtime = log.mtime if log is not None else None
    last = ctx.history[-1]
    since = last.wall_time
    if since is None and summary is not None and summary.points \
            and summary.points[-1].step == last.step:
        # An unstamped step line (Ray-forwarded verl): the first stamped line after it bounds
        # its age, or a hung run's heartbeat, keeping the file fresh, would read as no silence.
        since = summary.step_quiet_since
    return minutes_on_log_clock(since, newest, mtime, ctx.now)


def buffer_rule(ctx: JudgeContext, f: Findings) -> None:
    """Flag ``buffer-filling`` for a job in queue admission or bring-up with no step yet."""
    summary = ctx.facts.summary
    if ctx.state is JobState.PENDING:
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, pending_note(ctx.facts.record, ctx.now))
        return
    if not ctx.running or not ctx.fetch_ok:
        return
    bring_up = summary is not None and summary.bring_up
    # A training bar past 0 is a step landed, metrics or not (EasyR1's default loggers print
    # none to stdout): such a run is training, not filling its buffer.
    stepping = summary is not None and summary.progress is not None and (
        summary.progress.current > 0)
    if not ctx.history and not bring_up and _micro_batches_only(summary):
        f.trend(Priority.BACKGROUND, _UNSTEPPED_TREND)
    elif (not ctx.history and not stepping) or bring_up:
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, "Bring-up; no step yet" if bring_up else "Filling buffer")
    elif not ctx.history:
        f.trend(Priority.BACKGROUND, "Stepping; the log prints no metrics (a tracker-only logger?)")


def _micro_batches_only(summary: LogSummary | None) -> bool:
    """An OpenRLHF SFT/DPO/RM bar read without its gradient accumulation: micro-batches run,
    the optimizer step unknown (``probes.logs.scan_steps.OPENRLHF_UNSTEPPED``)."""
    return summary is not None and OPENRLHF_UNSTEPPED in summary.formats


_UNSTEPPED_TREND = "Step unknown: micro-batch bar, no grad accumulation printed"
"""Within the trend cell's width: the step is the bar's micro-batches over the accumulation,
which only DeepSpeed's config dump prints."""


def divergence_rule(
    ctx: JudgeContext, f: Findings, loss_metric: str, *, explosion: bool = True
) -> None:
    """Flag ``nan-loss`` (and, unless ``explosion`` is off, ``grad-explosion``) on recent steps."""
    th = ctx.settings.thresholds
    start = max(0, len(ctx.history) - th.collapse_recent_steps)
    faults = ctx.facts.summary.faults if ctx.facts.summary else ()
    windows = Windows(ctx.history, start, th.window)
    named = False
    advised = False  # the first explosion in view is the one to resume from before
    for index in range(start, len(ctx.history)):
        values = ctx.history[index].values
        grad = values.get("grad_norm")
        if not named and _diverged(values, loss_metric):
            named = True
            onset = _onset(ctx.history, index, loss_metric)
            _nan_loss(f, ctx.history[onset].step, ctx.history[onset].values.get(loss_metric),
                      held_all=_bad_from_start(ctx.history, onset, loss_metric))
        if explosion and grad is not None and _exploded(windows, index, grad, th):
            f.flag("grad-explosion")
            f.verdict("warning")
            f.trend(Priority.INFO,
                    f"Grad explosion at step {ctx.history[index].step}: {format_value(grad)}")
            if not advised:
                advised = True
                _explosion_advice(ctx, f, ctx.history[index].step, grad,
                                  windows.of(index, "grad_norm"))
    if any(fault.kind == "nan-loss" for fault in faults):
        _nan_loss(f, None, None)


def _diverged(values: Mapping[str, float], loss_metric: str) -> bool:
    """A non-finite loss, or a loss of exactly 0 beside a non-finite grad norm (trainers that
    filter NaN losses print 0)."""
    loss, grad = values.get(loss_metric), values.get("grad_norm")
    bad_grad = grad is not None and not math.isfinite(grad)
    return (loss is not None and not math.isfinite(loss)) or (loss == 0.0 and bad_grad)


def _onset(history: Sequence[MetricPoint], index: int, loss_metric: str) -> int:
    """The first point of the diverged run holding ``index``, looked for over the whole
    history: the last five steps only say the run is bad now, and "resume from the last good
    checkpoint" needs the step it went bad at. Points logging neither metric (an eval dict)
    neither end nor extend the run."""
    onset = index
    for earlier in range(index - 1, -1, -1):
        values = history[earlier].values
        if loss_metric not in values and "grad_norm" not in values:
            continue
        if not _diverged(values, loss_metric):
            break
        onset = earlier
    return onset


def _bad_from_start(history: Sequence[MetricPoint], onset: int, loss_metric: str) -> bool:
    """Whether no point before ``onset`` logs the loss or grad norm: the diverged run reaches
    back past what the history holds (a tail's last 32 steps), so it may have begun earlier."""
    earlier = any(loss_metric in p.values or "grad_norm" in p.values for p in history[:onset])
    return not earlier and history[onset].step > 1  # step 1 is where any run begins


def _nan_loss(f: Findings, step: int | None, loss: float | None, *,
              held_all: bool = False) -> None:
    f.flag("nan-loss")
    f.verdict("failed")
    # ``held_all``: every logged point read is diverged from ``step`` on, which need not be
    # where it began; "at step N" would send the user back to a checkpoint already poisoned.
    where = f" at{' or before' if held_all else ''} step {step}" if step is not None else ""
    text = f"Loss → NaN{where}" if loss is None or loss != 0.0 else f"Loss 0 with NaN grad{where}"
    f.trend(Priority.TERMINAL, text)
    f.recommend(Priority.DIAGNOSE, "diagnose", f"{text}: weights are poisoned; resume from the "
                "last good checkpoint after fixing LR/precision")


def _explosion_advice(ctx: JudgeContext, f: Findings, step: int, grad: float,
                      window: Sequence[float]) -> None:
    """A grad explosion is a seed SFT red flag (beside loss -> NaN): ask for a diagnosis naming
    the step, and the last banked checkpoint before it to resume from should the loss follow.
    Ranked under a NaN loss's advice (the weights are already poisoned there)."""
    factor = ctx.settings.thresholds.sft_grad_explosion_factor
    mean = (f" (> {factor:g}× window mean {format_value(sum(window) / len(window))})"
            if window and math.isfinite(grad) else "")
    steps = ctx.facts.checkpoints.steps if ctx.facts.checkpoints else ()
    before = [s for s in steps if s < step]
    resume = (f"banked step {max(before)}, the last before it" if before
              else "the last checkpoint before it (no banked checkpoint before it found)")
    f.recommend(Priority.DIAGNOSE - 1, "diagnose",
                f"grad explosion at step {step}: grad_norm {format_value(grad)}{mean}: a red "
                "flag; check the LR/warmup, precision and that step's batch, and if the loss "
                f"follows resume from {resume}")


def _exploded(windows: Windows, index: int, grad: float, th: Thresholds) -> bool:
    if not math.isfinite(grad):
        return True
    window = windows.of(index, "grad_norm")
    if len(window) < th.min_window:
        return False
    mean = sum(window) / len(window)
    return mean > 0 and grad > th.sft_grad_explosion_factor * mean


def no_gradient_rule(ctx: JudgeContext, f: Findings) -> None:
    """Warn (and ask for a diagnosis) when grad_norm has been exactly 0 on the newest
    ``min_window`` or more logged values (module policy)."""
    zeros: list[int] = []  # the steps of the newest run of zeros, newest first
    before = None  # the point logging the last nonzero grad norm before them
    for point in reversed(ctx.history):  # a live gradient ends this at its newest value
        grad = point.values.get("grad_norm")
        if grad is None:
            continue
        if grad != 0.0:
            before = point
            break
        zeros.append(point.step)
    if len(zeros) < ctx.settings.thresholds.min_window:
        return
    first, last = zeros[-1], zeros[0]
    span = last - first + 1
    summary = ctx.facts.summary
    if grad_zero_unresolved(ctx.history, summary.formats if summary is not None else ()):
        f.notes.append(f"grad norm printed 0 for {len(zeros)} logged steps: below the log's "
                       "printed precision; check that the run still learns")
        return
    if before is not None:
        trend = f"No gradient for {span} steps: grad norm 0 since step {first}"
        which = f"the last {len(zeros)} logged steps"
        cause = (f"; the last nonzero grad norm was {format_value(before.values['grad_norm'])} "
                 f"at step {before.step}")
    else:  # every value the history holds (a log's kept points, a tail): at least this long
        trend = f"No gradient for {span}+ steps: grad norm 0 on all read"
        which, cause = f"all {len(zeros)} logged steps read", ""
    f.verdict("warning")
    f.trend(Priority.INFO + 6, trend)
    why = (f"no gradient: grad norm exactly 0 on {which} (steps {first}-{last}){cause}; "
           "the weights stopped updating, whatever the loss reads")
    routine = cleanup_routine("sft", ctx.facts)
    if ctx.state is JobState.COMPLETED and routine is not None:
        why += f"; not a trained model: find why before consolidating or running {routine}"
    else:
        why += "; find why (divergence, LR, precision) and resume from a checkpoint before it"
    f.recommend(Priority.DIAGNOSE - 1, "diagnose", why)


class AbsenceRules(Frozen):
    """Empty and absent (seed: "verify a log path EXISTS before concluding dead", "a failed log
    fetch is indistinguishable from an idle job", Kubernetes "running-but-0-pods ... TERMINAL").
    Defaults of this module; per bucket, in minutes."""

    bring_up_minutes: dict[str, float] = Field(default_factory=lambda: {
        "rl": 20.0, "sft": 15.0, "datagen": 10.0, "eval": 10.0, "other": 15.0,
    })
    """How long a RUNNING job may show an empty (0-byte) log and still be in bring-up. Every
    launcher prints within minutes (Ray, torchrun, Harbor); RL gets the longest (gang admission,
    image pulls), and block-buffered Python stdout is why none is shorter than 10 minutes."""
    k8s_no_pods_grace_minutes: float = 5.0
    """A started Kubernetes job may have no pod for this long (the controller creating it)."""
    k8s_image_pull_grace_minutes: float = 30.0
    """An image pull may back off this long and still be bring-up that heals (a registry's
    hiccup, a large image); past it the pull is failing (a bad tag, no credentials)."""


ABSENCE = AbsenceRules()


def ran_minutes(ctx: JudgeContext) -> float | None:
    """How long the job has been running (since its start, else the scheduler's elapsed)."""
    record = ctx.facts.record
    since = minutes_since(ctx.now, record.start_time)
    if since is not None:
        return since
    return record.elapsed_s / 60.0 if record.elapsed_s is not None else None


def _empty_log_window(ctx: JudgeContext, bucket: str, window: float) -> float:
    """Minutes a RUNNING job's log may stay empty (0 bytes): the bucket's bring-up ``window``,
    and for an eval or datagen job at least its own stall window (CONTRACT: ``stall`` is no
    progress for the bucket's stall window; Harbor draws its progress with rich, which prints
    no live bar to a file, and an engine served by another job logs nothing here, so such a
    log stays empty until the first trials' lines, or for good)."""
    th = ctx.settings.thresholds
    stall = {"eval": th.eval_stall_minutes, "datagen": th.datagen_hung_minutes}.get(bucket)
    return window if stall is None else max(window, stall)


def empty_log_rule(ctx: JudgeContext, f: Findings, bucket: str) -> None:
    """A RUNNING job's empty log past its bucket's bring-up window is no buffer filling.

    A 0-byte file: the job has written nothing -> ``stall`` (an eval or datagen job past its
    bucket's stall window: ``_empty_log_window``). A non-empty file whose read returned nothing
    (from offset 0) -> ``fetch-failed``, state unknown (never "dead").
    """
    log = ctx.facts.log
    if not ctx.running or log is None or log.status not in ("ok", "mismatch") or log.text:
        return
    if ctx.history or log.offset > 0:
        return  # nothing new since the last read; the stored history speaks
    if ctx.facts.trials is not None and ctx.facts.trials.trials:
        return  # result.json files are landing: the job is alive whatever its log says
    ran = ran_minutes(ctx)
    window = ABSENCE.bring_up_minutes.get(bucket, ABSENCE.bring_up_minutes["other"])
    if log.size == 0:
        window = _empty_log_window(ctx, bucket, window)
    if ran is None or ran <= window:
        return
    if "buffer-filling" in f.flags:
        f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")
    if log.size == 0:
        f.flag("stall")
        f.verdict("stalled")
        text = (f"STALL: log empty (0 bytes) after {format_duration(ran * 60)} running "
                f"(bring-up {format_duration(window * 60)})")
        # above an eval's or datagen run's own stall (no result.json, no trial): the empty
        # log is what to look at first
        f.trend(Priority.DIAGNOSE + 1, text)
        f.recommend(Priority.DIAGNOSE + 1, "diagnose", text + "; check the job's processes and "
                    "where it really logs")
    else:
        f.flag("fetch-failed")
        f.verdict("unknown")
        f.trend(Priority.INFO, f"Log fetch returned nothing from {log.size} bytes; state unknown")
