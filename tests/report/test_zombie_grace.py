"""A run whose trials all just finished, or that just started on a finished tree, is no zombie.

Rulebook (Eval): "all trials done but job RUNNING -> zombie, cancel". Harbor writes the last
trial's result.json and then its job result and exits; a resumed run (``harbor jobs resume``,
a chain successor on the same job dir) starts on a tree whose trials are already done. Both
read ``zombie``, verdict stalled, ``cancel_and_salvage`` at the first sweep after: a cancel
button on a job that is exiting by itself. The silence is timed as the stall's is (the newest
result.json, never before the job's own start) and must pass ``zombie_grace_minutes``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from report.settings import ReportSettings, Thresholds
from tests.report.factories import NOW, judge, tree, trial
from tests.report.test_judge_harbor import _eval


def test_the_last_trial_just_finished_is_no_zombie_yet() -> None:
    t = tree([trial()] * 300, trials_total=300, newest_result_at=NOW - timedelta(minutes=2))
    report = judge(_eval(t)).report
    assert "zombie" not in report.flags and report.verdict == "healthy", report.trend
    assert report.recommendation is None or report.recommendation.action != "cancel_and_salvage"
    assert "all 300 trials done" in report.trend


def test_a_run_that_just_started_on_a_finished_tree_is_no_zombie_yet() -> None:
    t = tree([trial()] * 300, trials_total=300, newest_result_at=NOW - timedelta(hours=5))
    report = judge(_eval(t, rec={"start_time": NOW - timedelta(minutes=3)})).report
    assert "zombie" not in report.flags, report.trend


@pytest.mark.parametrize("start", [timedelta(hours=2), timedelta(minutes=25)])
def test_past_the_grace_it_is_a_zombie(start: timedelta) -> None:
    """Near miss: the same trees once the grace has passed since the later of the two."""
    t = tree([trial()] * 300, trials_total=300, newest_result_at=NOW - timedelta(minutes=20))
    report = judge(_eval(t, rec={"start_time": NOW - start})).report
    assert "zombie" in report.flags and report.verdict == "stalled"
    assert report.recommendation is not None
    assert report.recommendation.action == "cancel_and_salvage"


def test_the_grace_is_configurable() -> None:
    t = tree([trial()] * 300, trials_total=300, newest_result_at=NOW - timedelta(minutes=2))
    quick = ReportSettings(thresholds=Thresholds(zombie_grace_minutes=1))
    assert "zombie" in judge(_eval(t), settings=quick).report.flags
