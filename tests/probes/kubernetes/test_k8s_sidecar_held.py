"""A pod held running by a sidecar after the job's own container ended (a log shipper run as
a plain container, not a native sidecar): the pod stays Running, the Job never ends.

Replayed against the API stand-in (containers trainer and fluent-bit, the trainer
terminated an hour ago): a trainer that finished (exit 0) read RUNNING healthy, one that
died with a traceback (exit 1) RUNNING with a warning, as if still training; the pod and its
GPUs stay held until someone deletes the Job.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes_asyncio.client import V1ContainerState, V1ContainerStateTerminated

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge

VERL_LOG = "".join(f"step:{s} - actor/entropy:0.5 - actor/grad_norm:0.2 - "
                   "critic/score/mean:0.4\n" for s in range(1, 9))


def _held(standin: KubeStandIn, name: str, reason: str, code: int,
          containers: tuple[str, ...] = ("trainer", "fluent-bit")) -> None:
    standin.jobs[name] = make_job(name, active=1, containers=containers)
    pod = make_pod(f"{name}-0", name, containers=containers)
    ended = pod.status.container_statuses[0]
    ended.ready = False
    ended.state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=code, reason=reason, started_at=NOW - timedelta(hours=2),
        finished_at=NOW - timedelta(hours=1)))
    standin.pods[f"{name}-0"] = pod
    standin.logs[f"{name}-0/{containers[0]}"] = VERL_LOG + (
        "Traceback (most recent call last):\nRuntimeError: boom\n" if code else "")


@pytest.mark.parametrize("case", [
    ("Completed", 0, JobState.COMPLETING, "warning"),
    ("Error", 1, JobState.FAILED, "failed"),
    ("OOMKilled", 137, JobState.OUT_OF_MEMORY, "failed"),
], ids=["completed", "error", "oom"])
async def test_a_pod_a_sidecar_holds_is_no_running_job(
        standin: KubeStandIn, probe: KubernetesProbe,
        case: tuple[str, int, JobState, str]) -> None:
    """The job's container ended: its end is the job's state, and the row says the sidecar
    holds the pod (the Job never ends on its own) with a diagnose to delete it."""
    reason, code, state, verdict = case
    _held(standin, "rl-held", reason, code)
    [job] = (await probe.collect()).jobs
    assert job.record.state is state, job.record
    report = judge(job).report
    assert report.verdict == verdict, report
    assert report.recommendation is not None
    said = f"{report.trend} {report.recommendation.why}"
    assert "fluent-bit" in said and "still running" in said, said


async def test_two_job_containers_one_ended_is_still_running(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Near miss: the container still running is no sidecar (a second job container): the
    pod runs the job, as before."""
    _held(standin, "rl-two", "Completed", 0, containers=("trainer", "reward-model"))
    [job] = (await probe.collect()).jobs
    assert job.record.state is JobState.RUNNING
    assert not any(key.endswith("sidecar-held") for key in job.record.labels)
