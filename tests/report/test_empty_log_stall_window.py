"""An eval or datagen job's empty log is a stall only past its bucket's own stall window.

Replayed on the real SLURM 22.05 as jtuser (datagen-tb-empty): a datagen job whose SLURM log
is still 0 bytes, no Harbor trial yet (Harbor draws its progress with rich, which prints no live
bar to a file, and an engine served by another job logs nothing here). ``jobtables sweep`` read
``STALL: log empty (0 bytes) after 12m running (bring-up 10m)``, stalled, diagnose, twelve
minutes in. CONTRACT §6: ``stall`` is "no progress for the bucket's stall window (eval: no new
result.json for 60+ min; datagen: hung chunk)", and the rulebook's hung chunk is a log "silent
for hours". The empty-log window of these two buckets is now at least their stall window
(``eval_stall_minutes``, ``datagen_hung_minutes``); RL, SFT and catch-all keep theirs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobFacts, JobState
from report.models import JobReport
from tests.report.factories import NOW, judge, log, record, summary

NAMES = {"rl": "rl-grpo-7b", "eval": "eval-qwen3-x-tbench", "datagen": "datagen-tb-empty"}


def _report(bucket: str, ran_min: float) -> JobReport:
    start = NOW - timedelta(minutes=ran_min)
    facts = JobFacts(
        record=record(NAMES[bucket], state=JobState.RUNNING, start_time=start,
                      elapsed_s=int(ran_min * 60)),
        log=log(text="", size=0, mtime=start),
        summary=summary(line_count=0, last_timestamp=None))
    return judge(facts).report


@pytest.mark.parametrize(("bucket", "ran_min"), [
    ("datagen", 12), ("datagen", 100), ("eval", 12), ("eval", 55)])
def test_an_empty_log_within_the_buckets_stall_window_is_bring_up(
        bucket: str, ran_min: float) -> None:
    report = _report(bucket, ran_min)
    assert "stall" not in report.flags, report.trend
    assert report.flags == ["buffer-filling"] and report.verdict == "buffering", report.flags


@pytest.mark.parametrize(("bucket", "ran_min"), [
    ("datagen", 125), ("eval", 65), ("rl", 25)])
def test_an_empty_log_past_it_is_a_stall(bucket: str, ran_min: float) -> None:
    """Past the window (RL's own bring-up window of 20 min unchanged): stall, diagnose."""
    report = _report(bucket, ran_min)
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert "buffer-filling" not in report.flags
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
