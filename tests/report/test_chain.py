"""Restart chains: successors of TIMEOUT jobs, remembered edges, name stems.

Dependency strings are in the shape SLURM 22.05 prints them (squeue --json ``dependency`` and
scontrol ``Dependency=``, as in ``tests/fixtures/slurm-22.05.8``; real):
``afterany:218(unfulfilled)``, ``afterok:218(failed)``, and ``""``/``(null)`` once a fulfilled
dependency is cleared.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from probes.models import JobState, SchedulerRecord
from report.chain import chain_link, dependencies, dependency_edges, find_successor, name_stem
from report.memory import SweepMemory
from tests.report.factories import NOW, facts, judge, record

END = NOW - timedelta(minutes=30)


def _pred(state: JobState = JobState.TIMEOUT) -> SchedulerRecord:
    return record("rl-run", "100", state, end_time=END)


@pytest.mark.parametrize(
    ("candidate", "edges", "expected"),
    [
        # 1. explicit afterany dependency on a pending successor
        (record("rl-run", "101", JobState.PENDING, depends_on=("100",)), {}, "101"),
        (record("other", "101", JobState.RUNNING, depends_on=("100",)), {}, "101"),
        # near-miss: the dependant already finished, so it does not continue the chain
        (record("rl-run-x", "101", JobState.COMPLETED, depends_on=("100",)), {}, None),
        # 2. remembered edge, Dependency cleared once the successor started
        (record("renamed", "101", JobState.RUNNING), {"100": "101"}, "101"),
        # near-miss: remembered successor is itself over
        (record("renamed", "101", JobState.FAILED), {"100": "101"}, None),
        # 3. fallback: same name/user/workdir, submitted before the predecessor ended
        (record("rl-run", "101", JobState.PENDING, submit_time=END - timedelta(hours=1)), {},
         "101"),
        (record("rl-run", "101", JobState.PENDING, submit_time=END + timedelta(minutes=4)), {},
         "101"),
        # near-misses of the fallback
        (record("rl-run", "101", JobState.PENDING, submit_time=END + timedelta(hours=1)), {}, None),
        (record("rl-run", "101", JobState.PENDING, user="bob",
                submit_time=END - timedelta(hours=1)), {}, None),
        (record("rl-run", "101", JobState.PENDING, workdir="/other",
                submit_time=END - timedelta(hours=1)), {}, None),
        # renamed restarts after SLURM cleared the dependency: the name stem matches
        *((record(name, "101", JobState.RUNNING, dependency="",
                  submit_time=END - timedelta(hours=1), start_time=END), {}, "101")
          for name in ("rl-run-r2", "rl-run_resume", "rl-run-cont", "rl-run.2")),
        # a renamed job matched by its StdOut pattern (same --output template, new name)
        (record("rl-run-phase2", "101", JobState.RUNNING, stdout_path="/w/logs/train_101.log",
                submit_time=END - timedelta(hours=1)), {}, None),
        # near-misses: another run in the same workdir (different stem, default StdOut) ...
        (record("rl-other", "101", JobState.RUNNING, stdout_path="/w/slurm-101.out",
                submit_time=END - timedelta(hours=1)), {}, None),
        # ... or a job submitted before the predecessor itself (an older job, not its restart)
        (record("rl-run-r2", "101", JobState.RUNNING, submit_time=END - timedelta(hours=5)), {},
         None),
        # explicit afterany in SLURM's own string
        (record("x", "101", JobState.PENDING, dependency="afterany:100(unfulfilled)",
                depends_on=("100",)), {}, "101"),
        # afterok / aftercorr are never satisfied by a TIMEOUT: never a restart, nor a fallback
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(failed)",
                depends_on=("100",), reason="DependencyNeverSatisfied",
                submit_time=END - timedelta(hours=1)), {}, None),
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(unfulfilled)",
                depends_on=("100",), submit_time=END - timedelta(hours=1)), {}, None),
        # afterany on this job but also afterok on another that failed: it never starts
        (record("x", "101", JobState.PENDING,
                dependency="afterany:100(unfulfilled),afterok:99(failed)",
                depends_on=("100", "99"), reason="DependencyNeverSatisfied"), {}, None),
        # a remembered edge whose successor is now DependencyNeverSatisfied
        (record("x", "101", JobState.PENDING, reason="DependencyNeverSatisfied"),
         {"100": "101"}, None),
    ],
)
def test_find_successor(
    candidate: SchedulerRecord, edges: dict[str, str], expected: str | None
) -> None:
    """A TIMEOUT job's afterany successor is found by dependency, memory, then a fallback on
    user, workdir, name stem or StdOut pattern and submit time."""
    pred = _pred()
    assert find_successor(pred, [pred, candidate], edges) == expected


def test_stdout_pattern_matches_a_renamed_successor() -> None:
    """Same ``--output`` template (``logs/train_%j.log``), unrelated new name: still the restart."""
    pred = record("rl-run", "100", JobState.TIMEOUT, end_time=END,
                  stdout_path="/w/logs/train_100.log")
    succ = record("rl-run-phase2", "101", JobState.RUNNING, stdout_path="/w/logs/train_101.log",
                  submit_time=END - timedelta(hours=1), start_time=END)
    assert find_successor(pred, [pred, succ], {}) == "101"
    default = pred.model_copy(update={"stdout_path": "/w/slurm-100.out"})
    plain = succ.model_copy(update={"stdout_path": "/w/slurm-101.out"})
    assert find_successor(default, [default, plain], {}) is None


def test_a_name_in_the_stdout_template_is_no_match_across_names() -> None:
    """``-o logs/%x/%x_%j.out`` puts each job's own name in its path: two runs with different
    names both turn into the same template, yet each writes its own log. An acceptance dry-run
    read a walltime TIMEOUT as a "normal chain restart" onto the successor of another run of
    the same user, eligible a minute after it ended; with no successor it is a failure."""
    pred = record("eval-qwen-tb", "852", JobState.TIMEOUT, end_time=END,
                  stdout_path="/w/logs/eval-qwen-tb/eval-qwen-tb_852.out")
    other = record("datagen-swe", "855", JobState.RUNNING,
                   stdout_path="/w/logs/datagen-swe/datagen-swe_855.out",
                   submit_time=END - timedelta(hours=1), start_time=END)
    assert find_successor(pred, [pred, other], {}) is None
    # near-miss: the same run restarted under the same name keeps matching
    again = other.model_copy(update={
        "name": "eval-qwen-tb", "stdout_path": "/w/logs/eval-qwen-tb/eval-qwen-tb_855.out"})
    assert find_successor(pred, [pred, again], {}) == "855"


@pytest.mark.parametrize(
    ("dependant", "why"),
    [
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(failed)",
                depends_on=("100",), reason="DependencyNeverSatisfied"),
         "successor 101 is pending with DependencyNeverSatisfied (afterok): it will never start"),
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(unfulfilled)",
                depends_on=("100",), reason="Dependency"),
         "successor 101 waits afterok, which a TIMEOUT never satisfies: not a chain restart"),
        (record("rl-run", "101", JobState.PENDING,
                dependency="afterburstbuffer:100(unfulfilled)", depends_on=("100",),
                reason="Dependency"),
         "successor 101 depends afterburstbuffer, not afterany"),
    ],
)
def test_blocked_successor_says_why(dependant: SchedulerRecord, why: str) -> None:
    """A live job waiting on the TIMEOUT without afterany is named, with the reason."""
    pred = _pred()
    link = chain_link(pred, [pred, dependant], {})
    assert link.successor is None and link.blocked == why


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("afterany:218(unfulfilled)", [("afterany", "218", "unfulfilled")]),
        ("afterok:218(failed),afterany:219(unfulfilled)",
         [("afterok", "218", "failed"), ("afterany", "219", "unfulfilled")]),
        ("afterany:12+5:13", [("afterany", "12", None), ("afterany", "13", None)]),
        ("afterok:7_3(unfulfilled)?afterany:8(unfulfilled)",
         [("afterok", "7_3", "unfulfilled"), ("afterany", "8", "unfulfilled")]),
        ("singleton(unfulfilled)", []),
        ("(null)", []),
        ("", []),
    ],
)
def test_dependencies_are_typed(raw: str, expected: list[tuple[str, str, str | None]]) -> None:
    """SLURM's dependency string keeps each element's type and status."""
    got = dependencies(record("x", "1", JobState.PENDING, dependency=raw))
    assert [(d.kind, d.job_id, d.status) for d in got] == expected


def test_afterok_is_no_remembered_edge() -> None:
    """Only afterany dependants become remembered chain edges."""
    ok = record("x", "101", JobState.PENDING, dependency="afterok:100(unfulfilled)",
                depends_on=("100",))
    anyd = record("x", "102", JobState.PENDING, dependency="afterany:101(unfulfilled)",
                  depends_on=("101",))
    assert dependency_edges([ok, anyd]) == {"101": "102"}


def test_only_timeout_jobs_have_successors() -> None:
    """A FAILED job is never a chain restart, even with a dependant queued."""
    failed = _pred(JobState.FAILED)
    nxt = record("rl-run", "101", JobState.PENDING, depends_on=("100",))
    assert find_successor(failed, [failed, nxt], {}) is None


def test_earliest_dependant_wins() -> None:
    """With two jobs waiting on the predecessor, the earlier-submitted one is the next link."""
    pred = _pred()
    late = record("x", "103", JobState.PENDING, depends_on=("100",), submit_time=END)
    early = record("x", "102", JobState.PENDING, depends_on=("100",),
                   submit_time=END - timedelta(hours=1))
    assert find_successor(pred, [pred, late, early], {}) == "102"


def test_dependency_edges() -> None:
    """Edges map each predecessor to its earliest-submitted dependant."""
    a = record("x", "101", JobState.PENDING, depends_on=("100",), submit_time=END)
    b = record("x", "102", JobState.PENDING, depends_on=("101", "100"),
               submit_time=END + timedelta(minutes=1))
    assert dependency_edges([b, a]) == {"100": "101", "101": "102"}
    assert dependency_edges([record()]) == {}


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("rl-qwen-7b", "rl-qwen-7b"),
        ("rl-qwen-7b-r2", "rl-qwen-7b"),
        ("rl-qwen-7b_restart3", "rl-qwen-7b"),
        ("SFT-Llama-resume", "sft-llama"),
        ("datagen-swe-3", "datagen-swe"),
        ("rl-qwen-v2", "rl-qwen-v2"),  # a new version is a new run, not a retry
        ("7", "7"),
    ],
)
def test_name_stem(name: str, stem: str) -> None:
    """Attempt suffixes are stripped; version and size tokens stay."""
    assert name_stem(name) == stem


@pytest.mark.parametrize(
    ("successor", "edges", "verdict", "said"),
    [
        (record("rl-run", "101", JobState.PENDING, dependency="afterany:100(unfulfilled)",
                depends_on=("100",)), {}, "restarting", "normal chain restart → 101"),
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(failed)",
                depends_on=("100",), reason="DependencyNeverSatisfied"), {}, "failed",
         "101 DependencyNeverSatisfied"),
        (record("rl-run", "101", JobState.PENDING, dependency="afterok:100(unfulfilled)",
                depends_on=("100",), reason="Dependency"), {}, "failed", "101 is afterok"),
        # SLURM cleared the dependency once it started; the renamed resume is still found
        (record("rl-run_resume", "101", JobState.RUNNING, dependency="",
                submit_time=END - timedelta(hours=1), start_time=END), {}, "restarting",
         "normal chain restart → 101"),
        (record("renamed", "101", JobState.RUNNING), {"100": "101"}, "restarting",
         "normal chain restart → 101"),
        (record("rl-other", "101", JobState.RUNNING, stdout_path="/w/slurm-101.out"), {},
         "failed", "no successor queued"),
    ],
)
def test_timeout_verdict_through_the_judge(
    successor: SchedulerRecord, edges: dict[str, str], verdict: str, said: str
) -> None:
    """Only an afterany successor makes a TIMEOUT a restart; otherwise failed, saying why."""
    pred = facts(record("rl-run", "100", JobState.TIMEOUT, end_time=END,
                        stdout_path="/w/slurm-100.out"))
    memory = SweepMemory(known_edges={"alpha": edges}) if edges else None
    report = judge(pred, others=[successor], memory=memory).report
    assert report.verdict == verdict and said in report.trend
    assert ("chain-restart" in report.flags) is (verdict == "restarting")
    assert report.successor == ("101" if verdict == "restarting" else None)
    if verdict == "failed":
        assert report.recommendation is not None and report.recommendation.action == "diagnose"


@pytest.mark.parametrize(
    ("eligible", "submitted", "name", "expected"),
    [
        # SLURM made it eligible the second the predecessor ended (its afterany was met and
        # cleared): the restart, though the launcher gave it another run directory
        (END + timedelta(seconds=1), END - timedelta(minutes=1), "rl-run", "101"),
        (END, END - timedelta(hours=1), "rl-run-r2", "101"),
        # near-misses: eligible at submit (it never waited), eligible long after the end
        # (released by something else), another run's name, submitted after the end
        (END - timedelta(minutes=1), END - timedelta(minutes=1), "rl-run", None),
        (END + timedelta(minutes=10), END - timedelta(minutes=1), "rl-run", None),
        (END + timedelta(seconds=1), END - timedelta(minutes=1), "eval-after-train", None),
        (END + timedelta(minutes=1), END + timedelta(seconds=30), "rl-run", None),
    ],
)
def test_released_successor_in_another_workdir(
    eligible: object, submitted: object, name: str, expected: str | None,
) -> None:
    """A real 22.05 chain: ``sbatch --dependency=afterany:100 --chdir /w2`` for the next
    attempt. Once 100 TIMEOUTs SLURM clears ``Dependency=`` (scontrol shows ``(null)``) and the
    successor's only trace is its EligibleTime, set at 100's end (observed: EndTime
    20:59:45, the dependant's EligibleTime 20:59:46, SubmitTime 20:58:40). It read
    'Walltime TIMEOUT; no successor queued' (failed) with the successor RUNNING."""
    pred = _pred()
    succ = record(name, "101", JobState.RUNNING, workdir="/w2", stdout_path="/w2/101.out",
                  dependency="", submit_time=submitted, eligible_time=eligible,
                  start_time=eligible)
    assert find_successor(pred, [pred, succ], {}) == expected


@pytest.mark.parametrize(
    ("started", "expected"),
    [
        (END - timedelta(minutes=20), None),  # ran beside the TIMEOUT: another run, no restart
        (END - timedelta(hours=1), None),
        (END + timedelta(minutes=1), "101"),  # started once it ended: its restart
        (END, "101"),
    ],
)
def test_a_same_name_job_running_beside_the_timeout_is_not_its_successor(
        started: datetime, expected: str | None) -> None:
    """A job of the same name, user and workdir, submitted after the TIMEOUT job and RUNNING
    now, but started before the TIMEOUT ended (two copies of a run side by side, a sweep of
    seeds under one name): it did not continue it (it was named the successor, so a real
    walltime death read 'normal chain restart'). A successor starts after (or depends on) it."""
    pred = _pred()
    beside = record("rl-run", "101", JobState.RUNNING, dependency="",
                    submit_time=END - timedelta(hours=1), start_time=started)
    assert find_successor(pred, [pred, beside], {}) == expected
    # a dependency on it is its restart whenever SLURM started it (it waited for the end)
    chained = beside.model_copy(update={"dependency": "afterany:100(unfulfilled)",
                                        "depends_on": ("100",)})
    assert find_successor(pred, [pred, chained], {}) == "101"


def test_an_afternotok_resume_is_the_restart_of_a_timeout() -> None:
    """``sbatch --dependency=afternotok:$A resume.sh``: SLURM starts it once A ended in a
    failed state, a walltime TIMEOUT included (on the real 22.05 the afternotok resume of a
    one-minute job started the second it TIMEOUT). While it still waits (a --begin, the node
    busy) it read 'TIMEOUT, no restart: successor 101 is afternotok', failed, diagnose: a
    chain TIMEOUT called a failure. It is the successor; remembered like an afterany one."""
    pred = _pred()
    resume = record("rl-run-resume", "101", JobState.PENDING, reason="BeginTime",
                    dependency="afternotok:100(unfulfilled)", depends_on=("100",))
    link = chain_link(pred, [pred, resume], {})
    assert (link.successor, link.blocked) == ("101", None)
    assert dependency_edges([resume]) == {"100": "101"}
    report = judge(facts(pred), others=[resume]).report
    assert report.verdict == "restarting" and "chain-restart" in report.flags


def test_a_hetjob_component_s_successor_waits_on_the_whole_hetjob() -> None:
    """``sbatch --dependency=afterany:1784`` on a hetjob (components ``1784+0``, ``1784+1``;
    the real 22.05 prints the dependant's ``afterany:1784(unfulfilled)``): each component's
    TIMEOUT has that job for its restart. The component's own id never equals ``1784``, so a
    renamed restart elsewhere (or its remembered edge, once SLURM cleared the dependency) was
    missed: 'Walltime TIMEOUT; no successor queued', a chain TIMEOUT called a failure."""
    parts = [record("rl-het", f"1784+{k}", JobState.TIMEOUT, end_time=END) for k in (0, 1)]
    waiting = record("rl-het-phase2", "2000", JobState.PENDING, workdir="/other",
                     dependency="afterany:1784(unfulfilled)", depends_on=("1784",))
    started = waiting.model_copy(update={"state": JobState.RUNNING, "dependency": "",
                                         "depends_on": (), "start_time": END})
    edges = dependency_edges([waiting])
    for part in parts:
        assert chain_link(part, [*parts, waiting], {}).successor == "2000"
        assert chain_link(part, [*parts, started], edges).successor == "2000"
