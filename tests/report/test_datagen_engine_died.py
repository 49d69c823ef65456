"""Datagen: an engine that died mid-run leaves its recent trials single-turn.

The realness gate (seed §Datagen: avg_turns ≈ 1.0 is a dead-engine run, do NOT consolidate)
read the whole run's average only. A run of 300 real 5-turn trials whose vLLM engine then
died (every later trial one episode, the agent's next call refused) averages 2.6 turns over
500 and read "Generating", healthy, cleared to consolidate 200 rollouts that are not real.
The last ``pass_rate_trials`` (100) trials are now gated as well.
"""

from __future__ import annotations

from probes.models import JobState
from report.settings import ReportSettings, Thresholds
from tests.report.factories import facts, judge, record, tree, trial


def _run(real: int, dead: int, state: JobState = JobState.RUNNING):  # type: ignore[no-untyped-def]
    trials = [trial(1.0, name=f"r{i}", n_turns=5) for i in range(real)]
    trials += [trial(0.0, name=f"d{i}", n_turns=1, exception_type="APIConnectionError")
               for i in range(dead)]
    job = facts(record("datagen-swe-v3", state=state, exit_code=0), trials=tree(trials))
    return judge(job).report


def test_an_engine_that_died_mid_run_is_dead_now() -> None:
    report = _run(300, 200)
    assert report.metrics["avg_turns"] > 2  # the column stays the run's
    assert "dead-engine" in report.flags, (report.flags, report.trend)
    assert report.verdict == "warning"
    trend = report.trend
    assert trend.startswith("DEAD ENGINE: last 100 trials 1.0") and "…" not in trend, trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_a_finished_run_with_a_dead_tail_is_not_cleared() -> None:
    report = _run(300, 200, JobState.COMPLETED)
    assert "dead-engine" in report.flags
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_a_few_single_turn_trials_are_not_a_dead_engine() -> None:
    assert "dead-engine" not in _run(300, 40).flags  # 60 real trials in the last 100
    report = _run(300, 0)
    assert "dead-engine" not in report.flags and report.verdict == "healthy"


def test_the_window_follows_pass_rate_trials() -> None:
    settings = ReportSettings(thresholds=Thresholds(pass_rate_trials=20))
    trials = [trial(1.0, name=f"r{i}", n_turns=5) for i in range(300)]
    trials += [trial(0.0, name=f"d{i}", n_turns=1) for i in range(25)]
    report = judge(facts(record("datagen-swe-v3"), trials=tree(trials)),
                   settings=settings).report
    assert "dead-engine" in report.flags and "last 20" in report.trend, report.trend
