"""The Filling-buffer row of a grid's pending jobs counts its distinct cells too.

Replayed on the real SLURM: the mixed-scale grid sft-mix-* (three cells running, each with a
resume copy pending; one 7b cell pending behind --begin with two chain copies) read
``SFT grid sft-mix: running 3 / pending-unique 1`` above, and below, in Filling buffer,
``sft-mix [6 pending]``: the raw count the seed says to dedupe ("restart-chain resume copies
inflate it several-fold"). The row now reads ``sft-mix [6 pending (1 cell)]``: pending jobs
strip to their cell name (``report.grid_cells``), running cells' own resume backups left out.
"""

from __future__ import annotations

import json

from probes.models import JobState
from report.grouping import group_report, groups_json
from report.models import GridCell, GridRollup, Report
from report.render import render_text
from tests.report.factories import report_job, report_of


def _report(pending_names: list[str]) -> Report:
    running = [report_job(n, "sft", job_id=str(270 + i), step=5, total_steps=300)
               for i, n in enumerate(["sft-mix-lr1e5-0.5b", "sft-mix-lr3e5-0.5b",
                                      "sft-mix-lr1e5-7b"])]
    pending = [report_job(n, "sft", job_id=str(300 + i), state=JobState.PENDING,
                          verdict="buffering", flags=["buffer-filling"])
               for i, n in enumerate(pending_names)]
    grid = GridRollup(grid="sft-mix", running=3, pending_unique=1, done=0, long_pole=None,
                      cells=[GridCell(cell=j.name, job_id=j.job_id, progress_pct=1.7,
                                      eta_s=None) for j in running])
    return report_of(*running, *pending, grid=[grid])


COPIES = ["sft-mix-lr1e5-0.5b-resume", "sft-mix-lr3e5-0.5b-r2", "sft-mix-lr1e5-7b-resume",
          "sft-mix-lr3e5-7b", "sft-mix-lr3e5-7b-resume", "sft-mix-lr3e5-7b-resume"]


def test_resume_copies_do_not_count_as_pending_cells() -> None:
    report = _report(COPIES)
    grouped, details = group_report(report, {})
    text = render_text(grouped, details, width=160)
    assert "sft-mix [6 pending (1 cell)]" in text
    [group] = [g for g in groups_json(report) if g["kind"] == "grid"]
    assert group["label"] == "sft-mix [6 pending (1 cell)]"
    assert group["counts"] == {"PENDING": 6} and group["pending_cells"] == 1


def test_distinct_pending_cells_keep_the_plain_count() -> None:
    """Every pending job its own cell: nothing to add."""
    report = _report(["sft-mix-lr1e4-7b", "sft-mix-lr2e4-7b", "sft-mix-lr3e4-7b"])
    [group] = [g for g in groups_json(report) if g["kind"] == "grid"]
    assert group["label"] == "sft-mix [3 pending]" and group["pending_cells"] == 3
    assert json.dumps(group)
