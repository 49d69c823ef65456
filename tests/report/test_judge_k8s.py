"""Kubernetes-specific judgement: silent wedges (0 pods, vanished record) and fault waits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from probes.kubernetes.markers import FAILED_RANK_LABEL as PROBE_FAILED_RANK_LABEL
from probes.kubernetes.markers import FAILED_RANK_POD_LABEL as PROBE_FAILED_RANK_POD_LABEL
from probes.kubernetes.markers import KIND_LABEL as PROBE_KIND_LABEL
from probes.kubernetes.markers import LAST_FAILURE_LABEL as PROBE_LAST_FAILURE_LABEL
from probes.kubernetes.markers import RECURRING_LABEL as PROBE_RECURRING_LABEL
from probes.kubernetes.markers import RESTARTING_LABEL as PROBE_RESTARTING_LABEL
from probes.kubernetes.markers import SAME_NAME_LABEL as PROBE_SAME_NAME_LABEL
from probes.kubernetes.markers import SIDECAR_HELD_LABEL as PROBE_SIDECAR_HELD_LABEL
from probes.kubernetes.markers import WEDGE_LABEL as PROBE_WEDGE_LABEL
from probes.kubernetes.states import SUSPENDED as PROBE_SUSPENDED
from probes.kubernetes.vanished import VANISHED as PROBE_VANISHED
from probes.kubernetes.views import BRING_UP_WAITING, FAULT_WAITING
from probes.models import JobFacts, JobState
from report.pods import (
    FAILED_RANK_LABEL,
    FAILED_RANK_POD_LABEL,
    FAULT_WAITING_REASONS,
    KIND_LABEL,
    LAST_FAILURE_LABEL,
    RECURRING_LABEL,
    RESTARTING_LABEL,
    SAME_NAME_LABEL,
    SIDECAR_HELD_LABEL,
    SUSPENDED,
    VANISHED,
    WEDGE_LABEL,
)
from tests.report.factories import NOW, facts, healthy_rl, judge, log, points, record


def _k8s(name: str = "rl-run", state: JobState = JobState.RUNNING, **rec: Any) -> JobFacts:
    return facts(record(name, state=state, **rec), log_fetch=log("missing", path=None))


def test_report_spells_the_probe_markers_the_same() -> None:
    """The report's copies of the probe's wedge label, vanished reason and fault waits agree."""
    assert (WEDGE_LABEL, VANISHED) == (PROBE_WEDGE_LABEL, PROBE_VANISHED)
    assert FAULT_WAITING_REASONS == FAULT_WAITING
    assert SUSPENDED == PROBE_SUSPENDED
    assert RECURRING_LABEL == PROBE_RECURRING_LABEL
    assert (SAME_NAME_LABEL, KIND_LABEL) == (PROBE_SAME_NAME_LABEL, PROBE_KIND_LABEL)
    assert SIDECAR_HELD_LABEL == PROBE_SIDECAR_HELD_LABEL
    assert RESTARTING_LABEL == PROBE_RESTARTING_LABEL
    assert LAST_FAILURE_LABEL == PROBE_LAST_FAILURE_LABEL
    assert (FAILED_RANK_LABEL, FAILED_RANK_POD_LABEL) == (PROBE_FAILED_RANK_LABEL,
                                                          PROBE_FAILED_RANK_POD_LABEL)


def test_vanished_job_is_a_silent_wedge() -> None:
    """A record the probe reports as vanished (FAILED, 0 pods, wedge label) is a silent wedge."""
    job = JobFacts(record=record(
        "rl-run", state=JobState.FAILED, reason=VANISHED, pods_total=0, pods_running=0,
        labels={WEDGE_LABEL: VANISHED},
    ))
    report = judge(job).report
    assert "silent-wedge" in report.flags and report.verdict == "failed"
    assert report.trend == "silent wedge: job record disappeared while active"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_no_pods_marker_is_a_silent_wedge() -> None:
    """The probe's ``NoPods`` verdict (RUNNING, 0 pods, wedge label) is a silent wedge."""
    job = _k8s(reason="NoPods", pods_total=0, pods_running=0, labels={WEDGE_LABEL: "no-pods"})
    report = judge(job).report
    assert "silent-wedge" in report.flags and report.verdict == "failed"
    assert "buffer-filling" not in report.flags


def test_ordinary_failure_is_no_wedge() -> None:
    """Near-miss: a Kubernetes job that failed with its pods present is just failed."""
    job = _k8s(state=JobState.FAILED, reason="BackoffLimitExceeded", pods_total=2)
    report = judge(job).report
    assert "silent-wedge" not in report.flags and report.verdict == "failed"


@pytest.mark.parametrize("reason", sorted(FAULT_WAITING))
@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.PENDING])
@pytest.mark.parametrize("name", ["rl-run", "sft-run", "eval-run", "datagen-run", "build-x"])
def test_fault_waiting_reason_is_a_real_fault(reason: str, state: JobState, name: str) -> None:
    """CrashLoopBackOff and friends fail the job in every bucket; they never fill a buffer."""
    job = _k8s(name, state=state, reason=reason, pods_total=1, restarts=7)
    report = judge(job).report
    assert report.verdict == "failed" and "buffer-filling" not in report.flags
    assert report.trend.startswith(reason)
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_crash_loop_with_old_metrics_is_still_a_fault() -> None:
    """Steps logged by an earlier container do not make a crash-looping job healthy."""
    job = facts(record(state=JobState.RUNNING, reason="CrashLoopBackOff", pods_total=1),
                points(healthy_rl()))
    assert judge(job).report.verdict == "failed"


@pytest.mark.parametrize("reason", sorted(BRING_UP_WAITING))
def test_bring_up_waits_stay_buffering(reason: str) -> None:
    """Near-miss: image pulls and container creation are bring-up (seed: self-heal, benign),
    within the image-pull grace (ten minutes after the job started)."""
    job = _k8s(state=JobState.PENDING, reason=reason, pods_total=1,
               start_time=NOW - timedelta(minutes=10))
    report = judge(job).report
    assert report.verdict == "buffering" and "buffer-filling" in report.flags


@pytest.mark.parametrize("name", ["rl-run", "sft-run", "eval-run", "datagen-run", "build-x"])
def test_a_failed_rank_of_a_running_job_is_a_warning_in_every_bucket(name: str) -> None:
    """A running job whose rank failed (the probe's failed-rank label) is a warning naming it,
    with a diagnose, however healthy its rank 0's metrics; once a retry failed alike the
    recurring failure is what the trend says."""
    failed = "rank 3 failed (Error, exit 1): RuntimeError: bad shard; no retry yet"
    labels = {FAILED_RANK_LABEL: failed, FAILED_RANK_POD_LABEL: "pod/x-3"}
    job = facts(record(name, state=JobState.RUNNING, reason="RankFailed", pods_total=4,
                       labels=labels), points(healthy_rl()))
    report = judge(job).report
    assert report.verdict == "warning" and report.trend.startswith("rank 3 failed (Error, exit 1)")
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "pod/x-3" in report.recommendation.why
    recurring = facts(record(name, state=JobState.RUNNING, reason="RankFailed", pods_total=4,
                             labels={**labels, RECURRING_LABEL: "2 attempts: Error, exit 1"}))
    assert judge(recurring).report.trend.startswith("RECURRING (2 attempts")
    ended = facts(record(name, state=JobState.FAILED, pods_total=4, labels=labels))
    assert judge(ended).report.verdict == "failed"
