"""Box-drawing status tables, one per bucket, with the seed rulebook's columns (CONTRACT §7).

Policy: pure presentation, models in and text out, no I/O. Jobs still filling their buffer
appear only in the "Filling buffer" table; runs of one bucket from several clusters share one
table; the SFT grid rollup follows the SFT table. What each table shows lives in
:mod:`report.layouts`, how it is drawn at the configured width in :mod:`report.boxes`, and cell
formatting in :mod:`report.cells`; this module puts a report's rows into those tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from report.boxes import RenderedTable, fold_cells, render_box
from report.layouts import (
    BUCKET_TITLES,
    GRID_COLUMNS,
    LAYOUTS,
    Column,
    Row,
    grid_cells,
    grid_title,
    is_buffering,
    job_label,
)
from report.models import GridRollup, JobDetail, Report

__all__ = [
    "BUCKET_TITLES", "Column", "RenderedTable", "Row", "is_buffering", "job_label",
    "render_box", "render_bucket", "render_grid", "render_tables",
]


def render_bucket(layout_key: str, rows: Sequence[Row], *, width: int) -> RenderedTable:
    """One bucket's table (``rl``, ``sft``, ``datagen``, ``eval``, ``other`` or ``buffer``)."""
    kept, cells = fold_cells(LAYOUTS[layout_key], rows, width)
    return render_box(kept, cells, width=width, bucket=layout_key,
                      title=BUCKET_TITLES[layout_key])


def render_grid(grid: GridRollup, *, width: int) -> RenderedTable:
    """The SFT grid rollup: progress and ETA per running cell; tally and long pole in the title."""
    return render_box(GRID_COLUMNS, grid_cells(grid), width=width, bucket="sft",
                      title=grid_title(grid))


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
