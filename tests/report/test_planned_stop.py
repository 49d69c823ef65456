"""A COMPLETED run whose trainer stopped itself ahead of its walltime is a chain restart.

NeMo-RL (``checkpointing.checkpoint_must_save_by``) saves, prints 'Timeout has been reached,
stopping training early' and returns; Megatron-LM with ``--exit-duration-in-mins`` prints
'[exiting program after N minutes] datetime: ...' and with ``--exit-interval`` '[exiting
program at iteration N] ...', then exits 0. SLURM says COMPLETED, short of the total, and the
judge read ``incomplete-run``, diagnose 'find why it stopped', though the log says why. The
fixtures are the rebuilt NeMo-RL console cut at step 12 of 100 after a save and the rebuilt
Megatron args with 40 iterations of 500 (a save at 40), each ending in its line.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import CheckpointListing, JobFacts, JobState, SchedulerRecord
from report.memory import SweepMemory
from report.models import JobReport
from tests.report.factories import NOW, judge, log, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NEMO = FIXTURES / "nemo-rl-rebuilt" / "grpo_timeout.log"
MEGATRON = FIXTURES / "megatron-rebuilt" / "exit_duration.log"
END = NOW - timedelta(minutes=20)
AT_ITERATION = "[exiting program at iteration 40] datetime: 2026-11-30 10:41:02 \n"


def _facts(text: str, name: str = "rl-nemo-grpo", banked: int | None = 12) -> JobFacts:
    return JobFacts(
        record=record(name, "100", JobState.COMPLETED, end_time=END,
                      stdout_path="/w/logs/train-100.out"),
        log=log(text=text), summary=parse_log(text),
        checkpoints=CheckpointListing(steps=(banked,)) if banked is not None else None)


def _judge(job: JobFacts, *others: SchedulerRecord,
           memory: SweepMemory | None = None) -> JobReport:
    return judge(job, others=others, memory=memory).report


def _successor(name: str = "rl-nemo-grpo", state: JobState = JobState.PENDING,
               **overrides: object) -> SchedulerRecord:
    fields: dict[str, object] = {"dependency": "afterany:100(unfulfilled)",
                                 "depends_on": ("100",)}
    fields.update(overrides)
    return record(name, "101", state, **fields)


@pytest.mark.parametrize(
    ("text", "name"),
    [(NEMO.read_text(), "rl-nemo-grpo"),
     (MEGATRON.read_text(), "sft-llama3-8b"),
     (MEGATRON.read_text().rsplit("\n", 2)[0] + "\n" + AT_ITERATION, "sft-llama3-8b")],
    ids=["nemo-rl-timeout", "megatron-exit-duration", "megatron-exit-interval"],
)
def test_planned_stop_with_a_successor_is_a_chain_restart(text: str, name: str) -> None:
    """With an afterany successor pending: restarting, chain-restart, successor named."""
    job = _facts(text, name)
    report = _judge(job, _successor(name=name))
    assert report.verdict == "restarting"
    assert "chain-restart" in report.flags and "incomplete-run" not in report.flags
    assert report.successor == "101" and "101" in report.trend
    assert "cleanup-pending" not in report.flags
    assert report.recommendation is None or report.recommendation.action != "cleanup"


@pytest.mark.parametrize(
    "successor",
    [
        # afterok: the planned stop's exit 0 satisfies it
        _successor(dependency="afterok:100(unfulfilled)", state=JobState.RUNNING),
        # SLURM cleared the met dependency: the same fallback as a TIMEOUT's (name stem)
        _successor(name="rl-nemo-grpo-r2", dependency="", depends_on=(),
                   submit_time=END - timedelta(hours=1), start_time=END,
                   state=JobState.RUNNING),
    ],
    ids=["afterok", "fallback"],
)
def test_successor_by_afterok_or_the_fallback(successor: SchedulerRecord) -> None:
    """afterok (satisfied by exit 0) and the TIMEOUT's fallback match find the successor."""
    report = _judge(_facts(NEMO.read_text()), successor)
    assert report.verdict == "restarting" and report.successor == "101"


def test_remembered_edge_names_the_successor() -> None:
    """A remembered afterany edge whose successor runs, its Dependency cleared."""
    renamed = record("other-name", "101", JobState.RUNNING, dependency="")
    memory = SweepMemory(known_edges={"alpha": {"100": "101"}})
    report = _judge(_facts(NEMO.read_text()), renamed, memory=memory)
    assert report.verdict == "restarting" and report.successor == "101"


def test_without_a_successor_it_says_resubmit_from_the_banked_step() -> None:
    """No successor: not incomplete-run; stopped at its time budget, resubmit from step 12."""
    report = _judge(_facts(NEMO.read_text()))
    assert "incomplete-run" not in report.flags and "chain-restart" not in report.flags
    assert report.verdict == "warning" and report.successor is None
    assert "time budget" in report.trend and "no successor" in report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "resume from banked step 12" in report.recommendation.why
    assert "find why it stopped" not in report.recommendation.why


def test_afternotok_dependant_is_no_successor() -> None:
    """A job waiting afternotok never starts after exit 0: no successor."""
    waiting = _successor(dependency="afternotok:100(unfulfilled)")
    report = _judge(_facts(NEMO.read_text()), waiting)
    assert report.verdict == "warning" and report.successor is None


def test_a_step_after_the_line_is_no_planned_stop() -> None:
    """A logged step after the line (a later run appending to the log): the line is stale,
    and the run short of its total reads incomplete-run as before."""
    text = MEGATRON.read_text()
    later = next(line for line in text.splitlines() if "iteration       40/" in line)
    job = _facts(text + later.replace("      40/", "      41/") + "\n", "sft-llama3-8b")
    report = _judge(job, _successor(name="sft-llama3-8b"))
    assert "incomplete-run" in report.flags and report.successor is None


