"""Box-drawing status tables, one per bucket, with the seed rulebook's columns (CONTRACT §7).

Policy: pure presentation, models in and text out, no I/O. Every line of every table fits the
requested width: numeric cells never wrap, text cells (Job, Trend, Note) wrap inside the box and
fold over-long words, and when even the narrowest text columns would not fit, optional metric
columns are folded into the Trend text (``H 0.512 LR 0.012``) before rich may squeeze anything,
so the box never breaks. A metric not emitted yet is ``—``; a nonzero value never prints as
``0.000`` (tiny seqnorm-regime values go to compact scientific notation). Jobs still filling
their buffer appear only in the "Filling buffer" table. Cell formatting lives in
:mod:`report.cells`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from io import StringIO
from typing import NamedTuple

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from report.cells import (
    DASH,
    abbreviate_exception,
    format_count,
    format_duration,
    format_number,
    format_state,
    format_step,
    printable,
)
from report.models import GridRollup, JobDetail, JobReport, Report

TEXT_MIN_WIDTH = 12
"""Narrowest any wrapping text column may ever get (very narrow widths)."""
NAME_FLOOR = 24
"""Job names wrap mid-word below this; optional metric columns fold first."""
NAME_ROOM = 28
"""Widest the Job column gets while the prose columns can still keep ``TEXT_FLOOR``."""
TEXT_FLOOR = 18
"""Trend/Note read as prose down to about this width; optional metric columns fold first."""

BUCKET_TITLES: Mapping[str, str] = {
    "rl": "RL", "sft": "SFT", "datagen": "Datagen", "eval": "Eval", "other": "Catch-all",
    "buffer": "Filling buffer",
}

# Verdicts a reader must not miss: shown as a short tag after the job name.
_MARKERS: Mapping[str, str] = {
    "collapse": "COLLAPSE", "warning": "WARN", "failed": "FAILED", "stalled": "STALLED",
    "restarting": "restart", "unknown": "?",
}


@dataclass(frozen=True)
class RenderedTable:
    """One titled box table; ``header_lines``/``row_heights`` let chunkers split between rows."""

    bucket: str
    title: str
    text: str
    header_lines: int = 1
    row_heights: tuple[int, ...] = ()


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
    return DASH


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
        Column("Grad Norm", _num("grad_norm", 3), fold_label="GN", fold_rank=5),
        Column("Entropy", _num("entropy", 3), fold_label="H", fold_rank=4),
        Column("LogRatio", _log_ratio, fold_label="LR", fold_rank=2),
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
               numeric=False),
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


def job_label(job: JobReport, detail: JobDetail | None, *, multi_cluster: bool = False) -> str:
    """The Job cell: the judge's display name (else ``cluster:name``) plus a verdict tag."""
    if detail is not None and detail.display_name:
        label = detail.display_name
    else:
        label = f"{job.cluster}:{job.name}" if multi_cluster else job.name
    marker = _MARKERS.get(job.verdict)
    return f"{label} [{marker}]" if marker else label


def _console(width: int, file: StringIO) -> Console:
    return Console(
        width=width, file=file, color_system=None, force_terminal=False,
        legacy_windows=False, no_color=True, highlight=False, emoji=False, soft_wrap=False,
        markup=False,
    )


def _min_width(columns: Sequence[Column], cells: Sequence[Sequence[str]]) -> int:
    """Narrowest the table can be with these columns without squeezing any number."""
    total = len(columns) + 1  # vertical rules
    for index, column in enumerate(columns):
        natural = max([cell_len(column.header)] + [cell_len(row[index]) for row in cells])
        if column.numeric:
            total += natural + 2
        else:
            total += _text_floor(index, column, natural) + 2
    return total


def _text_floor(index: int, column: Column, natural: int) -> int:
    """The width a text column keeps before optional columns fold (names get more room)."""
    longest_header_word = max(cell_len(word) for word in column.header.split())
    floor = NAME_FLOOR if index == 0 else TEXT_FLOOR
    return min(natural, max(floor, longest_header_word))


def _text_widths(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int,
) -> dict[int, int]:
    """Fixed widths for the text columns when they must wrap, so the Job column keeps room.

    Left alone, rich shrinks the widest wrapping columns first until Job and Trend end up
    equally narrow and names wrap mid-word; its ``min_width`` can push a table past the width.
    Here the job name gets up to ``NAME_ROOM`` columns while the other text columns can keep
    ``TEXT_FLOOR``, and those share what is left in proportion to their natural width.
    """
    text = [i for i, c in enumerate(columns) if not c.numeric]
    natural = {i: _natural(i, c, cells) for i, c in enumerate(columns)}
    fixed = sum(natural[i] + 2 for i in natural if i not in text) + len(columns) + 1
    avail = width - fixed - 2 * len(text)
    if not text or sum(natural[i] for i in text) <= avail or avail < TEXT_MIN_WIDTH * len(text):
        return {}
    out: dict[int, int] = {}
    rest = text
    if text[0] == 0 and len(text) > 1:
        keep_others = sum(min(natural[i], TEXT_FLOOR) for i in text[1:])
        out[0] = min(natural[0], max(TEXT_MIN_WIDTH, min(NAME_ROOM, avail - keep_others)))
        avail -= out[0]
        rest = text[1:]
    total = sum(natural[i] for i in rest)
    for i in rest:
        share = avail * natural[i] // max(total, 1)
        out[i] = min(natural[i], max(min(TEXT_MIN_WIDTH, natural[i]), share))
    spare = avail - sum(out[i] for i in rest)
    # Rounding and floors leave a little over or under: give it to (or take it from) the
    # widest columns, never squeezing one below its floor, so numbers are never truncated.
    for i in sorted(rest, key=lambda i: -out[i]):
        if spare > 0:
            step = min(spare, natural[i] - out[i])
        else:
            step = max(spare, min(0, TEXT_MIN_WIDTH - out[i]))
        out[i] += step
        spare -= step
    return out


