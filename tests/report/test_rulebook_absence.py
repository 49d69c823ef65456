"""Rulebook "Empty and absent": a 0-byte log past the bucket's bring-up window is no buffer.

The log is a real file read by the real collector (``probes.remote.collector``) and assembled by
``probes.slurm.assemble`` exactly as a SLURM sweep does; only the record is built here.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.models import JobFacts, JobState
from probes.remote.collector import collect
from probes.slurm.assemble import job_facts
from report.models import Verdict
from tests.report.factories import NOW, judge, log, record, summary

NAMES = {"rl": "rl-grpo-7b", "sft": "sft-qwen-7b", "eval": "eval-qwen-tb",
         "datagen": "datagen-swe", "other": "consolidate-traces"}


def _collected(tmp: Path, name: str, ran_min: float, text: str = "") -> JobFacts:
    out = tmp / "slurm-4242.out"
    out.write_text(text)
    request = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 10,
               "jobs": [{"id": "4242", "stdout": str(out), "workdir": str(tmp), "offset": 0,
                         "checkpoint_roots": [], "trial_roots": [str(tmp / "jobs")]}]}
    raw = collect(request)["jobs"]["4242"]
    rec = record(name, "4242", workdir=str(tmp), stdout_path=str(out),
                 start_time=NOW - timedelta(minutes=ran_min), elapsed_s=int(ran_min * 60))
    return job_facts(rec, raw, aliases={}, benign_patterns=())


@pytest.mark.parametrize(
    ("bucket", "ran_min", "flag", "verdict"),
    [
        ("rl", 25, "stall", "stalled"),
        ("rl", 15, "buffer-filling", "buffering"),
        ("sft", 20, "stall", "stalled"),
        ("sft", 10, "buffer-filling", "buffering"),
        ("eval", 65, "stall", "stalled"),  # eval and datagen: their stall windows (60, 120)
        ("eval", 15, "buffer-filling", "buffering"),
        ("datagen", 125, "stall", "stalled"),
        ("datagen", 15, "buffer-filling", "buffering"),
        ("other", 20, "stall", "stalled"),
    ],
)
def test_zero_byte_log_past_bring_up_is_a_stall(
    tmp_path: Path, bucket: str, ran_min: float, flag: str, verdict: Verdict
) -> None:
    """0 bytes after the bucket's bring-up window: stall, not "filling buffer"."""
    job = _collected(tmp_path, NAMES[bucket], ran_min)
    assert job.log is not None and job.log.status == "ok" and job.log.size == 0
    report = judge(job).report
    assert flag in report.flags and report.verdict == verdict
    if flag == "stall":
        assert "buffer-filling" not in report.flags and "0 bytes" in report.trend
        assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_bring_up_lines_alone_stay_buffering(tmp_path: Path) -> None:
    """A log with lines (even bring-up only) is not empty: the ordinary bring-up rules apply."""
    job = _collected(tmp_path, "rl-grpo-7b", 45, "INFO Loading weights\n")
    assert "stall" not in judge(job).report.flags


def test_non_empty_file_read_as_nothing_is_fetch_failed() -> None:
    """A file with bytes whose read came back empty: fetch-failed, state unknown (never dead)."""
    job = JobFacts(record=record("rl-grpo-7b", start_time=NOW - timedelta(hours=1)),
                   log=log(text="", size=52_000), summary=summary(line_count=0))
    report = judge(job).report
    assert report.flags == ["fetch-failed"] and report.verdict == "unknown"


def test_pending_job_is_untouched() -> None:
    """PENDING has no log yet: still buffer-filling whatever the time."""
    job = JobFacts(record=record("rl-grpo-7b", state=JobState.PENDING, reason="Priority"),
                   log=log(text="", size=0))
    report = judge(job).report
    assert report.flags == ["buffer-filling"] and report.verdict == "buffering"
