"""What each status table shows: its columns, and the cell text of each row, per bucket.

Policy (CONTRACT §7, seed tables): one layout per bucket with the seed's columns in its order
(RL, SFT, Datagen, Eval, Catch-all, and "Filling buffer"). RL rows always carry entropy, the
TIS log-ratio and grad norm. Optional metric columns carry a ``fold_label`` and a
``fold_rank``: at narrow widths they fold into the Trend text (lowest rank first) instead of
breaking the box (:mod:`report.boxes` decides when). A verdict a reader must not miss is a
short tag after the job name. Cell text comes from :mod:`report.cells`; nothing here draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from report.cells import (
    DASH,
    abbreviate_exception,
    format_count,
    format_duration,
    format_number,
    format_state,
    format_step,
    one_line,
)
from report.models import GridRollup, JobDetail, JobReport

BUCKET_TITLES: Mapping[str, str] = {
    "rl": "RL", "sft": "SFT", "datagen": "Datagen", "eval": "Eval", "other": "Catch-all",
    "buffer": "Filling buffer",
}

# Verdicts a reader must not miss: shown as a short tag after the job name.
_MARKERS: Mapping[str, str] = {
    "collapse": "COLLAPSE", "warning": "WARN", "failed": "FAILED", "stalled": "STALLED",
    "restarting": "restart", "unknown": "?",
}



class Row(NamedTuple):
    """One job as a table row: the report, its detail (if the judge gave one), and its label."""

    job: JobReport
    detail: JobDetail | None
    label: str

    def metric(self, name: str) -> float | str | None:
        """The latest value of a canonical metric, or ``None`` when not emitted."""
        return self.job.metrics.get(name)


@dataclass(frozen=True)
class Column:
    """A table column: header, how to fill it, and whether it may fold into Trend."""

    header: str
    cell: Callable[[Row], str]
    numeric: bool = True
    fold_label: str | None = None
    """Set for optional columns: their value moves into Trend as ``<label> <value>``."""
    fold_rank: int = 0
    """Folding order at narrow widths: lowest rank folds first (0 = never folds)."""
    label: bool = False
    """A short label (the Catch-all Type): it breaks only after its separators
    (``datagen-`` / ``consolidate``), so at narrow widths it folds into the Note rather
    than be squeezed below its longest word part."""
    always: bool = False
    """A signal the table must always show (RL's entropy, TIS log-ratio and grad norm,
    CONTRACT section 7): folded into Trend, its ``—`` is kept (``LogR —``), not dropped."""


def _num(name: str, decimals: int, *, trim: bool = False) -> Callable[[Row], str]:
    return lambda row: format_number(row.metric(name), decimals, trim=trim)


def _policy_loss(row: Row) -> str:
    # TRL's GRPO/PPO-style trainers print their policy objective as plain ``loss`` (there is no
    # value head to separate it from); an RL run without ``policy_loss`` shows that instead.
    value = row.metric("policy_loss")
    return format_number(row.metric("loss") if value is None else value, 4)


def _step(row: Row) -> str:
    return format_step(row.job.step, row.job.total_steps)


def _log_ratio(row: Row) -> str:
    # The contract wants a TIS log-ratio visible; trainers without per-token diagnostics emit
    # only the capped importance ratio, which is labelled so nobody mistakes it for a log-ratio.
    if row.metric("log_ratio_abs_mean") is not None:
        return format_number(row.metric("log_ratio_abs_mean"), 3)
    if row.metric("imp_ratio_mean") is not None:
        return "imp " + format_number(row.metric("imp_ratio_mean"), 2)
    raw = row.metric("imp_ratio_uncapped_mean")
    if isinstance(raw, float | int):
        # A mean taken before the cap is one outlier token's once it is past any cap's scale
        # (exp(20) ~ 5e8 per token): shown as a ratio only while it reads as one.
        if raw >= UNCAPPED_READABLE and math.isfinite(raw):
            return f"imp >{UNCAPPED_READABLE:g}"
        return "imp " + format_number(raw, 2)
    return DASH


UNCAPPED_READABLE = 10.0
"""An uncapped importance-ratio mean at or above this is an outlier's, not a ratio to read."""


def _ratio(done: str, total: str, suffix: str = "") -> Callable[[Row], str]:
    def cell(row: Row) -> str:
        have, want = row.metric(done), row.metric(total)
        if have is None:
            return DASH
        text = format_count(have, exact=True)
        if want is not None:
            text += "/" + format_count(want, exact=True)
        return text + suffix

    return cell


def _exc_pct(row: Row) -> str:
    value = row.metric("exc_pct")
    if isinstance(value, float | int):
        return format_number(value, 0) + "%"
    return format_number(value, 0)


def _top_exc(row: Row) -> str:
    value = row.metric("top_exception")
    return abbreviate_exception(value) if isinstance(value, str) else format_number(value)


def _trend(row: Row) -> str:
    return row.job.trend or DASH


def _infra_trend(row: Row) -> str:
    infra = row.detail.infra if row.detail else None
    return f"{infra} ; {_trend(row)}" if infra else _trend(row)


def _note(row: Row) -> str:
    note = row.job.trend or (row.detail.note if row.detail else "") or DASH
    rec = row.job.recommendation
    # The seed asks whether a terminal job needs action; say so unless the note already does.
    if rec is not None and rec.action != "none" and rec.action not in note:
        note += f" → {rec.action}"
    return note


def _job(row: Row) -> str:
    return row.label


_TREND = Column("Trend", _trend, numeric=False)
_ELAPSED = Column("Elapsed", lambda r: format_duration(r.job.elapsed_s), fold_label="elapsed",
                  fold_rank=1)

