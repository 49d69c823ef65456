"""A run's signal trap queues its own copy (``sbatch $0`` on ``--signal=B:USR1@N``) near the
walltime; with room free the copy starts at once, beside the job about to TIMEOUT.

Live on the real SLURM 22.05 (jtuser, jobs 2740/2750, 2701/2703, 2721/2724): ``sft-trap5`` with
``#SBATCH --time=1 --signal=B:USR1@45`` and ``trap 'sbatch $0' USR1`` ran 03:45:56-03:47:16 and
timed out; its copy 2750 (same name, script, workdir and ``--output``) was submitted at
03:46:16 by the trap, eligible at submission, started 03:46:18 and was RUNNING at the sweep.
``jobtables sweep`` read 2740 'failed, no successor queued', recommendation diagnose: a live
run's normal restart read as a death (the fallback took a RUNNING job started before the end
as a copy beside it, a seed). The copy the run queued itself, while it ran and within
``TRAP_WINDOW`` of its end, under its exact name in its workdir, continues it; a copy queued
earlier in the run, a sibling cell's job or one in another workdir stays none.

Records shaped as ``squeue --json -t all`` printed them (``eligible_time`` = submit time for a
job queued with no dependency, ``time_limit`` in minutes).
"""

from __future__ import annotations

from probes.models import JobFacts
from report.models import JobReport
from tests.report.test_chain_multi_dependency import A_END, T0, _job, _rows

RUN = _job(2740, "sft-trap5", "TIMEOUT", start_time=T0 + 1, end_time=A_END)


def _failed(row: JobReport) -> None:
    assert row.successor is None and "chain-restart" not in row.flags, (row.job_id, row.trend)
    assert row.verdict == "failed", (row.job_id, row.verdict, row.trend)


def _continued(row: JobReport, successor: str) -> None:
    assert row.successor == successor and "chain-restart" in row.flags, (row.job_id, row.trend)
    assert row.verdict == "restarting", (row.job_id, row.verdict, row.trend)


def _copy(job_id: int, name: str, queued: int, **fields: object) -> JobFacts:
    """Queued with no dependency ``queued`` s after T0 and running since 2 s later."""
    return _job(job_id, name, "RUNNING", submit_time=T0 + queued, eligible_time=T0 + queued,
                start_time=T0 + queued + 2, end_time=T0 + queued + 62, **fields)


def test_the_copy_its_signal_trap_queued_continues_it() -> None:
    """As 2740/2750: queued 20 s into the run, 60 s before its end, running beside it."""
    _continued(_rows(RUN, _copy(2750, "sft-trap5", 21))["2740"], "2750")


def test_a_trap_copy_still_pending_for_room_continues_it() -> None:
    copy = _job(2750, "sft-trap5", "PENDING", submit_time=T0 + 21, eligible_time=T0 + 21,
                state_reason="Resources")
    _continued(_rows(RUN, copy)["2740"], "2750")


def test_a_copy_queued_long_before_the_end_is_a_seed_beside_it() -> None:
    """A 10 h run; a second copy of its name queued 2 h in runs beside it: no restart."""
    run = _job(2740, "sft-trap5", "TIMEOUT", start_time=T0 + 1, end_time=T0 + 36000,
               time_limit=600)
    _failed(_rows(run, _copy(2750, "sft-trap5", 7200, time_limit=600))["2740"])


def test_a_sibling_cell_queued_near_the_end_is_no_copy() -> None:
    run = _job(2740, "exp-1", "TIMEOUT", start_time=T0 + 1, end_time=A_END)
    _failed(_rows(run, _copy(2750, "exp-2", 21))["2740"])


def test_a_copy_in_another_workdir_is_no_trap_copy() -> None:
    other = _copy(2750, "sft-trap5", 21, current_working_directory="/tmp/elsewhere",
                  standard_output="/tmp/elsewhere/slurm-%j.out")
    _failed(_rows(RUN, other)["2740"])
