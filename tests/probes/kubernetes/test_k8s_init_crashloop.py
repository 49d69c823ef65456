"""An init container in a crash loop (a Job with ``restartPolicy: OnFailure``): the kubelet
restarts it, the pod stays Pending, its status reads ``waiting: CrashLoopBackOff`` with the
failed run in ``lastState.terminated`` (kubelet ``validateContainerLogStatus`` then serves
that run's log). Through the real probe against the API stand-in.

The init container was not taken for failed (only a ``state.terminated`` one was), and a
Pending pod's log was never read: ``jobtables job`` said 'Log: not found' and the Trend
'RECURRING (4 attempts: Error, exit 1)', the error its log gives unsaid.
"""

from __future__ import annotations

from kubernetes_asyncio.client import (
    V1Container,
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
)

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge

FETCH_LOG = ("fetching s3://datasets/prompts\nTraceback (most recent call last):\n"
             "  File \"fetch.py\", line 9, in <module>\n"
             "botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling "
             "the GetObject operation: Access Denied\n")


def _init_crash_loop(standin: KubeStandIn, name: str, *, restarts: int = 3) -> None:
    standin.jobs[name] = make_job(name, active=1)
    standin.jobs[name].spec.template.spec.restart_policy = "OnFailure"
    pod = make_pod(f"{name}-0", name, phase="Pending", state="waiting",
                   reason="PodInitializing")
    pod.spec.restart_policy = "OnFailure"
    pod.spec.init_containers = [V1Container(name="fetch-data", image="amazon/aws-cli")]
    pod.status.init_container_statuses = [V1ContainerStatus(
        name="fetch-data", image="amazon/aws-cli", image_id="sha256:def", ready=False,
        restart_count=restarts,
        state=V1ContainerState(waiting=V1ContainerStateWaiting(
            reason="CrashLoopBackOff",
            message="back-off 40s restarting failed container=fetch-data")),
        last_state=V1ContainerState(terminated=V1ContainerStateTerminated(
            exit_code=1, reason="Error", container_id="containerd://abc")))]
    standin.pods[f"{name}-0"] = pod
    standin.logs[f"{name}-0/fetch-data"] = FETCH_LOG


async def test_an_init_crash_loop_reads_the_init_containers_log(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Its log is the init container's last run; the Trend and the diagnose quote the error
    it printed."""
    _init_crash_loop(standin, "datagen-init")
    [job] = (await probe.collect()).jobs
    assert job.record.exit_code == 1
    assert job.log is not None and job.log.status == "ok", job.log
    assert job.log.path == "pod/datagen-init-0 -c fetch-data"
    report = judge(job).report
    assert "recurring-failure" in report.flags
    assert "traceback: ClientErr" in report.trend, report.trend
    assert report.recommendation is not None
    assert "(AccessDenied)" in report.recommendation.why, report.recommendation
