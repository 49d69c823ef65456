"""SFT rules and the SFT grid rollup.

Policy (seed §SFT and CONTRACT §5/§6):

- Progress, stall, buffer-filling, ``nan-loss`` and ``grad-explosion`` are the training-loop
  rules SFT shares with RL (and Harbor's buffer rule): see :mod:`report.rules`.
- OOM with no step (or step <= 1): "CUDA OOM at first forward/backward" (batch/sequence
  geometry, not a flaky node).
- Grid rollup: a grid is >= 2 distinct SFT cell names sharing the name minus its last
  ``-``/``_`` token, or jobs carrying the same ``grid`` label. Pending copies of a running
  cell (restart-chain resume backups) and repeated pending copies are counted once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from probes.models import JobState
from report.cells import format_duration
from report.findings import (
    Findings,
    JudgeContext,
    Priority,
    series,
)
from report.models import GridCell, GridRollup, JobReport
from report.rules import buffer_rule, divergence_rule, sec_per_step, stall_rule, step_progress
from report.trend import describe_loss, with_sparkline


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
            text += f", ETA {format_duration((f.total_steps - f.step) * rate)}"
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
