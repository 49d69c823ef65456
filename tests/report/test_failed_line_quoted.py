"""A FAILED SFT or RL job whose log holds no fault is diagnosed with its failing line.

Found by replaying on the real SLURM an HF Trainer SFT job (and a verl-console RL job) that
died on a bare ``RuntimeError: NCCL error in: ...`` line, no Traceback above it, exit 3: the
row read ``FAILED exit 3`` and its diagnose said no more, while the catch-all bucket already
quoted such a line (6b5510a). The failed-state rule every bucket shares now quotes it; the log
lines are the ones the replay jobs printed. A walltime TIMEOUT's failure is its state: the
error line its log happens to end on is neither searched nor part of its signature.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.failure_text import FAILED_NEXT
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, judge, log, record

NCCL = ("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:2037, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.21.5")
SFT_STEPS = "".join(
    f"\r  {s}%|          | {s}/500 [00:01<01:10,  7.1it/s]\r{' ' * 46}{{'loss': "
    f"'{2.5 - 0.05 * s:.4g}', 'grad_norm': '0.81', 'learning_rate': '2e-05', 'epoch': "
    f"'{s / 500:.4g}'}}\n" for s in range(1, 13))
RL_STEPS = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.21{s} - actor/pg_loss:-0.01 - "
    f"critic/score/mean:0.4{s} - actor/pg_clipfrac:0.001\n" for s in range(1, 9))


def _failed(name: str, text: str, state: JobState = JobState.FAILED, job_id: str = "2776",
            minutes_ago: int = 5) -> JobFacts:
    rec = record(name, job_id, state, exit_code=3, elapsed_s=40,
                 submit_time=NOW - timedelta(minutes=minutes_ago),
                 start_time=NOW - timedelta(minutes=minutes_ago))
    return JobFacts(record=rec, log=log(text=text), summary=parse_log(text))


@pytest.mark.parametrize(("name", "steps"), [("sft-qwen-nccl", SFT_STEPS),
                                             ("rl-grpo-nccl", RL_STEPS)])
def test_a_bare_error_line_is_the_diagnosis(name: str, steps: str) -> None:
    """No traceback: the trend and the diagnose quote the failing line, not just the exit."""
    report = judge(_failed(name, steps + "\n" + NCCL + "\n")).report
    assert report.verdict == "failed"
    assert report.trend.startswith("FAILED exit 3: RuntimeError: NCCL error in: ")
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose"
    assert report.recommendation.why == f"FAILED exit 3: {NCCL}{FAILED_NEXT}"


def test_a_fault_still_wins_over_the_failing_line() -> None:
    """With a traceback in the log, its error is quoted, as before."""
    text = (SFT_STEPS + "Traceback (most recent call last):\n  File \"train.py\", line 9, in "
            "<module>\n    trainer.train()\n" + NCCL + "\nwandb: ERROR run failed\n")
    report = judge(_failed("sft-qwen-nccl", text)).report
    assert report.trend.startswith("traceback: ")
    assert "wandb" not in report.trend


def _second_timeout(first_end: str, second_end: str) -> JobReport:
    """Two walltime TIMEOUTs (no successor) of one run, read from the trainer's own log (no
    slurmstepd line), each ending on an unrelated error line."""
    attempts = [
        _failed("sft-qwen-walltime", SFT_STEPS + first_end, JobState.TIMEOUT, "1713", 60),
        _failed("sft-qwen-walltime", SFT_STEPS + second_end, JobState.TIMEOUT, "1974", 5),
    ]
    report, _ = build_report([cluster("alpha", attempts)], settings=ReportSettings(), now=NOW)
    (job,) = [j for j in report.jobs if j.job_id == "1974"]
    return job


def test_two_walltime_deaths_recur_whatever_line_their_logs_end_on() -> None:
    """A TIMEOUT's signature is its state: a stray error line does not tell two apart."""
    job = _second_timeout("wandb: ERROR Error while calling W&B API: An internal error\n",
                          "[W socket.cpp:464] [c10d] The server socket has failed to listen "
                          "on any local network address. error\n")
    assert "recurring-failure" in job.flags
