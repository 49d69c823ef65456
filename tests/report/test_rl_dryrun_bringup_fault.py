"""A bring-up that hit a real fault is not in the Filling-buffer table.

Rulebook: bring-up waits (gang admission, mesh load, the shm broadcast heartbeat "no available
block found", image-pull self-heal) are BENIGN and go in the buffer-filling table; the heartbeat
is a fault when it co-fires with a real NCCL hang (a WorkNCCL(...) timeout, "preparing to dump
debug info", a SIGABRT). Replayed as a real SLURM job (vLLM heartbeats, then torch's
ProcessGroupNCCL watchdog lines, no step), jobtables sweep listed the run under 'Filling buffer'
with flag buffer-filling beside nccl-timeout, and no recommendation: a hung bring-up shown
with the benign ones. The benign bring-up alone stays there.
"""

from __future__ import annotations

from pathlib import Path

from probes.models import JobFacts
from report.layouts import is_buffering
from tests.report.factories import judge, log
from tests.report.test_judge_rl_rulebook import _from_log

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "rl-dryrun"


def _running(name: str, fixture: str) -> JobFacts:
    """The job as the sweep read it: its log's text and the parser's reading of it."""
    text = (HERE / fixture).read_text()
    facts = _from_log(text, name=name)
    return facts.model_copy(update={"log": log(text=text, size=len(text.encode()))})


def test_benign_bring_up_fills_the_buffer() -> None:
    report = judge(_running("rl-verl-bringup", "verl_bringup_shm_heartbeat.log")).report
    assert report.verdict == "buffering" and "buffer-filling" in report.flags
    assert not any(flag == "nccl-timeout" for flag in report.flags)
    assert is_buffering(report)


def test_a_bring_up_hung_in_nccl_leaves_the_buffer_table() -> None:
    report = judge(_running("rl-verl-ncclhang", "verl_bringup_nccl_hang.log")).report
    assert "nccl-timeout" in report.flags
    assert "buffer-filling" not in report.flags and not is_buffering(report)
    assert report.verdict == "warning"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "WorkNCCL" in report.recommendation.why
