"""A RayJob in a Kubernetes recording: ``jobtables record`` keeps the RayJob list the live
sweep read (``rayjobs.json``), its submitter Job and the pods the probe matched to it (the
submitter's, its RayCluster's), and the replay reports it as the live sweep did; a RayJob
list that failed is kept as its error and said in the replay's detail, the Jobs reported."""

from __future__ import annotations

import json
from pathlib import Path

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.recording import record
from probes.replay import ReplayProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.rayjobs import add_rayjob, make_ray_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL = "".join(f"(TaskRunnerV1 pid=2476) step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2"
               f" - critic/score/mean:0.4\n" for s in (1, 2, 3))


def _cluster(standin: KubeStandIn) -> None:
    standin.rayjobs = {}
    add_rayjob(standin, "rl-ray", log=VERL)
    other = make_ray_pod("someone-elses-cluster", "head")  # not the RayJob's: not recorded
    standin.pods[other.metadata.name] = other
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"


async def test_a_rayjob_is_recorded_and_replayed(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    _cluster(standin)
    whole = cluster.model_copy(update={"label_selector": None})  # its submitter Job listed
    live = KubernetesProbe(whole, clock=lambda: NOW)
    try:
        swept = {j.record.job_id: j for j in (await live.collect()).jobs}
    finally:
        await live.aclose()
    rec = await record(whole, tmp_path / "rec", clock=lambda: NOW)
    listed = json.loads((rec / "rayjobs.json").read_text())
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (
        "RayJobList", ["rl-ray"])
    jobs = json.loads((rec / "jobs.json").read_text())
    assert sorted(i["metadata"]["uid"] for i in jobs["items"]) == ["uid-rl-a",
                                                                   "uid-submitter-rl-ray"]
    pods = {i["metadata"]["name"] for i in json.loads((rec / "pods.json").read_text())["items"]}
    assert "someone-elses-cluster-head-8kptm" not in pods and len(pods) == 5, pods
    asked = len(standin.requests)
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec))).collect()
    assert len(standin.requests) == asked  # the replay reads no API server
    assert facts.status == "ok", facts.detail
    replayed = {j.record.job_id: j for j in facts.jobs}
    assert set(replayed) == set(swept) == {"rl-ray", "rl-a"}
    job = replayed["rl-ray"]
    assert (job.record.state, job.record.stdout_path, job.record.pods_total) == (
        swept["rl-ray"].record.state, "pod/rl-ray-b7xqm", 4)
    assert job.summary is not None and job.summary.points[-1].step == 3


async def test_a_failing_rayjob_list_is_recorded_as_its_error(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    _cluster(standin)
    standin.faults["rayjobs"] = "403"
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    error = json.loads((rec / "rayjobs.json").read_text())["error"]
    assert error["type"] == "ForbiddenError" and "HTTP 403" in error["message"]
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec))).collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ["rl-a"]
    assert "RayJobs not listed: list rayjobs: HTTP 403" in (facts.detail or "")