def test_a_stop_at_the_total_is_a_finish() -> None:
    """NeMo-RL prints the timeout line, not the max-steps one, when both fall on the last
    step: at its total the run is done, its cleanup named."""
    text = NEMO.read_text().replace("Step 12/100", "Step 12/12")
    report = _judge(_facts(text))
    assert report.verdict == "done" and report.successor is None
    assert report.recommendation is not None and report.recommendation.action == "cleanup"


def test_without_the_line_it_is_still_incomplete() -> None:
    """The same log without the line: incomplete-run, diagnose."""
    text = NEMO.read_text().replace("Timeout has been reached, stopping training early\n", "")
    report = _judge(_facts(text), _successor())
    assert "incomplete-run" in report.flags and report.successor is None


def test_a_grid_cell_stopped_at_its_time_budget_is_not_done() -> None:
    """An SFT grid cell that stopped itself with no successor queued is no done cell (it
    read 'done 1'): it is listed as stopped short, as an incomplete-run cell is."""
    from report.judge import build_report
    from report.settings import ReportSettings
    from tests.report.factories import cluster

    stopped = _facts(MEGATRON.read_text(), "sft-g-7b-lr1e4", banked=40)
    running = _facts(MEGATRON.read_text(), "sft-g-0.5b-lr1e5").model_copy(update={
        "record": record("sft-g-0.5b-lr1e5", "200", JobState.RUNNING)})
    report, _ = build_report([cluster("alpha", [stopped, running])],
                             settings=ReportSettings(), now=NOW)
    [grid] = report.grid
    assert grid.done == 0 and grid.short == ("sft-g-7b-lr1e4",)


def _remembered(*records: SchedulerRecord) -> SweepMemory:
    """The memory a sweep that saw ``records`` leaves for the next one."""
    from probes.models import ClusterFacts
    from report.judge import build_report
    from report.memory import next_memory
    from report.settings import ReportSettings

    seen = ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW,
                        jobs=tuple(JobFacts(record=r) for r in records))
    report, details = build_report([seen], settings=ReportSettings(), now=NOW)
    return next_memory(report, details, [seen], None)


def test_a_renamed_afterok_successor_seen_waiting_is_linked_once_it_runs() -> None:
    """A restart queued afterok under another name and run directory (no stem, no StdOut
    pattern, no workdir to match): a sweep saw it wait on the run; once SLURM cleared the
    met dependency and started it, the planned stop still names it, as an afterany one."""
    running = record("rl-nemo-grpo", "100", JobState.RUNNING)
    waiting = record("resume-from-step12", "101", JobState.PENDING, workdir="/w2",
                     stdout_path="/w2/slurm-101.out", dependency="afterok:100(unfulfilled)",
                     depends_on=("100",))
    memory = _remembered(running, waiting)
    started = waiting.model_copy(update={"state": JobState.RUNNING, "dependency": None,
                                         "depends_on": ()})
    report = _judge(_facts(NEMO.read_text()), started, memory=memory)
    assert report.verdict == "restarting" and report.successor == "101"
    assert "chain-restart" in report.flags


def test_a_remembered_afterok_edge_never_makes_a_timeout_a_restart() -> None:
    """The same remembered afterok dependant of a job that then TIMEOUTs is no restart (a
    TIMEOUT never satisfies afterok), even before SLURM marks it never satisfied."""
    running = record("rl-nemo-grpo", "100", JobState.RUNNING)
    waiting = record("resume-from-step12", "101", JobState.PENDING, workdir="/w2",
                     stdout_path="/w2/slurm-101.out", dependency="afterok:100(unfulfilled)",
                     depends_on=("100",))
    memory = _remembered(running, waiting)
    timed_out = JobFacts(record=record("rl-nemo-grpo", "100", JobState.TIMEOUT, end_time=END),
                         log=log(text="step 1\n"))
    still = waiting.model_copy(update={"dependency": "afterok:100(failed)", "reason": "Dependency"})
    report = _judge(timed_out, still, memory=memory)
    assert report.verdict == "failed" and report.successor is None
    gone = waiting.model_copy(update={"dependency": None, "depends_on": (),
                                      "state": JobState.RUNNING})
    report = _judge(timed_out, gone, memory=memory)
    assert report.successor is None


def test_an_eval_waiting_afterok_on_a_planned_stop_is_no_restart() -> None:
    """A planned stop's only afterok dependant is an eval of its checkpoint (``sbatch
    --dependency=afterok:$TRAIN eval.sh``, a common chain): that is no restart of the run.
    It read 'restarting' with the eval as its successor, while it waited and (remembered)
    once it ran; a dependant in another known bucket is none (a renamed restart keeps the
    run's bucket, or has none of the configured ones)."""
    waiting = record("eval-nemo-grpo-step12", "101", JobState.PENDING, workdir="/w2",
                     stdout_path="/w2/slurm-101.out", dependency="afterok:100(unfulfilled)",
                     depends_on=("100",))
    report = _judge(_facts(NEMO.read_text()), waiting)
    assert report.successor is None and report.verdict != "restarting", report
    memory = _remembered(record("rl-nemo-grpo", "100", JobState.RUNNING), waiting)
    started = waiting.model_copy(update={"state": JobState.RUNNING, "dependency": None,
                                         "depends_on": ()})
    report = _judge(_facts(NEMO.read_text()), started, memory=memory)
    assert report.successor is None and "chain-restart" not in report.flags
    # The run's own afterok restart is still one.
    own = _successor(dependency="afterok:100(unfulfilled)")
    assert _judge(_facts(NEMO.read_text()), own).successor == "101"
