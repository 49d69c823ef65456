"""A grid's numbered cells (or seeds) share a name stem but do not continue each other.

``exp-1`` and ``exp-2`` strip to one stem (``report.chain_records.name_stem``), so a TIMEOUT of
``exp-1`` beside a live ``exp-2`` of its workdir read 'normal chain restart → exp-2': a death
hidden as a restart. A job of another name (not this run's own name with a restart marker)
continues the TIMEOUT only with evidence that SLURM held it for that end (made eligible at it
after waiting) or that it was queued after it ended; one queued before the end that never
waited (eligible at its submission: pending for room only) ran or waits beside it.

Records shaped as ``squeue --json -t all`` printed them on the real SLURM 22.05 (jobs 389-407,
``tests/probes/slurm/test_e2e_chain_siblings.py`` runs the same live): a job pending for room
(``Resources``/``Priority``) has ``eligible_time`` equal to its ``submit_time``; a dependant
pending on ``Dependency`` has ``eligible_time`` 0, and once released, its predecessor's end
plus a second; a ``--begin=now+75`` job pends with reason ``BeginTime`` and ``eligible_time``
set to that begin time from its submission on; ``-d afterany:X:N_*`` reads
``afterany:X(unfulfilled),afterany:N_*(unfulfilled)``, then ``afterany:N_*(unfulfilled)`` once
X ended (``afterany:N_1`` likewise for one task).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from probes.models import JobFacts
from report.models import JobReport
from tests.report.test_chain_multi_dependency import A_END, T0, W, _job, _rows

W2 = "/home/jobtables/jt-tests/chains-exp/s2"


def _failed(row: JobReport) -> None:
    assert row.successor is None and "chain-restart" not in row.flags, (row.job_id, row.trend)
    assert row.verdict == "failed", (row.job_id, row.verdict, row.trend)


def _continued(row: JobReport, successor: str) -> None:
    assert row.successor == successor and "chain-restart" in row.flags, (row.job_id, row.trend)
    assert row.verdict == "restarting", row.trend


def _room(job_id: int, name: str, **fields: Any) -> JobFacts:
    """Pending for room, as squeue prints it: eligible at its submission, no dependency."""
    job = _job(job_id, name, "PENDING", **fields)
    return JobFacts(record=job.record.model_copy(update={
        "reason": "Resources", "eligible_time": job.record.submit_time}))


CELL_1 = _job(391, "rl-exp-1", "TIMEOUT")


# Gap 1: numbered siblings


def test_a_sibling_cell_pending_for_room_is_no_successor() -> None:
    _failed(_rows(CELL_1, _room(392, "rl-exp-2"))["391"])


def test_a_sibling_cell_that_took_the_freed_room_is_no_successor() -> None:
    """Queued with the TIMEOUT, it waited for room only, and started at its end."""
    sibling = _job(392, "rl-exp-2", "RUNNING", start_time=A_END + 1, end_time=A_END + 61)
    _failed(_rows(CELL_1, sibling)["391"])


def test_a_sibling_s_own_restart_waiting_on_it_is_no_successor() -> None:
    """``rl-exp-2-r2`` waits on ``rl-exp-2``: that run's restart, not ``rl-exp-1``'s."""
    other = _job(393, "rl-exp-2", "RUNNING", end_time=A_END + 600)
    own = _job(394, "rl-exp-2-r2", "PENDING", submit_time=T0 + 30,
               dependency="afterany:393(unfulfilled)")
    _failed(_rows(CELL_1, other, own)["391"])


def test_cells_timing_out_together_keep_their_own_restarts() -> None:
    """Two cells hit one walltime; only ``rl-exp-2`` had a restart queued, released by both
    ends at once. ``rl-exp-1``'s chain stopped: it is no restart of that cell."""
    other = _job(393, "rl-exp-2", "TIMEOUT")
    resume = _job(394, "rl-exp-2", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
                  end_time=A_END + 61)
    rows = _rows(CELL_1, other, resume)
    _failed(rows["391"])
    _continued(rows["393"], "394")


def test_the_cell_s_own_name_wins_over_a_sibling_released_with_it() -> None:
    """Both cells had a restart; the sibling's was queued first. Each continues its own."""
    other = _job(393, "rl-exp-2", "TIMEOUT")
    theirs = _job(394, "rl-exp-2", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
                  end_time=A_END + 61)
    mine = _job(395, "rl-exp-1", "RUNNING", submit_time=T0 + 1, eligible_time=A_END + 1,
                start_time=A_END + 1, end_time=A_END + 61)
    rows = _rows(CELL_1, other, theirs, mine)
    _continued(rows["391"], "395")
    _continued(rows["393"], "394")