LAYOUTS: Mapping[str, tuple[Column, ...]] = {
    "rl": (
        Column("Job", _job, numeric=False),
        Column("Step", _step),
        Column("Reward", _num("reward", 3), fold_label="R", fold_rank=6),
        Column("Policy Loss", _policy_loss, fold_label="PL", fold_rank=3),
        Column("Grad Norm", _num("grad_norm", 3), fold_label="GN", fold_rank=5, always=True),
        Column("Entropy", _num("entropy", 3), fold_label="H", fold_rank=4, always=True),
        Column("LogRatio", _log_ratio, fold_label="LogR", fold_rank=2, always=True),
        _TREND,
    ),
    "sft": (
        Column("Job", _job, numeric=False),
        Column("Step", _step),
        Column("Loss", _num("loss", 3, trim=True), fold_label="loss", fold_rank=2),
        Column("Grad Norm", _num("grad_norm", 3, trim=True), fold_label="GN", fold_rank=1),
        _TREND,
    ),
    "datagen": (
        Column("Datagen run", _job, numeric=False),
        Column("Chunks", _ratio("chunks_done", "chunks_total", " done"), fold_label="chunks",
               fold_rank=4),
        Column("Trials", lambda r: format_count(r.metric("trials")), fold_label="trials",
               fold_rank=3),
        Column("avg_turns", _num("avg_turns", 1), fold_label="turns", fold_rank=5),
        Column("Mean", _num("mean_reward", 2), fold_label="mean", fold_rank=2),
        Column("exc%", _exc_pct, fold_label="exc", fold_rank=1),
        _TREND,
    ),
    "eval": (
        Column("Eval (model × benchmark)", _job, numeric=False),
        Column("Trials", _ratio("trials", "trials_total"), fold_label="trials", fold_rank=3),
        Column("pass-rate", _num("pass_rate", 2), fold_label="pass", fold_rank=2),
        Column("top exc", _top_exc, fold_label="exc", fold_rank=1),
        Column("Infra / Trend", _infra_trend, numeric=False),
    ),
    "other": (
        Column("Job", _job, numeric=False),
        Column("Type", lambda r: (r.detail.type_label if r.detail else None) or DASH,
               numeric=False, label=True, fold_label="type", fold_rank=2),
        Column("State", lambda r: format_state(r.job.state)),
        _ELAPSED,
        Column("Note", _note, numeric=False),
    ),
    "buffer": (
        Column("Job", _job, numeric=False),
        Column("Bucket", lambda r: BUCKET_TITLES[r.job.bucket]),
        Column("State", lambda r: format_state(r.job.state)),
        _ELAPSED,
        Column("Note", _trend, numeric=False),
    ),
}


def is_buffering(job: JobReport) -> bool:
    """Whether the job belongs in the Filling buffer table (and only there)."""
    return job.verdict == "buffering" or "buffer-filling" in job.flags


LABEL_MAX = 90
"""The Job cell's most characters (its verdict tag aside): a longer name loses its middle, so
a 500-character name is three lines of the table, not twenty; JSON and ``/job`` keep it whole."""


def job_label(job: JobReport, detail: JobDetail | None, *, multi_cluster: bool = False) -> str:
    """The Job cell: the judge's display name (else ``cluster/name``: ``cluster:ID`` is
    what ``/job`` takes) plus a verdict tag."""
    if detail is not None and detail.display_name:
        label = detail.display_name
    else:
        label = f"{job.cluster}/{job.name}" if multi_cluster else job.name
    label = one_line(label)
    if len(label) > LABEL_MAX:  # a hostile or generated name: its start and end say the most
        head = LABEL_MAX * 2 // 3
        label = label[:head] + "…" + label[len(label) - (LABEL_MAX - head - 1):]
    marker = _MARKERS.get(job.verdict)
    return f"{label} [{marker}]" if marker else label


GRID_COLUMNS = (Column("Cell", lambda r: "", numeric=False), Column("Job", lambda r: ""),
                Column("Progress", lambda r: ""), Column("ETA", lambda r: ""))
"""The SFT grid rollup's columns (its cells come from :func:`grid_cells`, not from rows)."""


def grid_cells(grid: GridRollup) -> list[list[str]]:
    """One line per running cell: name, job id, progress % and a rough ETA. A cell's name is
    a job name's stem: a line break in it shows as in the Job cell (:func:`one_line`). Cells
    on more than one cluster show ``cluster:id``, as ``/job`` takes it (ids overlap)."""
    spread = len({cell.cluster for cell in grid.cells}) > 1
    return [
        [one_line(cell.cell),
         one_line(f"{cell.cluster}:{cell.job_id}" if spread and cell.cluster else cell.job_id),
         DASH if cell.progress_pct is None else format_number(cell.progress_pct, 0) + "%",
         DASH if cell.eta_s is None else "~" + format_duration(round(cell.eta_s))]
        for cell in grid.cells
    ] or [[DASH, DASH, DASH, DASH]]


def grid_title(grid: GridRollup) -> str:
    """The running / pending-unique / done tally, the cells that stopped short of their total,
    and the long pole when one is known (names on one line, as in the cells)."""
    title = (f"SFT grid {one_line(grid.grid)}: running {grid.running} / pending-unique "
             f"{grid.pending_unique} / done {grid.done}")
    if grid.short:
        title += f" · stopped short {len(grid.short)}: {', '.join(map(one_line, grid.short))}"
    if grid.long_pole:
        title += f" · long pole: {one_line(grid.long_pole)}"
    return title