def _natural(index: int, column: Column, cells: Sequence[Sequence[str]]) -> int:
    return max([cell_len(column.header)] + [cell_len(row[index]) for row in cells])


def _fold_cells(
    layout: Sequence[Column], rows: Sequence[Row], width: int,
) -> tuple[list[Column], list[list[str]]]:
    """Drop optional columns (lowest rank first) into the last column until the table fits."""
    kept = list(layout)
    folded: list[Column] = []
    optional = sorted((c for c in layout if c.fold_label), key=lambda c: c.fold_rank)
    while True:
        cells = [_row_cells(layout, kept, folded, row) for row in rows]
        if not optional or _min_width(kept, cells) <= width:
            return kept, cells
        column = optional.pop(0)
        kept.remove(column)
        folded.append(column)


def _row_cells(
    layout: Sequence[Column], kept: Sequence[Column], folded: Sequence[Column], row: Row,
) -> list[str]:
    cells = [printable(column.cell(row)) for column in kept]
    if folded:
        parts = []
        # Layout order, so a folded row reads like the full-width header did.
        for column in (c for c in layout if c in folded):
            value = printable(column.cell(row))
            if value == DASH:  # not emitted yet: a folded "—" per row is noise, not news
                continue
            parts.append(value if value.startswith("imp ") else f"{column.fold_label} {value}")
        if parts:
            cells[-1] = " ".join(parts) + "; " + cells[-1]
    return cells


def render_box(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], *, width: int,
    bucket: str = "", title: str = "",
) -> RenderedTable:
    """Render rows of ready-made cell strings as one SQUARE box table at most ``width`` wide."""
    table = Table(box=box.SQUARE, padding=(0, 1), highlight=False)
    widths = _text_widths(columns, cells, width)
    for index, column in enumerate(columns):
        table.add_column(
            Text(column.header, justify="center"),
            no_wrap=column.numeric,
            overflow="ellipsis" if column.numeric else "fold",
            width=widths.get(index),
        )
    for row in cells:
        table.add_row(*(Text(printable(cell)) for cell in row))
    text = _print(table, width)
    # Same widths with a rule between rows: the rules reveal where each wrapped row ends.
    table.show_lines = True
    ruled = _print(table, width).split("\n")
    rules = [i for i, line in enumerate(ruled) if line.startswith("├")]
    heights = tuple(b - a - 1 for a, b in zip(rules, [*rules[1:], len(ruled) - 1], strict=True))
    return RenderedTable(bucket=bucket, title=title, text=text, header_lines=rules[0] - 1,
                         row_heights=heights if cells else ())


def _print(table: Table, width: int) -> str:
    buffer = StringIO()
    _console(width, buffer).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").split("\n"))


def render_bucket(layout_key: str, rows: Sequence[Row], *, width: int) -> RenderedTable:
    """One bucket's table (``rl``, ``sft``, ``datagen``, ``eval``, ``other`` or ``buffer``)."""
    kept, cells = _fold_cells(LAYOUTS[layout_key], rows, width)
    return render_box(kept, cells, width=width, bucket=layout_key,
                      title=BUCKET_TITLES[layout_key])


def render_grid(grid: GridRollup, *, width: int) -> RenderedTable:
    """The SFT grid rollup: progress and ETA per running cell; tally and long pole in the title."""
    columns = (Column("Cell", lambda r: "", numeric=False), Column("Job", lambda r: ""),
               Column("Progress", lambda r: ""), Column("ETA", lambda r: ""))
    cells = [
        [cell.cell, cell.job_id,
         DASH if cell.progress_pct is None else format_number(cell.progress_pct, 0) + "%",
         DASH if cell.eta_s is None else "~" + format_duration(round(cell.eta_s))]
        for cell in grid.cells
    ] or [[DASH, DASH, DASH, DASH]]
    title = (f"SFT grid {grid.grid}: running {grid.running} / pending-unique "
             f"{grid.pending_unique} / done {grid.done}")
    if grid.long_pole:
        title += f" · long pole: {grid.long_pole}"
    return render_box(columns, cells, width=width, bucket="sft", title=title)


def render_tables(
    report: Report, details: Mapping[tuple[str, str], JobDetail], *, width: int = 100,
) -> list[RenderedTable]:
    """Every non-empty bucket's table in the contract's order, then the Filling buffer table."""
    reporting = {job.cluster for job in report.jobs}
    multi_cluster = len(reporting) > 1
    groups: dict[str, list[Row]] = {key: [] for key in LAYOUTS}
    for job in report.jobs:
        detail = details.get((job.cluster, job.job_id))
        row = Row(job, detail, job_label(job, detail, multi_cluster=multi_cluster))
        groups["buffer" if is_buffering(job) else job.bucket].append(row)
    tables: list[RenderedTable] = []
    for key, rows in groups.items():
        if rows:
            tables.append(render_bucket(key, rows, width=width))
        if key == "sft":
            tables.extend(render_grid(grid, width=width) for grid in report.grid)
    return tables