# Gap 1: real restarts keep their link


def test_a_numbered_resume_released_by_the_end_continues_it() -> None:
    """``train-1`` -> ``train-2`` queued ``afterany``: SLURM cleared the dependency once met;
    eligible at the end is the evidence."""
    resume = _job(392, "rl-exp-2", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
                  end_time=A_END + 61)
    _continued(_rows(CELL_1, resume)["391"], "392")


def test_a_numbered_resume_queued_after_the_end_continues_it() -> None:
    """Queued by the job's epilogue (or by hand) once it ended, no dependency needed."""
    resume = _room(392, "rl-exp-2", submit_time=A_END + 20)
    _continued(_rows(CELL_1, resume)["391"], "392")


def test_a_same_name_copy_pending_for_room_still_continues_it() -> None:
    """The run's own name, queued while it ran (a trap's ``sbatch $0``): as before."""
    _continued(_rows(CELL_1, _room(392, "rl-exp-1", submit_time=T0 + 40))["391"], "392")


def test_a_resume_marked_name_released_by_the_end_continues_it() -> None:
    resume = _job(392, "rl-exp-1-r2", "RUNNING", eligible_time=A_END + 1,
                  start_time=A_END + 1, end_time=A_END + 61)
    _continued(_rows(CELL_1, resume)["391"], "392")


# Gap 2: --begin


def _begun(job_id: int, name: str, at: int, **fields: Any) -> JobFacts:
    """Pending ``--begin``: reason ``BeginTime``, eligible at the begin time already."""
    job = _job(job_id, name, "PENDING", **fields)
    return JobFacts(record=job.record.model_copy(update={"reason": "BeginTime",
                                                         "eligible_time": _at(at)}))


def _at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def test_the_run_s_own_copy_queued_with_begin_continues_it() -> None:
    """SLURM runs a ``--begin`` job at that time whatever the TIMEOUT did, as ``afterany``
    would: the run's own next attempt, queued while it ran, is its restart."""
    _continued(_rows(CELL_1, _begun(392, "rl-exp-1", A_END + 600, submit_time=T0 + 40))["391"],
               "392")


def test_a_begin_time_near_the_end_is_no_release_of_a_sibling() -> None:
    """A sibling cell's ``--begin`` that happens to fall at the end: no dependency, no
    release by it."""
    _failed(_rows(CELL_1, _begun(392, "rl-exp-2", A_END + 30))["391"])


def test_a_begin_time_near_the_end_is_no_release_of_another_run_here() -> None:
    """Rule 3's release by SLURM's times (another name, same workdir) reads a dependency,
    never a clock time."""
    _failed(_rows(CELL_1, _begun(392, "rl-eval-sweep", A_END + 30))["391"])


def test_a_begin_time_near_the_end_elsewhere_is_no_release() -> None:
    _failed(_rows(CELL_1, _begun(392, "rl-exp-1", A_END + 30, workdir=W2))["391"])


# Gap 3: array dependencies beside others


def _task(job_id: int, array: int, task: int, state: str = "RUNNING") -> JobFacts:
    return _job(job_id, "rl-prep-shards", state, array_job_id=array, array_task_id=task,
                end_time=A_END + 600)


TASKS = (_task(399, 395, 0), _task(400, 395, 1), _task(401, 395, 2))


def test_a_job_still_waiting_on_the_whole_array_continues_the_timeout() -> None:
    """``-d afterany:396:395_*`` once 396 ended: ``afterany:395_*(unfulfilled)``."""
    x = _job(396, "rl-trainer", "TIMEOUT")
    w = _job(397, "rl-resume", "PENDING", dependency="afterany:395_*(unfulfilled)")
    _continued(_rows(x, w, *TASKS)["396"], "397")


def test_a_job_still_waiting_on_one_task_continues_the_timeout() -> None:
    x = _job(396, "rl-trainer", "TIMEOUT")
    w = _job(398, "rl-resume", "PENDING", dependency="afterany:395_1(unfulfilled)")
    _continued(_rows(x, w, *TASKS)["396"], "398")


def test_an_array_out_of_view_tells_nothing() -> None:
    """Whose the dropped element was is unknown when the array it waits on is not seen."""
    x = _job(396, "rl-trainer", "TIMEOUT")
    w = _job(397, "rl-resume", "PENDING", dependency="afterany:395_*(unfulfilled)")
    _failed(_rows(x, w)["396"])


