"""One sandbox refused at a fresh run's start is not "sandboxes are not starting".

Replayed on the real SLURM 22.05 as jtuser (eval-qwen3-x-tbench-onerefused): three minutes into
an eval, one trial in Harbor's format had ended at once, its sandbox refused (``DaytonaError:
Failed to create sandbox: 401 Unauthorized``: no agent, no verifier), while 15 ran, the engine
answering them. A refusal ends in seconds, so it was every trial finished: ``jobtables job``
read ``warning [instant-fail] NEVER STARTED: 1/1 trials (DaytonaError)``, diagnose "sandboxes
are not starting: check the environment provider". The rule is half of the recent trials; a
running run's needs at least ``NEVER_STARTED_MIN`` (3, as the auth rule's and the
never-started note's count) such trials. A finished run's stands on any count.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobState
from report.models import JobReport
from tests.report.factories import NOW, facts, judge, record, tree, trial


def _report(name: str, n: int, state: JobState = JobState.RUNNING) -> JobReport:
    t0 = NOW - timedelta(minutes=3)
    trials = [trial(None, n_output_tokens=None, n_turns=None, exception_type="DaytonaError",
                    auth_failure=True, started_at=t0,
                    finished_at=t0 + timedelta(seconds=3))] * n
    rec = record(name, state=state, start_time=NOW - timedelta(minutes=4), elapsed_s=240)
    return judge(facts(rec, trials=tree(trials, trials_total=300,
                                        newest_result_at=t0 + timedelta(seconds=3)))).report


NAMES = ["eval-qwen3-x-tbench-onerefused", "datagen-tb-onerefused"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [1, 2])
def test_a_running_runs_first_refused_sandboxes_are_not_an_outage(name: str, n: int) -> None:
    report = _report(name, n)
    assert "instant-fail" not in report.flags, report.trend
    assert report.verdict == "healthy", report.trend


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("n", "state"), [(3, JobState.RUNNING), (1, JobState.COMPLETED)])
def test_three_or_a_finished_run_are_judged(name: str, n: int, state: JobState) -> None:
    report = _report(name, n, state)
    assert "instant-fail" in report.flags, report.trend
