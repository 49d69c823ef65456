"""A Job's podFailurePolicy decides which failed pods count toward backoffLimit (follow-up of
6260d73).

6260d73 reads a ``restartPolicy: Never`` Job FAILED ``BackoffLimitExceeded`` once its failed
pods listed pass ``backoffLimit`` (the controller's ``status.failed`` lagging the newest
failure). But a pod failure that a ``podFailurePolicy`` rule ``Ignore``s is not counted
(Kubernetes: "the counter towards the .spec.backoffLimit is not incremented and a replacement
Pod is created"): the Kubernetes docs' own example for disruptions, ``backoffLimit: 0`` with
``Ignore`` on ``DisruptionTarget``, read FAILED BackoffLimitExceeded the moment its pod was
evicted, while the controller was creating its replacement and the Job went on. With a
podFailurePolicy the controller's own count (``status.failed``) is what is compared."""

from __future__ import annotations

from datetime import timedelta

from kubernetes_asyncio.client import (
    V1PodCondition,
    V1PodFailurePolicy,
    V1PodFailurePolicyOnPodConditionsPattern,
    V1PodFailurePolicyRule,
)

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_probe import only_job
from tests.report.factories import judge

_IGNORE_DISRUPTIONS = V1PodFailurePolicy(rules=[V1PodFailurePolicyRule(
    action="Ignore",
    on_pod_conditions=[V1PodFailurePolicyOnPodConditionsPattern(type="DisruptionTarget",
                                                               status="True")])])


def _evicted(standin: KubeStandIn, name: str, *, failed: int, policy: bool) -> None:
    """backoffLimit 0, restartPolicy Never: the pod was evicted (DisruptionTarget), its
    replacement pending; ``status.failed`` as the controller counted it."""
    standin.jobs[name] = make_job(name, active=0, failed=failed, backoff_limit=0)
    if policy:
        standin.jobs[name].spec.pod_failure_policy = _IGNORE_DISRUPTIONS
    said = "The node was low on resource: memory."
    pod = make_pod(f"{name}-a", name, phase="Failed", state="terminated", reason="Error",
                   created=NOW - timedelta(hours=1))
    pod.status.reason, pod.status.message = "Evicted", said
    pod.status.conditions = [V1PodCondition(type="DisruptionTarget", status="True",
                                            reason="TerminationByKubelet", message=said)]
    standin.pods[f"{name}-a"] = pod
    standin.pods[f"{name}-b"] = make_pod(f"{name}-b", name, phase="Pending", state="waiting",
                                         reason="ContainerCreating",
                                         created=NOW - timedelta(seconds=20))


async def test_an_ignored_eviction_is_no_failure_past_the_backoff_limit(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The docs' Ignore-on-DisruptionTarget Job, evicted: status.failed 0, its replacement
    coming: a live job restarting, not FAILED BackoffLimitExceeded."""
    _evicted(standin, "rl-spot", failed=0, policy=True)
    job = only_job(await probe.collect(), "rl-spot")
    assert job.record.state is not JobState.FAILED, job.record.reason
    assert judge(job).report.verdict != "failed"


async def test_without_a_policy_the_eviction_still_ends_the_job(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The same Job with no podFailurePolicy: the eviction counts, backoffLimit 0 is passed,
    FAILED (as 6260d73 reads it, the controller's count lagging)."""
    _evicted(standin, "rl-plain", failed=0, policy=False)
    job = only_job(await probe.collect(), "rl-plain")
    assert (job.record.state, job.record.reason) == (JobState.FAILED, "BackoffLimitExceeded")


async def test_with_a_policy_the_controllers_count_still_ends_the_job(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A failure the policy counts (status.failed 1 > backoffLimit 0): FAILED."""
    _evicted(standin, "rl-counted", failed=1, policy=True)
    job = only_job(await probe.collect(), "rl-counted")
    assert (job.record.state, job.record.reason) == (JobState.FAILED, "BackoffLimitExceeded")
