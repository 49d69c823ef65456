"""A JobSet list that fails on its own (HTTP 500 after its retry, a throttle that does not lift,
an answer that is no Kubernetes object) while the Job and pod lists answer: the batch/v1 Jobs
are still reported and the cluster is ok, its detail saying JobSets were not listed and why, as
for a 403 on jobsets.

Found through ``jobtables sweep`` against the API stand-in: a 500 on ``jobsets`` alone (an
undecodable JobSet in etcd, a broken CRD's storage) made the whole cluster ``unreachable``
and every Job of it was lost from the report, while the same list refused by RBAC (403) kept
them. The pod list failing still makes the cluster unreachable (the near miss): without pods
no Job's state can be read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.vanished import VANISHED
from tests.probes.kubernetes.builders import make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_forbidden import add_running, sweep


@pytest.mark.parametrize(("fault", "says"), [
    ("500", "HTTP 500 Internal Server Error: etcdserver: request timed out"),
    ("429", "HTTP 429 Too Many Requests"),
    ("html", "the answer is no Kubernetes object"),
])
async def test_a_failing_jobset_list_keeps_the_jobs(standin: KubeStandIn, tmp_path: Path,
                                                    fault: str, says: str) -> None:
    add_running(standin, "sft-a")
    standin.faults["jobsets"] = fault
    report = await sweep(standin, tmp_path)
    beta = report["clusters"][0]
    assert (beta["name"], beta["status"]) == ("beta", "ok"), beta["detail"]
    assert beta["detail"].startswith("JobSets not listed: list jobsets: "), beta["detail"]
    assert says in beta["detail"], beta["detail"]
    jobs = [job for job in report["jobs"] if job["cluster"] == "beta"]
    assert [(job["job_id"], job["state"]) for job in jobs] == [("sft-a", "RUNNING")]


async def test_a_failing_pod_list_is_still_unreachable(standin: KubeStandIn,
                                                       tmp_path: Path) -> None:
    """Near miss: the pods (the state poll) cannot be listed: the cluster is unreachable."""
    add_running(standin, "sft-a")
    standin.faults["pods"] = "500"
    report = await sweep(standin, tmp_path)
    beta = report["clusters"][0]
    assert beta["status"] == "unreachable" and "list pods: HTTP 500" in beta["detail"]


async def test_a_jobset_seen_before_is_not_vanished_while_unlisted(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A running JobSet, then a sweep whose JobSet list answers 500: no silent wedge is made
    up for it (it was not seen, not seen gone); the next good sweep finds it running."""
    assert standin.jobsets is not None
    standin.jobsets["rl-gang"] = make_jobset("rl-gang")
    standin.jobs["rl-gang-workers-0"] = make_job("rl-gang-workers-0", active=1,
                                                 owner_jobset="rl-gang")
    standin.pods["rl-gang-workers-0-0"] = make_pod(
        "rl-gang-workers-0-0", "rl-gang-workers-0", jobset="rl-gang", index=0,
        replicated_job=("workers", 0))
    standin.logs["rl-gang-workers-0-0"] = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"
    first = await probe.collect()
    assert [j.record.job_id for j in first.jobs] == ["rl-gang"]
    standin.faults["jobsets"] = "500"
    unlisted = await probe.collect()
    assert unlisted.status == "ok", unlisted.detail
    assert all(j.record.reason != VANISHED for j in unlisted.jobs), unlisted.jobs
    standin.faults.pop("jobsets")
    again = await probe.collect()
    assert [(j.record.job_id, j.record.state.value) for j in again.jobs] == [
        ("rl-gang", "RUNNING")]