def test_a_numbered_resume_released_with_another_run_s_end_is_its_own_run_s() -> None:
    """Jobs 403-407 on the real cluster: ``grid-1`` timed out at 085, ``train-1`` at 115,
    ``train-2`` (queued ``afterany`` on ``train-1``) eligible at 117, within SLURM's release
    slack of both ends. ``train-1`` continues; ``grid-1``, whose cell had no restart, does not:
    a numbered name's own base (``train-``) holding it names its run."""
    grid = _job(403, "rl-grid-1", "TIMEOUT", submit_time=T0 - 2, end_time=A_END)
    train = _job(406, "rl-train-1", "TIMEOUT", end_time=A_END + 30)
    resume = _job(407, "rl-train-2", "COMPLETED", submit_time=T0 + 1, eligible_time=A_END + 32,
                  start_time=A_END + 32, end_time=A_END + 47)
    rows = _rows(grid, train, resume)
    _failed(rows["403"])
    assert rows["406"].successor == "407" and "chain-restart" in rows["406"].flags


def test_a_job_waiting_on_a_task_not_split_off_yet_continues_the_timeout() -> None:
    """``afterany:395_1`` while array 395 still pends whole: squeue prints one record, job
    395 with ``array_task_string`` ``0-2`` (as it printed array 404's ``0-499``)."""
    x = _job(396, "rl-trainer", "TIMEOUT")
    w = _job(398, "rl-resume", "PENDING", dependency="afterany:395_1(unfulfilled)")
    whole = _job(395, "rl-prep-shards", "PENDING", array_job_id=395, array_task_string="0-2")
    whole = JobFacts(record=whole.record.model_copy(update={"reason": "Priority"}))
    _continued(_rows(x, w, whole)["396"], "398")


def test_a_same_name_copy_queued_with_it_is_no_successor() -> None:
    """Two seeds under one name, queued in the same second: the second waited for room only
    and took it at the first one's end. Queued before the TIMEOUT even started, and never
    held for it, it is a copy beside it, not a job the run queued to continue itself."""
    seed = _room(392, "rl-exp-1")
    _failed(_rows(CELL_1, seed)["391"])
    started = _job(392, "rl-exp-1", "RUNNING", start_time=A_END + 1, end_time=A_END + 61)
    _failed(_rows(CELL_1, started)["391"])


def test_a_sibling_released_when_another_job_also_ended_is_no_successor() -> None:
    """``rl-exp-2`` queued ``afterany`` on a prep job that ended with ``rl-exp-1``: its
    eligibility at that moment is explained by either end, and its name is another cell's."""
    prep = _job(393, "prep-shards", "COMPLETED", end_time=A_END)
    sibling = _job(394, "rl-exp-2", "RUNNING", eligible_time=A_END + 1, start_time=A_END + 1,
                   end_time=A_END + 61)
    _failed(_rows(CELL_1, prep, sibling)["391"])


def test_a_count_appended_to_a_numbered_cell_is_its_resume() -> None:
    """``rl-exp-1.2`` resumes ``rl-exp-1``, queued at once with no dependency after it ended
    (no evidence but the name), beside the other cell's ``rl-exp-2.2``."""
    mine = _room(395, "rl-exp-1.2", submit_time=A_END + 20)
    theirs = _room(394, "rl-exp-2.2", submit_time=A_END + 10)
    _continued(_rows(CELL_1, theirs, mine)["391"], "395")


def test_a_renamed_resume_tied_by_its_output_and_begun_after_the_end_continues_it() -> None:
    """Jobs 1881/1882 on the real cluster: ``-d afterany:1881 --begin=now+5minutes``, another
    name, the run's ``--output`` template. While 1881 ran: ``Dependency`` ``afterany:1881``,
    eligible at the begin time already; once it timed out, ``Dependency`` cleared, reason
    ``BeginTime``. Held past the end and tied to the run by its log template: its restart."""
    out = {"standard_output": f"{W}/bd-%j.out"}
    a = _job(1881, "rl-bd-a", "TIMEOUT", **out)
    b = _begun(1882, "rl-bd-resume-other", A_END + 240, **out)
    _continued(_rows(a, b)["1881"], "1882")
    early = _begun(1882, "rl-bd-resume-other", A_END - 30, **out)
    _failed(_rows(a, early)["1881"])
