"""A run in bring-up whose log has said nothing for the stall floor is hung, not filling.

The rulebook's bring-up (gang/queue admission, mesh load, shared-memory broadcast waits,
image pulls) is benign and goes in the buffer table "until its first step lands"; a hung
actor that never returns is a real terminal signal. A training run with no step yet whose log
stopped moving read 'Bring-up; no step yet', buffering, for as long as it stayed so: 5 hours
in (a collective that never formed, or a trainer resumed at its max_steps waiting for a batch
that never comes, as prime-rl did before PrimeIntellect-ai/prime-rl#3352), the same.
The log is verl's real bring-up (tests/fixtures/rl-dryrun/verl_bringup_shm_heartbeat.log).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from report.models import JobReport
from tests.report.factories import NOW, judge, log, record, summary

TEXT = (Path(__file__).resolve().parents[1] / "fixtures" / "rl-dryrun"
        / "verl_bringup_shm_heartbeat.log").read_text()


def _row(name: str, started: timedelta, written: datetime) -> JobReport:
    parsed = parse_log(TEXT, mtime=written)
    job = JobFacts(record=record(name, start_time=NOW - started),
                   log=log(text=TEXT, mtime=written),
                   summary=summary(**parsed.model_dump(exclude={"points"})))
    return judge(job, now=NOW).report


@pytest.mark.parametrize("name", ["rl-verl-qwen3", "sft-qwen3-8b"])
def test_a_bring_up_whose_log_went_silent_is_a_stall(name: str) -> None:
    report = _row(name, timedelta(hours=5), NOW - timedelta(hours=4, minutes=55))
    assert "stall" in report.flags and "buffer-filling" not in report.flags, report.trend
    assert report.verdict == "stalled"
    assert report.trend.startswith("STALL in bring-up: no step and no new log line for 4h55m")
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose"


@pytest.mark.parametrize(("started", "silent"), [
    (timedelta(hours=5), timedelta(minutes=2)),  # heartbeats keep the log moving
    (timedelta(minutes=12), timedelta(hours=3)),  # a restart appending to its predecessor's log
    (timedelta(minutes=25), timedelta(minutes=25)),  # a quiet bring-up inside the floor
])
def test_a_bring_up_whose_log_moves_or_is_young_is_buffering(started: timedelta,
                                                             silent: timedelta) -> None:
    report = _row("rl-verl-qwen3", started, NOW - silent)
    assert report.flags == ["buffer-filling"] and report.verdict == "buffering", report.trend


def test_a_bring_up_read_with_no_file_time_is_not_timed_by_zone_less_stamps() -> None:
    """A pod's log (Kubernetes: no file, no mtime) whose lines carry the cluster's zone-less
    local time, here 8 h west of UTC: its last line, 07:55:10 local, was 5 min ago. Compared
    with now as UTC it read 8 h old, and the run 2 h into bring-up read 'STALL in bring-up'.
    The log clock's policy (probes.logs.clock): a zone-less stamp is never compared with now;
    with no mtime the silence is unknown, and the bring-up stays buffering."""
    west = (TEXT.replace("2026-12-03", "2026-11-30").replace("12-03", "11-30")
            .replace(" 10:0", " 07:5"))
    parsed = parse_log(west, mtime=None)
    job = JobFacts(record=record("rl-verl-qwen3", start_time=NOW - timedelta(hours=2)),
                   log=log(text=west, mtime=None),
                   summary=summary(**parsed.model_dump(exclude={"points"})))
    report = judge(job, now=NOW).report
    assert report.flags == ["buffer-filling"] and report.verdict == "buffering", report.trend
