"""An SFT grid submitted as one job array: each task is a cell, unless the array runs one task
at a time (``%1``: a restart chain by array, each task resuming the last).

Replayed on the real SLURM 22.05 as jtuser: ``sbatch --array=0-3%2 -t 1`` (one name, a cell per
``SLURM_ARRAY_TASK_ID``): with tasks 2 and 3 running the sweep's rollup said one running cell
(``running 2`` counted it with another run's), and with ``--array=0-5%2`` the pending remainder
``4-5%2`` (two cells not started) was taken for the running cell's resume backup: pending-unique
0. The rulebook: count distinct cells; a pending copy is a backup only of its own cell.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import GridRollup
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, points, record


def _task(array: str, task: str | None, state: JobState = JobState.RUNNING, *,
          throttle: str = "2", spec: str | None = None, after: str | None = None,
          name: str = "sft-arr-grid") -> JobFacts:
    labels = {"array_throttle": throttle, **({"array_tasks": spec} if spec else {})}
    ids = ({"array_job_id": array, "array_task_id": task} if task is not None else {})
    extra = {"dependency": f"afterany:{after}(unfulfilled)", "depends_on": (after,)} \
        if after else {}
    job_id = f"{array}_{task}" if task is not None else array
    return facts(record(name, job_id, state, labels=labels, **ids, **extra),
                 points({"loss": [1.0] * 20}),
                 summary_kw={"total_steps": 1000, "sec_per_step": 2.0})


def _grid(*jobs: JobFacts) -> GridRollup | None:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    return report.grid[0] if report.grid else None


def test_a_wave_arrays_tasks_are_cells_and_its_remainder_is_pending_cells() -> None:
    grid = _grid(_task("1900", "0"), _task("1900", "1"),
                 _task("1900", None, JobState.PENDING, spec="2-5%2"))
    assert grid is not None
    assert (grid.running, grid.pending_unique, grid.done) == (2, 4, 0)
    assert len(grid.cells) == 2


def test_a_restart_array_waiting_on_the_wave_is_its_cells_backup() -> None:
    """A restart array of the same name waiting ``afterany`` on the whole array: task i
    resumes cell i, a backup of a running cell, not a pending one."""
    grid = _grid(_task("1900", "0"), _task("1900", "1"),
                 _task("1950", None, JobState.PENDING, spec="0-1", after="1900_*"))
    assert grid is not None
    assert (grid.running, grid.pending_unique) == (2, 0)


def test_a_one_at_a_time_array_is_one_cell_and_its_rest_its_backups() -> None:
    """``--array=0-9%1``: the running task is the cell, the pending rest its chain."""
    grid = _grid(_task("1537", "1", throttle="1"),
                 _task("1537", None, JobState.PENDING, throttle="1", spec="2-9%1"),
                 _task("2000", "0", name="sft-arr-other", throttle="1"))
    assert grid is not None
    assert (grid.running, grid.pending_unique) == (2, 0)
