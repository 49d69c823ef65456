"""The Trend quoting a torch NCCL watchdog line says what happened, not its log prefix.

torch's ProcessGroupNCCL logs through c10 (glog format): ``[E1203 10:16:10.512345 2211
ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout:
WorkNCCL(...)``. Replayed as a real SLURM job, jobtables sweep's Trend for the hang read
'nccl-timeout in log: [E1203 10:16:10.512345 2211 ProcessGro…': the 60-character cell held
the severity, time, thread and source file, and not one word of the fault.
"""

from __future__ import annotations

from pathlib import Path

from probes.models import Fault, JobState
from report.failure_text import fault_text
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "rl-dryrun"


def test_the_live_hang_trend_quotes_the_watchdog() -> None:
    text = (HERE / "verl_bringup_nccl_hang.log").read_text()
    report = judge(_from_log(text, name="rl-verl-ncclhang")).report
    assert report.trend.startswith(
        "nccl-timeout in log: Watchdog caught collective operation")


def test_a_failed_run_is_diagnosed_by_the_watchdog_words() -> None:
    text = (HERE / "verl_bringup_nccl_hang.log").read_text()
    report = judge(_from_log(text, name="rl-verl-ncclhang", state=JobState.FAILED)).report
    assert report.verdict == "failed"
    assert report.trend.startswith("nccl-timeout: Watchdog caught collective operation")
    assert report.recommendation is not None
    assert "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1572" \
        in report.recommendation.why


def test_c10_prefixes_are_dropped_and_other_lines_kept() -> None:
    def said(line: str) -> str:
        return fault_text(Fault(kind="nccl-timeout", line_no=1, excerpt=line))

    assert said("[E1203 10:16:10.712345 2211 ProcessGroupNCCL.cpp:1576] [PG ID 0 PG GUID "
                "0(default_pg) Rank 3] ProcessGroupNCCL preparing to dump debug info.") \
        == "ProcessGroupNCCL preparing to dump debug info."
    assert said("E1203 10:16:10.512345  2211 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog "
                "caught collective operation timeout") == \
        "Watchdog caught collective operation timeout"
    assert said("torch.OutOfMemoryError: CUDA out of memory.") == \
        "torch.OutOfMemoryError: CUDA out of memory."
    assert said("[rank0]: RuntimeError: NCCL error") == "[rank0]: RuntimeError: NCCL error"
