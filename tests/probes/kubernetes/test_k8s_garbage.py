"""An answer that is no Kubernetes object (a proxy's HTML error page with a 200, JSON cut
mid-object, a list of non-objects) is that cluster's problem, said in words: ``unreachable``
naming the call and what came back, never a probe crash with a traceback."""

from __future__ import annotations

import pytest

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn


@pytest.mark.parametrize("route", ["jobs", "jobsets", "pytorchjobs", "pods"])
@pytest.mark.parametrize("garbage", ["html", "truncated", "wrong-shape", "nested"])
async def test_garbage_list_answer_is_unreachable_with_reason(
        standin: KubeStandIn, probe: KubernetesProbe, route: str, garbage: str) -> None:
    """A list answered with garbage: the cluster is unreachable, its detail names the list
    and says the answer was no Kubernetes object (it raised ValueError out of the probe:
    'probe crashed' with a traceback on stderr, detail the client's 'Invalid value for
    `items`, must not be `None`'); garbage on the JobSet list alone keeps the Jobs, the
    detail saying why JobSets were not listed (test_k8s_jobsets_failing), on the PyTorchJob
    list alone as well (test_k8s_pytorchjob)."""
    standin.pytorchjobs = {}
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.faults[route] = garbage
    facts = await probe.collect()
    assert facts.detail is not None
    if route in {"jobsets", "pytorchjobs"}:  # the Jobs and pods answered: the Jobs are kept
        kinds = {"jobsets": "JobSets", "pytorchjobs": "PyTorchJobs"}[route]
        assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ["sft-a"]
        assert facts.detail.startswith(f"{kinds} not listed: list {route}: the answer is no "
                                       "Kubernetes object"), facts.detail
        return
    assert facts.status == "unreachable" and facts.jobs == ()
    assert facts.detail.startswith(f"list {route}: the answer is no Kubernetes object"), \
        facts.detail


async def test_garbage_in_one_log_is_text(standin: KubeStandIn,
                                          probe: KubernetesProbe) -> None:
    """Near-miss: a pod log is text whatever it holds; an HTML page as a log is read."""
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.faults["log"] = "html"
    facts = await probe.collect()
    assert facts.status == "ok"
    (job,) = facts.jobs
    assert job.log is not None and job.log.text is not None and "502 Bad Gateway" in job.log.text
