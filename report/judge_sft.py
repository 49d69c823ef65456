"""SFT rules, the training-loop rules RL shares with SFT, and the SFT grid rollup.

Policy (seed §SFT and CONTRACT §5/§6):

- Progress: ``step`` is the latest logged step or the training progress bar, whichever is
  further; ``total_steps`` comes from the banner/config (``LogSummary.total_steps``) or the
  training bar's denominator, never an example count. ``sec_per_step`` is the trailing-window
  rate from the log summary, never one tailed s/it.
- Stall: RUNNING with no new step for ``max(stall_step_multiple × sec_per_step,
  stall_min_minutes)``, timed from the latest step's wall time, else the log's last timestamp,
  else the log file's mtime. Only judged when the log was actually read.
- Buffer-filling: RUNNING with no step yet, a bring-up-only log, or PENDING (queue admission
  is bring-up too). Never when the fetch failed: a failed fetch looks exactly like an idle job.
- ``nan-loss``: a non-finite loss, or loss exactly 0 with a non-finite grad_norm, on one of the
  last ``collapse_recent_steps`` steps (or a nan-loss fault). Verdict ``failed``: the weights
  are poisoned even if the process is still running.
- ``grad-explosion``: grad_norm > ``sft_grad_explosion_factor`` × window mean, or non-finite,
  on one of the recent steps. Verdict ``warning``: a single spike can recover.
- OOM with no step (or step <= 1): "CUDA OOM at first forward/backward" (batch/sequence
  geometry, not a flaky node).
- Grid rollup: a grid is >= 2 distinct SFT cell names sharing the name minus its last
  ``-``/``_`` token, or jobs carrying the same ``grid`` label. Pending copies of a running
  cell (restart-chain resume backups) and repeated pending copies are counted once.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence

from probes.models import JobState
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
from report.models import GridCell, GridRollup, JobReport
from report.settings import Thresholds
from report.signals import window_of
from report.trend import describe_loss, duration, fmt, with_sparkline


def step_progress(ctx: JudgeContext, f: Findings) -> None:
    """Fill step, total_steps, metrics and sec_per_step from the history and the log summary."""
    f.metrics.update(latest_values(ctx.history))
    summary = ctx.facts.summary
    steps = [p.step for p in ctx.history]
    if summary is not None and summary.progress is not None:
        steps.append(summary.progress.current)
    f.step = max(steps) if steps else None
    if summary is not None:
        bar_total = summary.progress.total if summary.progress else None
        f.total_steps = summary.total_steps or bar_total
        if summary.sec_per_step is not None and "sec_per_step" not in f.metrics:
            f.metrics["sec_per_step"] = summary.sec_per_step


def sec_per_step(ctx: JudgeContext) -> float | None:
    """The run's own trailing-window step time, if known."""
    summary = ctx.facts.summary
    if summary is not None and summary.sec_per_step:
        return summary.sec_per_step
    recent = series(ctx.history, "sec_per_step")
    if recent and is_finite(recent[-1]):
        return recent[-1]
    if summary is not None and summary.progress is not None:
        return summary.progress.sec_per_it
    return None


def stall_rule(ctx: JudgeContext, f: Findings) -> None:
    """Flag ``stall`` when a RUNNING job has logged no new step for its stall window."""
    if not ctx.running or not ctx.history or not ctx.fetch_ok:
        return
    th = ctx.settings.thresholds
    rate = sec_per_step(ctx)
    limit = max(th.stall_step_multiple * rate / 60.0 if rate else 0.0, th.stall_min_minutes)
    silent = silent_minutes(ctx)
    if silent is not None and silent > limit:
        f.flag("stall")
        f.verdict("stalled")
        text = f"STALL: no new step for {duration(silent * 60)} (limit {duration(limit * 60)})"
        f.trend(Priority.DIAGNOSE, text)
        f.recommend(Priority.DIAGNOSE, "diagnose", text + "; look for a hung actor or rank")


