"""SFT grid cells whose own token looks like a restart suffix (``-r16``, ``-seed-2``).

Replayed on the real SLURM: a LoRA-rank grid ``sft-qwen7b-lora-r8`` / ``-r16`` running (LLaMA-
Factory consoles at 108/900 and 308/900) and ``-r64`` pending got no grid rollup at all: the
restart-suffix strip read ``-r8``, ``-r16`` and ``-r64`` as resume copies of one cell
``sft-qwen7b-lora``, so the grid had one cell (no tally, no long pole, the pending rank not
counted). A suffix a restart-chain copy and a cell's own token can share (``-rN``, ``-N``,
``.N``, ``-partN``) is a restart only when the name without it is another job of the grid, or
the job waits on (a SLURM dependency) a job of the grid; a restart word (``-resume``,
``_restart2``) always is.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import GridRollup
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, points, record


def _cell(name: str, job_id: str, state: JobState = JobState.RUNNING, *, step: int = 10,
          total: int = 1000, rate: float | None = 10.0, after: str | None = None) -> JobFacts:
    extra = ({"dependency": f"afterany:{after}(unfulfilled)", "depends_on": (after,)}
             if after else {})
    return facts(record(name, job_id, state, **extra), points({"loss": [1.0] * step}),
                 summary_kw={"total_steps": total, "sec_per_step": rate})


def _grids(*jobs: JobFacts) -> dict[str, GridRollup]:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    return {g.grid: g for g in report.grid}


def test_lora_rank_cells_are_cells_not_resume_copies() -> None:
    """The replayed LoRA-rank grid: three ranks are three cells."""
    grids = _grids(_cell("sft-qwen7b-lora-r8", "279", step=108, total=900, rate=3.0),
                   _cell("sft-qwen7b-lora-r16", "280", step=308, total=900, rate=3.0),
                   _cell("sft-qwen7b-lora-r64", "281", JobState.PENDING))
    [grid] = grids.values()
    assert (grid.running, grid.pending_unique, grid.done) == (2, 1, 0)
    assert [c.cell for c in grid.cells] == ["sft-qwen7b-lora-r16", "sft-qwen7b-lora-r8"]
    assert grid.long_pole == "sft-qwen7b-lora-r8"


def test_numbered_cells_without_a_model_token_are_a_grid() -> None:
    """``sft-grid-seed-1`` / ``-seed-2``: seeds, not attempts; their resume copies still fold."""
    grids = _grids(_cell("sft-grid-seed-1", "1"), _cell("sft-grid-seed-2", "2"),
                   _cell("sft-grid-seed-1-resume", "3", JobState.PENDING),
                   _cell("sft-grid-seed-3", "4", JobState.PENDING))
    assert list(grids) == ["sft-grid"]
    grid = grids["sft-grid"]
    assert (grid.running, grid.pending_unique) == (2, 1)


def test_a_chain_copy_waiting_on_a_cell_is_its_backup() -> None:
    """The chain's first job has left the report (``-r2`` runs, ``-r3`` waits on it): the
    dependency says ``-r3`` is ``-r2``'s resume backup, not a pending cell."""
    grids = _grids(_cell("sft-x-lr1-r2", "20"), _cell("sft-x-lr2", "21"),
                   _cell("sft-x-lr1-r3", "22", JobState.PENDING, after="20"),
                   _cell("sft-x-lr1-r4", "23", JobState.PENDING, after="22"))
    [grid] = grids.values()
    assert (grid.running, grid.pending_unique) == (2, 0)


def test_restart_copies_of_an_existing_cell_still_fold() -> None:
    """``-r2`` / ``.2`` beside the cell they copy stay copies (no dependency needed)."""
    grids = _grids(_cell("sft-q-8b-lr1e5", "1"), _cell("sft-q-8b-lr1e5-r2", "2", JobState.PENDING),
                   _cell("sft-q-8b-lr3e5", "3"), _cell("sft-q-8b-lr3e5.2", "4", JobState.PENDING))
    [grid] = grids.values()
    assert (grid.running, grid.pending_unique) == (2, 0)


def test_rank_cells_without_a_model_token_are_a_grid() -> None:
    """``sft-lora-r8`` / ``-r16``: the family is ``sft-lora`` (the rank is the cell's token)."""
    grids = _grids(_cell("sft-lora-r8", "1"), _cell("sft-lora-r16", "2"),
                   _cell("sft-lora-r32", "3", JobState.PENDING))
    assert list(grids) == ["sft-lora"]
    assert (grids["sft-lora"].running, grids["sft-lora"].pending_unique) == (2, 1)


def test_a_cell_run_after_another_is_no_copy_of_it() -> None:
    """A grid run one cell at a time (``sft-g-lr3`` afterok ``sft-g-lr2``) keeps its cells."""
    grids = _grids(_cell("sft-g-lr1", "1"), _cell("sft-g-lr2", "2"),
                   _cell("sft-g-lr3", "3", JobState.PENDING, after="2"))
    [grid] = grids.values()
    assert (grid.running, grid.pending_unique) == (2, 1)


def test_a_rank_grid_throttled_with_dependencies_keeps_its_cells() -> None:
    """A LoRA-rank grid run two at a time (``-r32`` afterany ``-r16``, ``-r64`` afterany
    ``-r8``) keeps its pending ranks as cells: a dependency makes a copy only of the next
    attempt (``-r16-resume`` after ``-r16``, ``-r3`` after ``-r2``), not of the next rank."""
    grids = _grids(_cell("sft-lora-r8", "1"), _cell("sft-lora-r16", "2"),
                   _cell("sft-lora-r32", "3", JobState.PENDING, after="2"),
                   _cell("sft-lora-r64", "4", JobState.PENDING, after="1"),
                   _cell("sft-lora-r16-resume", "5", JobState.PENDING, after="2"))
    assert list(grids) == ["sft-lora"]
    grid = grids["sft-lora"]
    assert (grid.running, grid.pending_unique) == (2, 2)
