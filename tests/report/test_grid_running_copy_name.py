"""A grid's running cell is named by its cell, not by the restart copy that runs it.

Replayed on the real SLURM: a grid ``sft-g9-*`` whose cell ``sft-g9-1b-lr3e5`` hit its walltime
(TIMEOUT) and went on in its afterany successor ``sft-g9-1b-lr3e5-resume``. The tally was
right (running 3 / pending-unique 1 / done 1) but the rollup's row, JSON ``cells[].cell`` and
so a long pole named ``sft-g9-1b-lr3e5-resume``: a job, where the seed asks for the cell name
("strip to the cell name"). The cell keeps its name's case as submitted.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import GridRollup
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, points, record


def _cell(name: str, job_id: str, state: JobState = JobState.RUNNING, *, step: int = 10,
          total: int = 1000, rate: float = 10.0) -> JobFacts:
    return facts(record(name, job_id, state), points({"loss": [1.0] * step}),
                 summary_kw={"total_steps": total, "sec_per_step": rate})


def _grid(*jobs: JobFacts) -> GridRollup:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    [grid] = report.grid
    return grid


def test_a_running_resume_copy_is_shown_as_its_cell() -> None:
    grid = _grid(
        _cell("sft-g9-1b-lr1e5", "1", step=400, rate=1.0),
        _cell("sft-g9-1B-lr3e5", "2", JobState.TIMEOUT, step=120),
        _cell("sft-g9-1B-lr3e5-resume", "3", step=230, total=458, rate=30.0),
        _cell("sft-g9-70b-lr1e5", "4", JobState.PENDING),
    )
    cells = {c.job_id: c.cell for c in grid.cells}
    assert cells == {"1": "sft-g9-1b-lr1e5", "3": "sft-g9-1B-lr3e5"}
    assert grid.long_pole == "sft-g9-70b-lr1e5 (pending)"  # larger than every running cell
    assert (grid.running, grid.pending_unique) == (2, 1)


def test_the_long_pole_names_the_cell() -> None:
    grid = _grid(
        _cell("sft-g9-8b-lr1e5", "1", step=400, rate=1.0),
        _cell("sft-g9-8b-lr3e5-r2", "3", step=100, rate=30.0),
        _cell("sft-g9-8b-lr3e5", "2", JobState.TIMEOUT, step=99),
    )
    assert grid.long_pole == "sft-g9-8b-lr3e5"


def test_a_cell_with_no_copy_keeps_its_own_name() -> None:
    """Near miss: LoRA ranks ``-r8``/``-r16`` are cells, not copies: each row is the job's name."""
    grid = _grid(_cell("sft-lora-r8", "1"), _cell("sft-lora-r16", "2", rate=20.0))
    assert sorted(c.cell for c in grid.cells) == ["sft-lora-r16", "sft-lora-r8"]
    assert grid.long_pole == "sft-lora-r16"