def silent_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the run's last logged step.

    Log timestamps are the cluster's local time with no zone, so they are never compared with
    ``now``: the gap between the last step and the newest timestamped line is measured on the
    log's own clock, and the time since the file was last written on the file's (tz-aware)
    mtime. Heartbeat noise after the last step therefore still counts as silence.
    """
    log = ctx.facts.log
    summary = ctx.facts.summary
    last_step = ctx.history[-1].wall_time
    since_write = minutes_since(ctx.now, log.mtime) if log is not None else None
    in_log = None
    if last_step is not None and summary is not None and summary.last_timestamp is not None:
        in_log = max(0.0, (summary.last_timestamp.replace(tzinfo=None)
                           - last_step.replace(tzinfo=None)).total_seconds() / 60.0)
    if since_write is None:
        return in_log
    return max(0.0, since_write) + (in_log or 0.0)


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
    if not ctx.history or bring_up:
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, "Bring-up; no step yet" if bring_up else "Filling buffer")


def divergence_rule(
    ctx: JudgeContext, f: Findings, loss_metric: str, *, explosion: bool = True
) -> None:
    """Flag ``nan-loss`` (and, unless ``explosion`` is off, ``grad-explosion``) on recent steps."""
    th = ctx.settings.thresholds
    start = max(0, len(ctx.history) - th.collapse_recent_steps)
    faults = ctx.facts.summary.faults if ctx.facts.summary else ()
    for index in range(start, len(ctx.history)):
        values = ctx.history[index].values
        loss, grad = values.get(loss_metric), values.get("grad_norm")
        bad_grad = grad is not None and not math.isfinite(grad)
        if (loss is not None and not math.isfinite(loss)) or (loss == 0.0 and bad_grad):
            _nan_loss(f, ctx.history[index].step, loss)
        if explosion and grad is not None and _exploded(ctx, index, grad, th):
            f.flag("grad-explosion")
            f.verdict("warning")
            f.trend(Priority.INFO, f"Grad explosion at step {ctx.history[index].step}: {fmt(grad)}")
    if any(fault.kind == "nan-loss" for fault in faults):
        _nan_loss(f, None, None)


def _nan_loss(f: Findings, step: int | None, loss: float | None) -> None:
    f.flag("nan-loss")
    f.verdict("failed")
    where = f" at step {step}" if step is not None else ""
    text = f"Loss → NaN{where}" if loss is None or loss != 0.0 else f"Loss 0 with NaN grad{where}"
    f.trend(Priority.TERMINAL, text)
    f.recommend(Priority.DIAGNOSE, "diagnose", f"{text}: weights are poisoned; resume from the "
                "last good checkpoint after fixing LR/precision")


def _exploded(ctx: JudgeContext, index: int, grad: float, th: Thresholds) -> bool:
    if not math.isfinite(grad):
        return True
    window = window_of(ctx.history, index, "grad_norm", th.window)
    if len(window) < th.min_window:
        return False
    mean = sum(window) / len(window)
    return mean > 0 and grad > th.sft_grad_explosion_factor * mean


def oom_at_start(ctx: JudgeContext, f: Findings) -> None:
    """Name an OOM before the first real step as a geometry problem, not a flaky node."""
    faults = ctx.facts.summary.faults if ctx.facts.summary else ()
    if any(fault.kind == "oom" for fault in faults) and (f.step is None or f.step <= 1):
        f.trend(Priority.TERMINAL + 1, "CUDA OOM at first forward/backward")


def judge_sft(ctx: JudgeContext, f: Findings) -> None:
    """Apply the SFT rules to one job."""
    step_progress(ctx, f)
    buffer_rule(ctx, f)
    stall_rule(ctx, f)
    divergence_rule(ctx, f, "loss")
    oom_at_start(ctx, f)
    if ctx.running and ctx.history and ctx.fetch_ok:
        f.verdict("healthy")
        text = describe_loss(series(ctx.history, "loss"))
        rate = sec_per_step(ctx)
        if rate and f.step is not None and f.total_steps and f.total_steps > f.step:
            text += f", ETA {duration((f.total_steps - f.step) * rate)}"
        f.trend(Priority.BACKGROUND, with_sparkline(text, series(ctx.history, "loss")))


_CELL_SUFFIX = re.compile(r"^(?P<grid>.+)[-_][^-_]+$")


def grid_name(report: JobReport, labels: dict[str, str]) -> str | None:
    """The grid a cell belongs to: its ``grid`` label, else its name minus the last token."""
    if labels.get("grid"):
        return labels["grid"]
    match = _CELL_SUFFIX.match(report.name)
    return match.group("grid") if match else None


def grid_rollups(
    jobs: Sequence[tuple[JobReport, dict[str, str], float | None]],
) -> list[GridRollup]:
    """Roll SFT jobs (report, labels, sec_per_step) up into grids with a running/pending cell."""
    groups: dict[str, list[tuple[JobReport, float | None]]] = defaultdict(list)
    for report, labels, rate in jobs:
        name = grid_name(report, labels) if report.bucket == "sft" else None
        if name is not None:
            groups[name].append((report, rate))
    rollups = []
    for name, members in sorted(groups.items()):
        if len({r.name for r, _ in members}) >= 2:
            rollup = _rollup(name, members)
            if rollup.running or rollup.pending_unique:
                rollups.append(rollup)
    return rollups


def _rollup(name: str, members: Sequence[tuple[JobReport, float | None]]) -> GridRollup:
    running = [(r, rate) for r, rate in members if r.state is JobState.RUNNING]
    running_names = {r.name for r, _ in running}
    pending = {r.name for r, _ in members if r.state is JobState.PENDING} - running_names
    done = {r.name for r, _ in members if r.state is JobState.COMPLETED}
    done -= running_names | pending
    cells = [_cell(r, rate) for r, rate in sorted(running, key=lambda m: m[0].name)]
    timed = [c for c in cells if c.eta_s is not None]
    pole = max(timed, key=lambda c: c.eta_s or 0.0).cell if timed else None
    return GridRollup(
        grid=name, running=len(running_names), pending_unique=len(pending), done=len(done),
        cells=cells, long_pole=pole,
    )


def _cell(report: JobReport, rate: float | None) -> GridCell:
    pct = eta = None
    if report.step is not None and report.total_steps:
        pct = round(100.0 * report.step / report.total_steps, 1)
        if rate:
            eta = max(0, report.total_steps - report.step) * rate
    return GridCell(cell=report.name, job_id=report.job_id, progress_pct=pct, eta_s=eta)
