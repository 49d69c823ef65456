"""A first launch whose chain restart is already queued is still a first launch.

Rulebook: "New/untested RL run? -> deep-probe it ... the first launch after a code or config
change". Chained RL runs are launched with their afterany successor queued at once (sbatch
--dependency=afterany:ID, same name). Replayed on the real SLURM as jtuser (a verl run in its
7th step and its pending successor), ``jobtables job`` flagged the run deep-probe ('first
launch, still in its first steps') while ``jobtables sweep`` did not: the sweep counted the
queued successor, submitted after it, as an earlier attempt of the run.
"""

from __future__ import annotations

from datetime import timedelta

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, healthy_rl, log, points
from tests.report.test_judge_rl_rulebook import _from_log


def _run(job_id: str, state: JobState, submitted_h: float, steps: int = 7) -> JobFacts:
    facts = _from_log("", name="rl-verl-chain", job_id=job_id, state=state,
                      submit_time=NOW - timedelta(hours=submitted_h))
    history = points(healthy_rl(steps)) if steps else ()
    summary = facts.summary.model_copy(update={"points": history}) if facts.summary else None
    return facts.model_copy(update={"summary": summary,
                                    "log": log(path=f"/w/{job_id}.out", text="x\n" * steps)})


def _flags(jobs: list[JobFacts], job_id: str) -> list[str]:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    return next(j.flags for j in report.jobs if j.job_id == job_id)


def test_a_first_launch_with_its_restart_queued_is_deep_probed() -> None:
    first = _run("200", JobState.RUNNING, 3)
    successor = _run("201", JobState.PENDING, 2.9, steps=0)
    successor = successor.model_copy(update={"record": successor.record.model_copy(
        update={"dependency": "afterany:200(unfulfilled)", "start_time": None})})
    assert "deep-probe" in _flags([first], "200")  # alone
    assert "deep-probe" in _flags([first, successor], "200")  # with its restart queued


def test_a_relaunch_after_an_earlier_attempt_is_not_a_first_launch() -> None:
    earlier = _run("199", JobState.TIMEOUT, 5)
    relaunch = _run("200", JobState.RUNNING, 3)
    assert "deep-probe" not in _flags([earlier, relaunch], "200")


def test_a_record_without_submit_time_still_counts() -> None:
    first = _run("200", JobState.RUNNING, 3)
    other = _run("201", JobState.PENDING, 1, steps=0)
    other = other.model_copy(update={"record": other.record.model_copy(
        update={"submit_time": None, "start_time": None})})
    assert "deep-probe" not in _flags([first, other], "200")  # order unknown: as before


def test_a_restart_queued_in_the_same_second_is_no_earlier_attempt() -> None:
    """Review of b2c3210: the usual chained launch (``jid=$(sbatch ...); sbatch
    --dependency=afterany:$jid ...``) submits both in one second, and SLURM's submit times are
    whole seconds: the restart, a higher id, is the later one."""
    first = _run("200", JobState.RUNNING, 3)
    successor = _run("201", JobState.PENDING, 3, steps=0)
    successor = successor.model_copy(update={"record": successor.record.model_copy(
        update={"dependency": "afterany:200(unfulfilled)", "start_time": None})})
    assert "deep-probe" in _flags([first, successor], "200")


