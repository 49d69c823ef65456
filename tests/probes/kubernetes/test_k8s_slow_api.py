"""A slow API server (each log read answered, but slowly) against the cluster's sweep budget
(``timeout_s``): the budget holds, and what ran out is said as the budget's.

Replayed against the API stand-in (log reads answered after 1 s, ``timeout_s`` 2.5 s,
``request_timeout_s`` 5 s, every pod on one node): the read the budget cut short was taken
for a silent kubelet: 'not fetched: node gpu-node-07 did not answer: read log of pod/...: no
answer within 0.4s (timeout)' on that node's other jobs, a healthy node blamed.
"""

from __future__ import annotations

from pathlib import Path

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2 - critic/score/mean:0.4\n"


async def test_a_budget_cut_read_blames_the_budget_not_the_node(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """Jobs whose logs the budget left unread say the sweep budget ran out; none says its
    node did not answer; the reads that got their answer are parsed."""
    for i in range(5):
        standin.jobs[f"rl-{i}"] = make_job(f"rl-{i}", active=1)
        standin.pods[f"rl-{i}-0"] = make_pod(f"rl-{i}-0", f"rl-{i}")
        standin.logs[f"rl-{i}-0"] = VERL_LOG
    standin.faults["log"] = "slow"
    standin.slow_s = 1.0
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    cluster = KubernetesCluster(name="beta", kubeconfig=str(kubeconfig), namespace="ml",
                                request_timeout_s=5.0, timeout_s=2.5)
    probe = KubernetesProbe(cluster, clock=lambda: NOW)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "ok", facts.detail
    unread = [job.log.error or "" for job in facts.jobs
              if job.log is not None and job.log.status == "failed"]
    assert unread, "a 2.5 s budget cannot hold five 1 s reads"
    for error in unread:
        assert "did not answer" not in error and "no answer within" not in error, error
        assert "sweep budget of 2.5s exhausted" in error, error
