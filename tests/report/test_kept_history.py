"""A sweep's kept details: an unflagged job keeps only its last points once judged (the bot's
200-point windows were most of a kept job's memory), a flagged one its whole window."""

from __future__ import annotations

from report.judge import build_report
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, healthy_rl, points, record


def test_unflagged_jobs_keep_their_last_points_flagged_jobs_all() -> None:
    calm = facts(record("rl-calm", "1"), points(healthy_rl(60)))
    dead = healthy_rl(60, reward=[0.4] * 40 + [0.0] * 20)  # flat at 0: dead-rollouts
    sick = facts(record("rl-dead", "2"), points(dead))
    sweep = [cluster("alpha", [calm, sick])]
    whole_report, whole = build_report(sweep, settings=ReportSettings(), now=NOW)
    kept_report, kept = build_report(sweep, settings=ReportSettings(), now=NOW, kept_history=16)
    assert kept_report == whole_report  # judging saw every point either way
    assert not whole[("alpha", "1")].report.flags
    assert whole[("alpha", "2")].report.flags
    assert kept[("alpha", "1")].history == whole[("alpha", "1")].history[-16:]
    assert len(whole[("alpha", "1")].history) == 60
    assert kept[("alpha", "2")] == whole[("alpha", "2")]
