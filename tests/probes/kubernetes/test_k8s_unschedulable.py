"""A pod the scheduler cannot place: its ``PodScheduled`` condition's message says why
(kube-scheduler's ``0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption:
...``), and the buffer table's note says it.

Replayed against the API stand-in: the row read 'Pending (Unschedulable)', the one signal
that matters (which resource no node has) left out; ``kubectl describe`` shows it.
"""

from __future__ import annotations

from kubernetes_asyncio.client import V1PodCondition

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge

SCHEDULER = ("0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had untolerated "
             "taint {node.kubernetes.io/unreachable: }. preemption: 0/4 nodes are available: 4 "
             "No preemption victims found for incoming pod.")


async def test_an_unschedulable_pod_says_why(standin: KubeStandIn,
                                             probe: KubernetesProbe) -> None:
    """The reason carries the scheduler's message up to its preemption part."""
    standin.jobs["rl-wait"] = make_job("rl-wait", active=1, started=None)
    pod = make_pod("rl-wait-0", "rl-wait", phase="Pending", state="running")
    pod.status.container_statuses = None
    pod.status.start_time = None
    pod.spec.node_name = None
    pod.status.conditions = [V1PodCondition(type="PodScheduled", status="False",
                                            reason="Unschedulable", message=SCHEDULER)]
    standin.pods["rl-wait-0"] = pod
    [job] = (await probe.collect()).jobs
    assert job.record.state is JobState.PENDING
    assert job.record.reason == ("Unschedulable: 0/4 nodes are available: 2 Insufficient "
                                 "nvidia.com/gpu, 2 node(s) had untolerated taint "
                                 "{node.kubernetes.io/unreachable: }")
    report = judge(job).report
    assert "buffer-filling" in report.flags
    assert report.trend.startswith("Pending (Unschedulable: 0/4 nodes are available"), report.trend
