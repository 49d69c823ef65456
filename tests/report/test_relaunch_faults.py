"""A restart appended to its old log is not warned about the old launch's traceback.

Replayed on the real SLURM (``sbatch -o run.out --open-mode=append``, the restart ``afterany``
the first attempt): the first attempt died on a traceback and exit 1, which leaves no
slurmstepd marker to end its part of the shared log (``probes.logs.attempts``), so the
running restart read the whole file and its row said ``traceback in log: RuntimeError: CUDA
error...`` (verdict warning, flag ``traceback``) while it was stepping healthily. The trainer's
start line printed again (verl's ``Total training steps``) marks the new launch
(``LogSummary.relaunch_line``); a live job's faults above it are the earlier launch's. The
ended attempt keeps its own traceback.
"""

from __future__ import annotations

from probes.models import JobState
from tests.probes.logs.test_restart_segment import _all_same, _reads, _verl_launch, _verl_run
from tests.report.factories import facts, judge, log, record

TRACEBACK = ("Traceback (most recent call last):\n"
             "  File \"/app/verl/trainer/main_ppo.py\", line 42, in main\n"
             "    run_ppo(config)\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
OLD = _verl_launch(40) + _verl_run(1, 15, 0.6) + TRACEBACK


def _judged(text: str, state: JobState):
    summary = _all_same(_reads(text))  # cold, reference and folded reads agree
    job = facts(record("rl-verl-append", "1823", state), summary.points,
                log_fetch=log(text=text))
    return summary, judge(job.model_copy(update={"summary": summary}))


def test_the_running_restart_reads_no_traceback_of_the_launch_before() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9)
    summary, detail = _judged(text, JobState.RUNNING)
    assert summary.relaunch_line is not None
    assert [f.kind for f in summary.faults] == ["traceback"]  # the log still says it
    assert summary.faults[0].line_no < summary.relaunch_line
    assert "traceback" not in detail.report.flags
    assert detail.report.verdict == "healthy"
    assert detail.report.step == 14


def test_the_ended_attempt_keeps_its_own_traceback() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9)
    _, detail = _judged(text, JobState.FAILED)
    assert "traceback" in detail.report.flags
    assert detail.report.verdict == "failed"


def test_a_traceback_of_the_new_launch_is_still_its_own() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9) + TRACEBACK
    _, detail = _judged(text, JobState.RUNNING)
    assert "traceback" in detail.report.flags
    assert detail.report.verdict == "warning"


def test_one_launch_has_no_relaunch_line() -> None:
    summary, detail = _judged(_verl_launch(40) + _verl_run(1, 5, 0.6) + TRACEBACK,
                              JobState.RUNNING)
    assert summary.relaunch_line is None
    assert "traceback" in detail.report.flags
