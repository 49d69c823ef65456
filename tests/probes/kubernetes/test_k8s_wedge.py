"""Rulebook "Empty and absent" on Kubernetes: a started job with 0 active pods and no pods.

The Jobs are real ``batch/v1`` objects (the client's own models) served by the API stand-in and
read by the real probe; the probe's facts are judged by ``report.judge``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from probes.kubernetes.markers import WEDGE_LABEL
from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from report.judge import build_report
from report.settings import ReportSettings
from tests.probes.kubernetes.builders import NOW, add_namesakes, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn


@pytest.mark.parametrize(
    ("job", "wedged"),
    [
        ((0, NOW - timedelta(hours=2), False), True),  # started, 0 active, no pod at all
        ((1, NOW - timedelta(hours=2), False), True),  # active by the status, no pod
        ((0, NOW - timedelta(minutes=2), False), False),  # the controller is creating the pod
        ((0, None, False), False),  # never started: queued, not wedged
        ((1, NOW - timedelta(hours=2), True), False),  # a pod exists
    ],
)
async def test_started_job_without_pods_is_a_silent_wedge(
    standin: KubeStandIn, probe: KubernetesProbe, job: tuple[int, datetime | None, bool],
    wedged: bool,
) -> None:
    """Terminal silent wedge (failed, out of the buffer table) once started with no pods.
    ``job``: the Job's active count, its start time, and whether a pod exists."""
    active, started, with_pod = job
    standin.jobs["rl-grpo-x"] = make_job("rl-grpo-x", active=active, started=started)
    if with_pod:
        standin.pods["rl-grpo-x-0"] = make_pod("rl-grpo-x-0", "rl-grpo-x")
        standin.logs["rl-grpo-x-0"] = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"
    facts = await probe.collect()
    [seen] = [j for j in facts.jobs if j.record.job_id == "rl-grpo-x"]
    assert seen.record.pods_total == (1 if with_pod else 0)
    report, _ = build_report([facts], settings=ReportSettings(), now=NOW)
    [row] = report.jobs
    assert ("silent-wedge" in row.flags) is wedged
    if wedged:
        assert row.verdict == "failed" and "buffer-filling" not in row.flags
        assert row.recommendation is not None and row.recommendation.action == "diagnose"
    elif not with_pod:
        assert row.state is JobState.PENDING and row.verdict == "buffering"


@pytest.mark.parametrize("condition", [True, False])
async def test_a_suspended_job_that_had_started_is_queued_not_wedged(
    standin: KubeStandIn, probe: KubernetesProbe, condition: bool,
) -> None:
    """Kueue preempted a running Job: ``spec.suspend`` is true, its pods are gone and its
    ``status.startTime`` is still set (the Suspended condition may lag). It waits for
    admission again: PENDING in the buffer table, never a terminal silent wedge."""
    standin.jobs["rl-requeued"] = make_job(
        "rl-requeued", suspend=True, started=NOW - timedelta(hours=3),
        labels={"kueue.x-k8s.io/queue-name": "team-q"},
        conditions=(("Suspended", "JobSuspended"),) if condition else ())
    facts = await probe.collect()
    report, _ = build_report([facts], settings=ReportSettings(), now=NOW)
    [row] = report.jobs
    assert (row.state, row.verdict) == (JobState.PENDING, "buffering")
    assert "silent-wedge" not in row.flags and "buffer-filling" in row.flags


async def test_a_jobset_gone_beside_its_namesake_job_reads_vanished(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A running JobSet deleted while a Job of its name stays: the JobSet vanished (the
    silent-wedge signature). Both had the id ``rl-dup``: the Job's presence hid the loss."""
    add_namesakes(standin)
    first = await probe.collect()
    assert sorted(j.record.job_id for j in first.jobs) == ["jobset/rl-dup", "rl-dup"]
    del standin.jobsets["rl-dup"], standin.jobs["rl-dup-workers-0"]
    del standin.pods["rl-dup-workers-0-0"]
    second = {j.record.job_id: j.record for j in (await probe.collect()).jobs}
    assert second["jobset/rl-dup"].labels.get(WEDGE_LABEL) == "vanished", second
    assert second["rl-dup"].state is JobState.RUNNING


async def test_a_jobsets_namesake_job_gone_is_one_vanished_row(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The running Job ``rl-dup`` deleted beside the JobSet ``jobset/rl-dup``: the Job reads
    vanished under its id, the JobSet keeps its id that sweep (no two rows of one id), and
    the next sweep it takes the bare name without reading vanished itself."""
    add_namesakes(standin)
    await probe.collect()
    del standin.jobs["rl-dup"], standin.pods["rl-dup-0"]
    second = [j.record for j in (await probe.collect()).jobs]
    assert sorted((r.job_id, r.labels.get(WEDGE_LABEL)) for r in second) == [
        ("jobset/rl-dup", None), ("rl-dup", "vanished")]
    third = [j.record for j in (await probe.collect()).jobs]
    assert [(r.job_id, r.labels.get(WEDGE_LABEL)) for r in third] == [("rl-dup", None)]
