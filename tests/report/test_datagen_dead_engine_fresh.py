"""A fresh datagen run's first single-turn trials are too few to call its engine dead.

Replayed on the real SLURM 22.05 (datagen-tb-fresh1turn, as jobtables): four minutes into a
datagen run, 2 trials in Harbor's format had ended after one turn (``n_episodes`` 1: the agent
gave up at once) while 14 ran, the engine answering them (vLLM ``Running: 14 reqs``, 1500
tokens/s, a ``POST ... 200 OK`` every 30 s). The quickest trials end first, so they were
every trial finished: ``jobtables job`` read ``warning [dead-engine] DEAD ENGINE: avg_turns
1.00; do NOT consolidate``, diagnose, on 2 trials (one 1-turn trial reads alike). The realness
gate reads the run's avg_turns; a running run's needs as many trials with a turn count as its
last-100 gate does (``_RECENT_TURNS_MIN``, 10). A finished run's gate stands on any count.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobState
from report.models import JobReport
from tests.report.factories import NOW, facts, judge, record, tree, trial


def _report(n: int, state: JobState = JobState.RUNNING, total: int = 600) -> JobReport:
    rec = record("datagen-tb-fresh1turn", state=state,
                 start_time=NOW - timedelta(minutes=6), elapsed_s=360)
    trials = [trial(0.0, n_turns=1, n_output_tokens=300)] * n
    return judge(facts(rec, trials=tree(trials, trials_total=total))).report


@pytest.mark.parametrize("n", [1, 2, 9])
def test_a_running_runs_first_single_turn_trials_are_not_a_dead_engine(n: int) -> None:
    report = _report(n)
    assert "dead-engine" not in report.flags, report.trend
    assert report.verdict == "healthy", report.trend
    assert report.metrics["avg_turns"] == 1.0  # the column still shows the run's mean


@pytest.mark.parametrize(("n", "state"), [
    (10, JobState.RUNNING),      # enough trials: the gate fires
    (2, JobState.COMPLETED),     # a finished run: what it generated is all there is
])
def test_enough_trials_or_a_finished_run_is_judged(n: int, state: JobState) -> None:
    report = _report(n, state)
    assert "dead-engine" in report.flags, report.trend


def test_a_running_run_whose_every_trial_ended_single_turn_is_a_dead_engine() -> None:
    """Near miss (review of 7219f84): the quickest-first bias holds only while trials are still
    to end. A running openhands chunk of 8 trials, all 8 ended after one agent step (its
    engine dead: tests/probes/slurm/test_e2e_harbor_agent_layouts.py's 'dead' replay, whose
    job goes on to its upload), has nothing slower still to come: the gate stands on 8."""
    report = _report(8, total=8)
    assert "dead-engine" in report.flags, report.trend
    assert report.verdict == "warning", report.trend
