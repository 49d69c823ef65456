"""A lone collapse signal on a run that has ended is not "watching": there is nothing left
to watch. A helper's dry-run read a COMPLETED agentic run (6 trials, none passed) as
"1 signal, watching: pass-rate 0%"; a live run keeps the word."""

from __future__ import annotations

from datetime import timedelta

from probes.models import JobState
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, tree, trial


def _run(state: JobState) -> str:
    rec = record("rl-skyrl-agentic", state=state,
                 end_time=None if state is JobState.RUNNING else NOW - timedelta(minutes=5))
    job = facts(rec, points(healthy_rl(12)), trials=tree([trial(0.0)] * 6))
    return judge(job).report.trend


def test_a_lone_signal_is_watched_while_the_run_lives() -> None:
    assert _run(JobState.RUNNING).startswith("1 signal, watching: pass-rate 0%")


def test_a_lone_signal_at_a_runs_end_is_not_watched() -> None:
    trend = _run(JobState.COMPLETED)
    assert "watching" not in trend
    assert trend.startswith("1 signal at its end: pass-rate 0%"), trend
