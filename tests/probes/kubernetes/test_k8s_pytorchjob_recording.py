"""A PyTorchJob in a Kubernetes recording: ``jobtables record`` keeps the PyTorchJob list the
live sweep read (``pytorchjobs.json``) and the replay reports it as the live sweep did; a
PyTorchJob list that failed is kept as its error and said in the replay's detail, the Jobs
reported. Before, the recording client had no PyTorchJob list to pass on (the probe reads
one per sweep now), and a replay lost the PyTorchJobs."""

from __future__ import annotations

import json
from pathlib import Path

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.recording import record
from probes.replay import ReplayProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.pytorchjobs import add_pytorchjob
from tests.probes.kubernetes.standin import KubeStandIn

HF_LOG = "{'loss': 1.2, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 0.1}\n"


def _cluster(standin: KubeStandIn) -> None:
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "sft-ptj", log=HF_LOG)
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"


async def test_a_pytorchjob_is_recorded_and_replayed(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    _cluster(standin)
    live = KubernetesProbe(cluster, clock=lambda: NOW)
    try:
        swept = {j.record.job_id: j for j in (await live.collect()).jobs}
    finally:
        await live.aclose()
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    listed = json.loads((rec / "pytorchjobs.json").read_text())
    assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (
        "PyTorchJobList", ["sft-ptj"])
    asked = len(standin.requests)
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec))).collect()
    assert len(standin.requests) == asked  # the replay reads no API server
    assert facts.status == "ok", facts.detail
    replayed = {j.record.job_id: j for j in facts.jobs}
    assert set(replayed) == set(swept) == {"sft-ptj", "rl-a"}
    job = replayed["sft-ptj"]
    assert (job.record.state, job.record.stdout_path, job.record.pods_total) == (
        swept["sft-ptj"].record.state, "pod/sft-ptj-master-0", 3)
    assert job.summary is not None and job.summary.points[-1].values["loss"] == 1.2


async def test_a_failing_pytorchjob_list_is_recorded_as_its_error(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    _cluster(standin)
    standin.faults["pytorchjobs"] = "500"
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    error = json.loads((rec / "pytorchjobs.json").read_text())["error"]
    assert error["type"] == "UnreachableError" and "HTTP 500" in error["message"]
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec))).collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ["rl-a"]
    assert "; PyTorchJobs not listed: list pytorchjobs: HTTP 500" in (facts.detail or "")
