"""The Kubernetes probe's jobs do not grow with their pod logs (issue 12): 1 MiB and 10 MiB
logs read whole through the API stand-in keep a bounded job, the same for both."""

from __future__ import annotations

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.logs.excerpt import TAIL_CHARS
from probes.models import JobFacts
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.retained import deep_size, rl_log
from tests.probes.test_retained_size import BOUND, READ_ALL, SIZES


async def pod_job(standin: KubeStandIn, cluster: KubernetesCluster, text: str) -> JobFacts:
    """One running job whose pod log is ``text``, collected with a tail budget over it."""
    standin.jobs["rl-agentic-7"] = make_job("rl-agentic-7", active=1)
    standin.pods["rl-agentic-7-0"] = make_pod("rl-agentic-7-0", "rl-agentic-7")
    standin.logs["rl-agentic-7-0"] = text
    whole = cluster.model_copy(update={"tail_bytes": READ_ALL, "tail_lines": 10**7})
    probe = KubernetesProbe(whole, clock=lambda: NOW)
    try:
        (job,) = (await probe.collect()).jobs
    finally:
        await probe.aclose()
    return job


async def test_kubernetes_job_retains_a_bounded_size(standin: KubeStandIn,
                                                     cluster: KubernetesCluster) -> None:
    """The pod log read whole through the API and parsed by the probe: under 100 KB as JSON
    and in memory, within 5 % for 1 MiB and 10 MiB."""
    measured = []
    for nbytes in SIZES:
        text = rl_log(nbytes)
        job = await pod_job(standin, cluster, text)
        assert job.log is not None and job.log.size == len(text.encode())
        assert job.summary is not None and job.summary.faults  # the whole tail was parsed
        assert len(job.log.text) <= TAIL_CHARS and job.log.contexts
        assert job.log.agent_marked and job.log.trials_in_object_store
        measured.append((len(job.model_dump_json()), deep_size(job)))
    assert all(max(pair) < BOUND for pair in measured)
    (json_1, mem_1), (json_10, mem_10) = measured
    assert abs(json_10 - json_1) < 0.05 * json_1 and abs(mem_10 - mem_1) < 0.05 * mem_1
