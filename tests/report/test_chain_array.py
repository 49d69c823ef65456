"""A TIMEOUT array task's successor waits on the whole array: SLURM prints ``1819_*``.

On the real SLURM 22.05 (jtuser): ``sbatch --array=0-1 --time=1`` as 1819, its restart queued
``--dependency=afterany:1819`` printed ``afterany:1819_*(unfulfilled)`` while its tasks
1819_0/1819_1 ran and TIMEOUT; an ``afterok:1821`` dependant of another such array printed
``afterok:1821_*(failed)`` with reason ``DependencyNeverSatisfied``. A task's id never equals
``1819_*``, so the explicit dependency was missed: the restart was found only when its name
and workdir matched (a renamed one elsewhere left the TIMEOUT 'no successor queued'), and the
never-satisfied dependant was not named as the reason.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobState, SchedulerRecord
from report.chain import chain_link, dependency_edges
from tests.report.factories import NOW, record

END = NOW - timedelta(minutes=5)


def _task(array: str, task: str) -> SchedulerRecord:
    return record("rl-grid", f"{array}_{task}", JobState.TIMEOUT, array_job_id=array,
                  array_task_id=task, end_time=END)


def test_a_renamed_restart_elsewhere_waiting_on_the_array_is_the_successor() -> None:
    task = _task("1819", "0")
    restart = record("resume-grid-from-ckpt", "1820_[0-1]", JobState.PENDING,
                     workdir="/other", reason="Dependency",
                     dependency="afterany:1819_*(unfulfilled)", depends_on=("1819_*",))
    assert chain_link(task, [task, restart], {}).successor == "1820_[0-1]"


def test_an_afterok_dependant_of_the_array_is_named_as_no_restart() -> None:
    task = _task("1821", "1")
    waiting = record("rl-grid", "1822_[0-1]", JobState.PENDING,
                     reason="DependencyNeverSatisfied", dependency="afterok:1821_*(failed)",
                     depends_on=("1821_*",))
    link = chain_link(task, [task, waiting], {})
    assert link.successor is None
    assert link.blocked is not None and "1822_[0-1]" in link.blocked


def _started(task: str) -> SchedulerRecord:
    return record("resume-grid-from-ckpt", f"1820_{task}", JobState.RUNNING, workdir="/other",
                  array_job_id="1820", array_task_id=task)


def test_a_remembered_array_edge_names_the_started_restarts_own_task() -> None:
    """The bot saw the restart wait on ``1819_*`` (its pending record ``1820`` in squeue
    --json, ``1820_[0-1]`` in squeue -o); started, it is split into tasks and its Dependency
    cleared: task 1's successor is the restart's task 1."""
    task = _task("1819", "1")
    for pending in ("1820", "1820_[0-1]"):
        waiting = record("resume-grid-from-ckpt", pending, JobState.PENDING, workdir="/other",
                         dependency="afterany:1819_*(unfulfilled)", depends_on=("1819_*",))
        edges = dependency_edges([waiting])
        link = chain_link(task, [task, _started("0"), _started("1")], edges)
        assert link.successor == "1820_1"


def test_the_fallback_prefers_the_restarts_own_task() -> None:
    """Same name and workdir, Dependency cleared: task 1 -> 1820_1, not 1820_0."""
    task = _task("1819", "1")
    started = [record("rl-grid", f"1820_{t}", JobState.RUNNING, array_job_id="1820",
                      array_task_id=t, submit_time=END - timedelta(minutes=30), start_time=END)
               for t in ("0", "1")]
    assert chain_link(task, [task, *started], {}).successor == "1820_1"


def test_a_dependency_on_another_task_is_not_this_tasks() -> None:
    """``afterany:1819_0`` waits on task 0 only: no successor of task 1."""
    task = _task("1819", "1")
    other = record("resume-grid-from-ckpt", "1830", JobState.PENDING, workdir="/other",
                   dependency="afterany:1819_0(unfulfilled)", depends_on=("1819_0",))
    assert chain_link(task, [task, other], {}).successor is None



def test_a_throttled_arrays_next_task_is_the_restart_of_the_last() -> None:
    """``--array=0-9%1`` runs its tasks one after another, one name and workdir, each
    resuming the last (a restart chain by array; squeue --json ``array_max_tasks`` 1): task 1,
    running or already ended once task 0 TIMEOUT (started after it), is its restart. A
    sibling that ran beside it is none."""
    task = _task("1900", "0").model_copy(update={"labels": {"array_throttle": "1"}})
    for state in (JobState.RUNNING, JobState.TIMEOUT):
        sibling = record("rl-grid", "1900_1", state, array_job_id="1900", array_task_id="1",
                         submit_time=END - timedelta(hours=1), start_time=END,
                         end_time=None if state is JobState.RUNNING else NOW,
                         labels={"array_throttle": "1"})
        assert chain_link(task, [task, sibling], {}).successor == "1900_1"
    beside = record("rl-grid", "1900_1", JobState.TIMEOUT, array_job_id="1900",
                    array_task_id="1", submit_time=END - timedelta(hours=1),
                    start_time=END - timedelta(minutes=30), end_time=END,
                    labels={"array_throttle": "1"})
    assert chain_link(task, [task, beside], {}).successor is None


@pytest.mark.parametrize("throttle", ["10", "2", "0", None])
def test_an_array_run_in_waves_has_no_restart_among_its_own_tasks(throttle: str | None) -> None:
    """``--array=0-99%10`` (or a plain array the cluster runs a few at a time): each task is a
    cell of its own, and task 10 starts the moment task 0 ends, by the throttle, not to resume
    it. A walltime TIMEOUT of task 0 read 'normal chain restart -> 1900_10' (the name and
    workdir fallback, and the pending remainder ``1900`` too): it is a failure, no successor.
    Only a throttle of 1 (tasks one after another) reads as a chain by array; a task of
    another array that waits on it is its restart whatever the throttle."""
    labels = {"array_throttle": throttle} if throttle is not None else {}
    task = _task("1900", "0").model_copy(update={"labels": labels})
    wave = record("rl-grid", "1900_10", JobState.RUNNING, array_job_id="1900",
                  array_task_id="10", submit_time=END - timedelta(hours=1), start_time=END,
                  labels=labels)
    rest = record("rl-grid", "1900", JobState.PENDING, submit_time=END - timedelta(hours=1),
                  reason="JobArrayTaskLimit",
                  labels={"array_tasks": f"11-99%{throttle or 0}", **labels})
    plain_rest = rest.model_copy(update={"job_id": "1900_[11-99%10]", "labels": {}})
    for later in (wave, rest, plain_rest):
        assert chain_link(task, [task, later], {}).successor is None
    resume = record("rl-grid", "1950_0", JobState.PENDING, array_job_id="1950",
                    array_task_id="0", dependency="afterany:1900_*(unfulfilled)",
                    depends_on=("1900_*",), submit_time=END - timedelta(hours=1))
    assert chain_link(task, [task, wave, resume], {}).successor == "1950_0"
