"""A container the kubelet keeps restarting, caught while it runs again: between two crashes
of a crash loop the container is Running (its backoff not reset), and the job must not read
healthy one sweep and failed the next."""

from __future__ import annotations

from datetime import timedelta

from kubernetes_asyncio.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
)

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_probe import only_job
from tests.report.factories import judge

VERL_LOG = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
    for s in (1, 2, 3)
)


def _restarted(standin: KubeStandIn, name: str, *, restarts: int, running_for: timedelta,
               reason: str = "Error", code: int = 1) -> None:
    standin.jobs[name] = make_job(name, active=1)
    pod = make_pod(f"{name}-0", name, restarts=restarts, created=NOW - timedelta(hours=2))
    status = pod.status.container_statuses[0]
    status.state = V1ContainerState(running=V1ContainerStateRunning(
        started_at=NOW - running_for))
    status.last_state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=code, reason=reason,
        message="RuntimeError: CUDA error: an illegal memory access was encountered"))
    standin.pods[f"{name}-0"] = pod
    standin.logs[f"{name}-0"] = VERL_LOG


async def test_a_crash_loop_caught_running_is_still_a_recurring_failure(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Restarted 3 times, the last run failed (Error, exit 1), running again for 2 minutes
    (under the kubelet's 10-minute backoff reset): RECURRING (3 attempts), a warning with a
    diagnose. It read healthy: the same pod read 'failed, RECURRING' a minute earlier, while
    it waited in CrashLoopBackOff."""
    _restarted(standin, "rl-loop", restarts=3, running_for=timedelta(minutes=2))
    report = judge(only_job(await probe.collect(), "rl-loop")).report
    assert "recurring-failure" in report.flags, report.trend
    assert report.verdict == "warning"
    assert report.trend.startswith("RECURRING (3 attempts: Error, exit 1)"), report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


async def test_a_container_that_recovered_or_restarted_once_is_not_recurring(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Near-misses: restarted 3 times but running for an hour since (the kubelet reset its
    backoff: it recovered); restarted once (one failure is no repetition)."""
    _restarted(standin, "rl-recovered", restarts=3, running_for=timedelta(hours=1))
    _restarted(standin, "rl-once", restarts=1, running_for=timedelta(minutes=2))
    facts = await probe.collect()
    for name in ("rl-recovered", "rl-once"):
        report = judge(only_job(facts, name)).report
        assert "recurring-failure" not in report.flags, (name, report.trend)
        assert report.verdict != "failed", name


async def test_a_recurring_failure_with_no_log_quotes_its_termination_message(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """An init container crash-looping (restartPolicy OnFailure: the pod stays Pending, no
    log is read) with a termination message: the trend and the diagnose quote it. They read
    'RECURRING (4 attempts: Error, exit 1)' alone: nothing said why. A log's own error still
    comes first when there is one (the other tests)."""
    from kubernetes_asyncio.client import V1ContainerStateWaiting, V1ContainerStatus

    standin.jobs["sft-init"] = make_job("sft-init", active=1)
    pod = make_pod("sft-init-0", "sft-init", phase="Pending", state="waiting",
                   reason="PodInitializing")
    pod.status.init_container_statuses = [V1ContainerStatus(
        name="fetch-data", image="busybox", image_id="sha256:b", ready=False, restart_count=3,
        state=V1ContainerState(waiting=V1ContainerStateWaiting(reason="CrashLoopBackOff")),
        last_state=V1ContainerState(terminated=V1ContainerStateTerminated(
            exit_code=1, reason="Error", message="s3://bucket/data: AccessDenied")))]
    standin.pods["sft-init-0"] = pod
    report = judge(only_job(await probe.collect(), "sft-init")).report
    assert "recurring-failure" in report.flags
    assert report.trend.startswith("RECURRING (4 attempts: Error, exit 1): s3://bucket/data"), \
        report.trend  # the Trend cell is cut; the diagnose holds it whole
    assert report.recommendation is not None
    assert "AccessDenied" in report.recommendation.why
