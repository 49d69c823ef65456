"""A sweep's kept details: a job keeps only its last points once judged (the bot's 200-point
windows were most of a kept job's memory), unless its collapse alert or incident file quotes
the whole window (a collapse, a failure)."""

from __future__ import annotations

from probes.models import JobState
from report.judge import build_report
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, healthy_rl, points, record, with_last


def test_jobs_keep_their_last_points_a_collapse_or_failure_all() -> None:
    calm = facts(record("rl-calm", "1"), points(healthy_rl(60)))
    dead = facts(record("rl-dead", "2"),
                 points(healthy_rl(60, reward=[0.4] * 40 + [0.0] * 20)))  # dead-rollouts
    collapsing = facts(record("rl-sick", "3"), points(healthy_rl(
        60, grad_norm=with_last([0.2] * 59, 3.2), entropy=with_last([0.5] * 59, 0.19))))
    failed = facts(record("rl-failed", "4", JobState.FAILED, exit_code=1),
                   points(healthy_rl(60)))
    sweep = [cluster("alpha", [calm, dead, collapsing, failed])]
    whole_report, whole = build_report(sweep, settings=ReportSettings(), now=NOW)
    kept_report, kept = build_report(sweep, settings=ReportSettings(), now=NOW, kept_history=16)
    assert kept_report == whole_report  # judging saw every point either way
    dead_flags = whole[("alpha", "2")].report.flags
    assert dead_flags and "collapse" not in dead_flags
    assert "collapse" in whole[("alpha", "3")].report.flags
    assert whole[("alpha", "4")].report.verdict == "failed"
    for job in ("1", "2"):
        assert len(whole[("alpha", job)].history) == 60
        assert kept[("alpha", job)].history == whole[("alpha", job)].history[-16:]
    for job in ("3", "4"):
        assert kept[("alpha", job)] == whole[("alpha", job)]