def test_earlier_attempts_of_one_name_by_submit_order() -> None:
    """The index answers as counting every other record of the name before it: by submit
    time, then id; a record without a time counts for each; an array's tasks (one id, one
    time, no throttle said: a grid in waves) are no attempts of each other."""
    from report.chain import ChainIndex
    from tests.report.factories import record

    base = NOW - timedelta(hours=5)
    records = [record("rl-x", str(100 + i), JobState.TIMEOUT,
                      submit_time=base + timedelta(minutes=i // 2)) for i in range(6)]
    records += [record("rl-x", "7", JobState.TIMEOUT, submit_time=None)]
    records += [record("rl-x", f"300_{t}", JobState.RUNNING, array_job_id="300",
                       array_task_id=str(t), submit_time=base + timedelta(hours=1))
                for t in range(3)]
    index = ChainIndex(records)
    counts = {r.job_id: index.earlier_attempts(r) for r in records}
    assert counts == {"100": 1, "101": 2, "102": 3, "103": 4, "104": 5, "105": 6, "7": 9,
                      "300_0": 7, "300_1": 7, "300_2": 7}


def _task(array: str, task: int, state: JobState, spec: str, steps: int = 7) -> JobFacts:
    """Task ``task`` of the array ``array`` (``--array=0-5<spec>``: squeue's
    ``array_max_tasks`` as the parser keeps it, 0 for an unthrottled array), submitted at once
    with its siblings 3 h ago; an ended task ran before the running ones."""
    facts = _run(f"{array}_{task}", state, 3, steps=steps)
    throttle = {"%1": "1", "%2": "2", "": "0"}[spec]
    update: dict[str, object] = {"array_job_id": array, "array_task_id": str(task),
                                 "labels": {"array_throttle": throttle}}
    if state is not JobState.RUNNING:
        update["end_time"] = NOW - timedelta(hours=2, minutes=30)
    return facts.model_copy(update={"record": facts.record.model_copy(update=update)})


def _remainder(array: str, spec: str) -> JobFacts:
    """The array's pending remainder (squeue's ``300_[4-5%2]``)."""
    facts = _run(array, JobState.PENDING, 3, steps=0)
    throttle = {"%1": "1", "%2": "2", "": "0"}[spec]
    return facts.model_copy(update={"record": facts.record.model_copy(update={
        "job_id": f"{array}_[4-5{spec}]", "start_time": None,
        "labels": {"array_throttle": throttle, "array_tasks": f"4-5{spec}"}})})


def test_a_grid_run_in_waves_deep_probes_each_new_cell() -> None:
    """An array run in waves (``--array=0-5%2``, or unthrottled) runs a grid: each task is a
    cell of its own, launched for the first time, not an attempt of its siblings (the wave
    rule of 412cf97 and d12635e). Its running tasks in their first steps are first launches,
    whatever ran or waits beside them."""
    for spec in ("%2", ""):
        jobs = [_task("300", 0, JobState.COMPLETED, spec), _task("300", 1, JobState.FAILED, spec),
                _task("300", 2, JobState.RUNNING, spec), _task("300", 3, JobState.RUNNING, spec),
                _remainder("300", spec)]
        assert "deep-probe" in _flags(jobs, "300_2"), spec
        assert "deep-probe" in _flags(jobs, "300_3"), spec


def test_a_one_at_a_time_array_is_a_restart_chain() -> None:
    """``--array=0-5%1`` runs its tasks one after another, a restart chain by array: a task
    after the first is a relaunch, its earlier tasks its earlier attempts. Its first task is
    still a first launch (the tasks after it wait, they ran nothing before it)."""
    first = _task("300", 0, JobState.RUNNING, "%1")
    assert "deep-probe" in _flags([first, _remainder("300", "%1")], "300_0")
    jobs = [_task("300", 0, JobState.TIMEOUT, "%1"), _task("300", 1, JobState.RUNNING, "%1"),
            _remainder("300", "%1")]
    assert "deep-probe" not in _flags(jobs, "300_1")


def test_earlier_attempts_among_an_arrays_tasks() -> None:
    """Only a ``%1`` array's earlier tasks are earlier attempts of a task; a wave array's
    siblings (``%2``, unthrottled, or a record that does not say) are none."""
    from report.chain import ChainIndex
    from tests.report.factories import record

    def tasks(throttle: str | None) -> list:
        labels = {} if throttle is None else {"array_throttle": throttle}
        return [record("rl-x", f"300_{t}", JobState.RUNNING, array_job_id="300",
                       array_task_id=str(t), labels=labels) for t in (2, 0, 1)]

    for throttle in ("2", "0", None):
        index = ChainIndex(tasks(throttle))
        assert [index.earlier_attempts(r) for r in tasks(throttle)] == [0, 0, 0], throttle
    index = ChainIndex(tasks("1"))
    assert [index.earlier_attempts(r) for r in tasks("1")] == [2, 0, 1]
