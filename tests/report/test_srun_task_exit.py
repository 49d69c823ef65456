"""srun's task-end line as a FAILED job's terminal signal, parsed and judged end to end.

srun reports tasks that ended badly on its own stderr (Slurm's ``_task_finish``):
``srun: error: HOSTS: task(s) LIST: Exited with exit code N`` or ``...: <strsignal>``. When
that line is the only signal in the log, the row quotes it (tasks and exit code); a real
traceback above it, or above torchelastic's summary, still wins (seed: read the FIRST real
traceback above the masking summary).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobDetail
from report.trend import TREND_MAX
from tests.report.factories import judge, log, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STEPS = "".join(
    f"{{'loss': {1.2 - 0.01 * i:.3f}, 'grad_norm': 0.5, 'learning_rate': 1e-05, "
    f"'epoch': {0.01 * i:.2f}}}\n" for i in range(12))


def _judged(text: str, *, state: JobState = JobState.FAILED, exit_code: int | None = 1,
            name: str = "sft-llama-8b") -> JobDetail:
    parsed = parse_log(text)
    job = JobFacts(record=record(name, "4242", state, exit_code=exit_code),
                   log=log(text=text), summary=parsed)
    return judge(job)


@pytest.mark.parametrize(("line", "quoted", "flag"), [
    ("srun: error: node12: task 3: Exited with exit code 1",
     "task-exit: srun task 3: Exited with exit code 1", None),
    ("srun: error: node[12-13]: tasks 0-7: Exited with exit code 2",
     "task-exit: srun tasks 0-7: Exited with exit code 2", None),
    ("srun: error: node12: tasks 0-7: Killed", "sigkill: srun tasks 0-7: Killed", "sigkill"),
    ("srun: error: node12: tasks 0,2-7: Terminated", "sigterm: srun tasks 0,2-7: Terminated",
     "sigterm"),
    ("srun: error: node12: task 5: Segmentation fault (core dumped)",
     "task-exit: srun task 5: Segmentation fault (core dumped)", None),
])
def test_srun_line_alone_is_quoted_in_trend_and_why(line: str, quoted: str,
                                                    flag: str | None) -> None:
    """The only terminal signal is srun's: the trend and the diagnosis quote its tasks and
    their end, never a bare "FAILED exit 1"."""
    job = _judged(STEPS + line + "\n").report
    assert job.verdict == "failed"
    assert job.trend.startswith(quoted), job.trend
    assert job.recommendation is not None and job.recommendation.action == "diagnose"
    assert quoted in job.recommendation.why
    assert ([flag] if flag else []) == [f for f in job.flags if f in ("sigkill", "sigterm")]
    assert "task-exit" not in job.flags  # no flag of its own: the FAILED state says it


def test_a_long_host_list_never_cuts_the_exit_code() -> None:
    """Hosts go last in the quote: a cut Trend loses them, not the task or its exit code."""
    line = ("srun: error: gpu-a100-rack07-node0123.cluster.example.internal: task 3: "
            "Exited with exit code 137")
    job = _judged(STEPS + line + "\n", exit_code=137).report
    assert len(job.trend) <= TREND_MAX
    assert job.trend.startswith("task-exit: srun task 3: Exited with exit code 137")


def test_first_real_traceback_above_elastic_summary_and_srun_line_wins() -> None:
    """torchrun's ranks crash, the elastic summary masks it, srun reports the task: the row
    quotes rank 1's RuntimeError (the first real traceback), not the summary nor srun."""
    text = (FIXTURES / "torch-2.13.0" / "childfailed.out").read_text()
    text += "srun: error: node12: task 0: Exited with exit code 1\n"
    job = _judged(text).report
    assert job.trend.startswith("traceback: RuntimeError: shard 7 is corrupt"), job.trend
    assert "child-failed" in job.flags and "traceback" in job.flags
    assert job.recommendation is not None
    assert "shard 7 is corrupt" in job.recommendation.why


def test_a_plain_traceback_above_the_srun_line_wins() -> None:
    text = (STEPS + "Traceback (most recent call last):\n"
            '  File "train.py", line 88, in <module>\n'
            "ValueError: tokenizer has no pad token\n"
            "srun: error: node12: task 3: Exited with exit code 1\n")
    assert _judged(text).report.trend == "traceback: ValueError: tokenizer has no pad token"


def test_srun_step_failing_in_a_live_job_is_a_warning_quoting_it() -> None:
    """A step that failed while the job still runs (a later step continues) is looked at."""
    text = STEPS + "srun: error: node3: task 0: Exited with exit code 2\n" + STEPS
    job = _judged(text, state=JobState.RUNNING, exit_code=None).report
    assert job.verdict == "warning"
    assert job.trend.startswith("task-exit in log: srun task 0: Exited with exit code 2")


@pytest.mark.parametrize("line", [
    "srun: node12: task 3: Completed",  # srun -v's clean end
    "launcher: on 'task 3: Exited with exit code 1' the step is retried",  # not srun's line
    "srun: error: Unable to create step for job 4242: Memory required by task is not available",
])
def test_near_misses_raise_no_task_exit(line: str) -> None:
    """Lines that name the words but are no task-end report of srun's: no fault, no warning."""
    job = _judged(STEPS + line + "\n" + STEPS, state=JobState.RUNNING, exit_code=None).report
    assert job.verdict == "healthy", job.trend
    assert "task-exit" not in job.trend
