"""KubeRay RayJobs (ray.io/v1) are read as Jobs, JobSets and PyTorchJobs are.

Found reading the backend against what RL teams run on Kubernetes: verl and SkyRL run on Ray,
launched as KubeRay RayJobs, and only Jobs, JobSets and PyTorchJobs were listed, so a running
RayJob was missing from ``jobtables sweep`` (or, without a label selector, showed as its
submitter Job alone, whose pod holds only ``ray job logs``). Now one RayJob list per sweep,
its state from ``jobDeploymentStatus``/``jobStatus``, its pods its submitter's (K8sJobMode)
and its RayCluster's (``ray.io/cluster``), the log read the driver's: the submitter pod
(``ray job logs --follow``), or in SidecarMode the head pod's ``ray-job-submitter``
container. The objects are shaped from KubeRay's types (``tests.probes.kubernetes.rayjobs``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.vanished import VANISHED
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.contract import ROOT, jobtables, sweep
from tests.probes.kubernetes.rayjobs import (
    RAY_START,
    SUBMITTER,
    add_rayjob,
    cluster_of,
    make_ray_pod,
    make_rayjob,
    make_submitter_pod,
    submitter_log,
)
from tests.probes.kubernetes.standin import KubeStandIn

FIXTURES = Path(__file__).parents[2] / "fixtures"
VERL = (FIXTURES / "verl-0.9.1" / "console.log").read_text()
SUBMITTER_POD = "rl-grpo-verl-b7xqm"
HEAD_POD = f"{cluster_of('rl-grpo-verl')}-head-8kptm"


def beta_jobs(report: dict) -> list[dict]:  # type: ignore[type-arg]
    return [job for job in report["jobs"] if job["cluster"] == "beta"]


async def test_a_running_rayjob_is_in_the_sweep(standin: KubeStandIn, tmp_path: Path) -> None:
    """A RayJob running verl (K8sJobMode): one row named by the RayJob, RUNNING, its
    metrics and log the driver's as the submitter pod follows it (before: no row)."""
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    report = await sweep(standin, tmp_path)
    assert report["clusters"][0]["status"] == "ok", report["clusters"]
    jobs = beta_jobs(report)
    assert [(j["job_id"], j["name"], j["state"], j["bucket"]) for j in jobs] == [
        ("rl-grpo-verl", "rl-grpo-verl", "RUNNING", "rl")], jobs
    assert jobs[0]["log_path"] == f"pod/{SUBMITTER_POD}"
    assert jobs[0]["step"] == 40 and "entropy" in jobs[0]["metrics"], jobs[0]


async def test_jobtables_job_reads_only_the_drivers_log(standin: KubeStandIn,
                                                        tmp_path: Path) -> None:
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    add_rayjob(standin, "rl-other", log=VERL)
    answer = await jobtables(standin, tmp_path, "job", "rl-grpo-verl")
    jobs = [answer] if "job_id" in answer else answer["jobs"]
    assert [(j["job_id"], j["state"], j["log_path"]) for j in jobs] == [
        ("rl-grpo-verl", "RUNNING", f"pod/{SUBMITTER_POD}")]
    logs = [r.path for r in standin.calls("GET", "/log")]
    assert logs == [f"/api/v1/namespaces/ml/pods/{SUBMITTER_POD}/log"]


async def test_the_submitter_job_is_no_row_of_its_own(standin: KubeStandIn, tmp_path: Path,
                                                      cluster: KubernetesCluster) -> None:
    """Without a label selector the submitter Job (named as the RayJob, its controller) is
    listed too: it is the RayJob's, not a row beside it, and the RayJob keeps its name."""
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    probe = KubernetesProbe(cluster.model_copy(update={"label_selector": None}),
                            clock=lambda: NOW)
    try:
        facts = await probe.collect()
        one = await probe.collect_job("rl-grpo-verl")
    finally:
        await probe.aclose()
    assert [(j.record.job_id, j.record.labels.get("jobtables/kind")) for j in facts.jobs] == [
        ("rl-grpo-verl", "RayJob")]
    assert one is not None and "jobtables/same-name" not in one.record.labels  # no namesake
    [job] = facts.jobs
    assert job.record.stdout_path == f"pod/{SUBMITTER_POD}"
    assert (job.record.pods_total, job.record.pods_running) == (4, 4)


@pytest.mark.parametrize("selector", ["team=post-training", None])
async def test_a_submitter_pod_of_kuberay_before_1_7_is_read(
        standin: KubeStandIn, cluster: KubernetesCluster, selector: str | None) -> None:
    """KubeRay 1.0-1.6 label the submitter pods as the Job controller does only (its
    ``getSubmitterTemplate`` adds ``ray.io/originated-from-*`` since 1.7.0): the pod named by
    ``job-name: <the RayJob>`` is still the driver's log, its submitter Job listed or not (a
    label selector the Job does not carry). The head's ``ray start`` log was read instead:
    no metric, in "Filling buffer" for ever."""
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    standin.pods[SUBMITTER_POD] = make_submitter_pod("rl-grpo-verl", template_labels=False)
    probe = KubernetesProbe(cluster.model_copy(update={"label_selector": selector}),
                            clock=lambda: NOW)
    try:
        [job] = (await probe.collect()).jobs
    finally:
        await probe.aclose()
    assert (job.record.job_id, job.record.stdout_path) == ("rl-grpo-verl",
                                                           f"pod/{SUBMITTER_POD}")
    assert job.summary is not None and max(p.step for p in job.summary.points) == 40
    assert job.record.pods_total == 4


async def test_a_namesake_jobs_pods_are_no_submitter_outside_k8s_job_mode(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """In HTTPMode there is no submitter: a Job of the RayJob's name (its id ``rayjob/x``)
    keeps its pod; the RayJob's log is its head's."""
    standin.rayjobs = {"rl-x": make_rayjob("rl-x", mode="HTTPMode")}
    head = make_ray_pod(cluster_of("rl-x"), "head")
    standin.pods[head.metadata.name] = head
    standin.jobs["rl-x"] = make_job("rl-x", active=1)
    standin.pods["rl-x-0"] = make_pod("rl-x-0", "rl-x")
    jobs = {j.record.job_id: j.record for j in (await probe.collect()).jobs}
    assert (jobs["rayjob/rl-x"].stdout_path, jobs["rayjob/rl-x"].pods_total) == (
        f"pod/{head.metadata.name}", 1)
    assert jobs["rl-x"].stdout_path == "pod/rl-x-0"


@pytest.mark.parametrize(("deployment", "job_status", "reason", "message", "state", "said"), [
    ("Complete", "SUCCEEDED", None, "Job finished successfully.", "COMPLETED", None),
    ("Complete", "STOPPED", None, "Job was intentionally stopped.", "CANCELLED", "Stopped"),
    ("Failed", "FAILED", "AppFailed", "Job entrypoint command failed with exit code 1, last "
     "available logs (truncated to 20,000 chars):\nRuntimeError: CUDA out of memory.",
     "FAILED", "AppFailed: Job entrypoint command failed with exit code 1"),
    ("Failed", "RUNNING", "DeadlineExceeded", "The RayJob has passed the "
     "activeDeadlineSeconds. StartTime: 2026-11-30 14:00:00 +0000 UTC. "
     "ActiveDeadlineSeconds: 7200", "TIMEOUT", "DeadlineExceeded"),
    ("Failed", "PENDING", "SubmissionFailed", "Job submission has failed. Reason: Job "
     "BackoffLimitExceeded", "FAILED", "SubmissionFailed: Job submission has failed"),
    ("ValidationFailed", "", "ValidationFailed", "The RayJob spec is invalid: a RayJob with "
     "shutdownAfterJobFinishes set to false is not allowed to be suspended", "FAILED",
     "ValidationFailed: The RayJob spec is invalid"),
])
async def test_a_finished_rayjob_state_from_its_status(
        standin: KubeStandIn, probe: KubernetesProbe, *, deployment: str, job_status: str,
        reason: str | None, message: str, state: str, said: str | None) -> None:
    """``jobDeploymentStatus`` Complete/Failed decide, with ``jobStatus`` and ``reason``:
    its RayCluster deleted (``shutdownAfterJobFinishes``), no pods left."""
    standin.rayjobs = {"rl-ray": make_rayjob(
        "rl-ray", deployment=deployment, job_status=job_status, reason=reason,
        message=message, ended=NOW - timedelta(minutes=5),
        failed=int(state not in {"COMPLETED", "CANCELLED"}), succeeded=int(state == "COMPLETED"))}
    [job] = (await probe.collect()).jobs
    assert (job.record.job_id, job.record.state.value) == ("rl-ray", state)
    if said is not None:
        assert (job.record.reason or "").startswith(said), job.record.reason
    assert job.record.end_time == NOW - timedelta(minutes=5)


@pytest.mark.parametrize(("deployment", "extra", "said"), [
    ("Initializing", {}, "Initializing"),
    ("Suspended", {"suspend": True, "cluster": None}, "Suspended"),
    ("Retrying", {"failed": 1, "backoff_limit": 2}, "Retrying"),
    ("WaitForDashboardReady", {}, "WaitForDashboardReady"),  # KubeRay 1.0's bring-up
])
async def test_a_rayjob_coming_up_is_pending(standin: KubeStandIn, probe: KubernetesProbe,
                                             deployment: str, extra: dict, said: str) -> None:  # type: ignore[type-arg]
    """Its RayCluster coming up (Initializing: the head pod runs, the job is not submitted
    yet), suspended (Kueue), or retrying after a failed attempt: PENDING, never a wedge."""
    standin.rayjobs = {"rl-ray": make_rayjob("rl-ray", deployment=deployment,
                                             job_status="" if deployment != "Retrying"
                                             else "FAILED", **extra)}
    if deployment in ("Initializing", "WaitForDashboardReady"):
        standin.pods["head"] = make_ray_pod(cluster_of("rl-ray"), "head")
        standin.logs["head"] = RAY_START
    [job] = (await probe.collect()).jobs
    assert (job.record.state.value, job.record.reason) == ("PENDING", said) or (
        job.record.state.value == "PENDING" and (job.record.reason or "").startswith(said)), (
        job.record.state, job.record.reason)
    assert "jobtables/silent-wedge" not in job.record.labels


async def test_a_submitted_ray_job_still_pending_is_pending(standin: KubeStandIn,
                                                            tmp_path: Path) -> None:
    """``jobDeploymentStatus: Running`` with ``jobStatus: PENDING``: submitted, the Ray job
    waits (its runtime_env installing, or its entrypoint's resources): bring-up, PENDING in
    the buffer table (it read RUNNING); with no pod at all it is still the silent wedge."""
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", job_status="PENDING",
               log="2026-11-30 14:03:05,120\tINFO job_manager.py:530 -- Runtime env is "
                   "setting up.\n")
    standin.rayjobs["rl-gone"] = make_rayjob("rl-gone", job_status="PENDING")
    jobs = {j["job_id"]: j for j in beta_jobs(await sweep(standin, tmp_path))}
    assert (jobs["rl-grpo-verl"]["state"], jobs["rl-grpo-verl"]["verdict"]) == (
        "PENDING", "buffering"), jobs["rl-grpo-verl"]
    assert "buffer-filling" in jobs["rl-grpo-verl"]["flags"]
    assert "silent-wedge" in jobs["rl-gone"]["flags"], jobs["rl-gone"]


async def test_a_running_rayjob_with_no_pods_is_a_silent_wedge(standin: KubeStandIn,
                                                               tmp_path: Path) -> None:
    """``jobDeploymentStatus: Running`` and neither a submitter nor a Ray pod left (a node
    pool deleted under it): the seed's silent wedge, terminal."""
    standin.rayjobs = {"rl-ray": make_rayjob("rl-ray")}
    [job] = beta_jobs(await sweep(standin, tmp_path))
    assert (job["state"], job["verdict"]) == ("RUNNING", "failed"), job
    assert "silent-wedge" in job["flags"], job


async def test_a_rayjob_gone_while_running_is_vanished(standin: KubeStandIn,
                                                       probe: KubernetesProbe) -> None:
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    assert [j.record.state.value for j in (await probe.collect()).jobs] == ["RUNNING"]
    del standin.rayjobs["rl-grpo-verl"]
    del standin.jobs["rl-grpo-verl"]
    standin.pods.clear()
    [job] = (await probe.collect()).jobs
    assert (job.record.job_id, job.record.state.value, job.record.reason) == (
        "rl-grpo-verl", "FAILED", VANISHED)


async def test_sidecar_mode_reads_the_head_pods_submitter_container(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """SidecarMode: no submitter Job; KubeRay adds ``ray-job-submitter`` to the head pod.
    Its log is the driver's; the head's ``ray-head`` container logs ``ray start`` only."""
    standin.rayjobs = {"rl-ray": make_rayjob("rl-ray", mode="SidecarMode")}
    cluster = cluster_of("rl-ray")
    head = make_ray_pod(cluster, "head", containers=("ray-head", SUBMITTER))
    worker = make_ray_pod(cluster, "worker", suffix="w0zq")
    standin.pods[head.metadata.name] = head
    standin.pods[worker.metadata.name] = worker
    standin.logs[f"{head.metadata.name}/ray-head"] = RAY_START
    standin.logs[f"{head.metadata.name}/{SUBMITTER}"] = submitter_log("rl-ray", VERL)
    [job] = (await probe.collect()).jobs
    assert job.record.stdout_path == f"pod/{head.metadata.name}"
    assert [r.query.get("container") for r in standin.calls("GET", "/log")] == [SUBMITTER]
    assert job.summary is not None and max(p.step for p in job.summary.points) == 40


async def test_a_crash_looping_head_is_the_rayjobs_fault(standin: KubeStandIn,
                                                         probe: KubernetesProbe) -> None:
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    standin.pods[HEAD_POD] = make_ray_pod(cluster_of("rl-grpo-verl"), "head",
                                          state="waiting", reason="CrashLoopBackOff",
                                          restarts=4)
    [job] = (await probe.collect()).jobs
    assert (job.record.state.value, job.record.reason) == ("RUNNING", "CrashLoopBackOff")


async def test_another_rayclusters_pods_are_not_its(standin: KubeStandIn,
                                                    probe: KubernetesProbe) -> None:
    """A previous attempt's RayCluster (another name: KubeRay names one per attempt) and a
    bare pod carrying the RayJob's name label from before it was created are not its."""
    standin.rayjobs = {"rl-ray": make_rayjob("rl-ray")}
    old = make_ray_pod("rl-ray-zzzzz", "head")
    standin.pods[old.metadata.name] = old
    stale = make_ray_pod(cluster_of("rl-ray"), "head",
                         created=NOW - timedelta(hours=5))
    standin.pods[stale.metadata.name] = stale
    [job] = (await probe.collect()).jobs
    assert job.record.pods_total == 0


@pytest.mark.parametrize(("fault", "says"), [
    ("403", "RayJobs not listed: list rayjobs: HTTP 403 Forbidden"),
    ("500", "RayJobs not listed: list rayjobs: HTTP 500 Internal Server Error"),
])
async def test_a_failing_rayjob_list_keeps_the_jobs(standin: KubeStandIn, tmp_path: Path,
                                                    fault: str, says: str) -> None:
    standin.rayjobs = {}
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = "{'loss': 1.2, 'grad_norm': 0.8, 'epoch': 0.1}\n"
    standin.faults["rayjobs"] = fault
    report = await sweep(standin, tmp_path)
    beta = report["clusters"][0]
    assert beta["status"] == "ok", beta
    assert (beta["detail"] or "").startswith(says), beta["detail"]
    assert [(j["job_id"], j["state"]) for j in beta_jobs(report)] == [("sft-a", "RUNNING")]


async def test_cancel_deletes_the_rayjob_not_its_submitter(standin: KubeStandIn,
                                                           probe: KubernetesProbe) -> None:
    """The cancel button deletes the RayJob (its finalizer stops the Ray job, its
    RayCluster and submitter go with it), never the submitter Job of the same name alone,
    which would leave the cluster running; seen or not by this probe."""
    standin.rayjobs = {}
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    await probe.cancel("rl-grpo-verl", uid="uid-rl-grpo-verl")  # never seen (a restart)
    assert "rl-grpo-verl" not in standin.rayjobs and "rl-grpo-verl" in standin.jobs
    [delete] = standin.calls("DELETE", "/rayjobs/rl-grpo-verl")
    assert delete.body["preconditions"] == {"uid": "uid-rl-grpo-verl"}
    add_rayjob(standin, "rl-b", log=VERL)
    await probe.collect()
    await probe.cancel("rl-b", uid="uid-rl-b")
    assert "rl-b" not in standin.rayjobs and "rl-b" in standin.jobs


async def test_a_rayjob_named_like_a_job_has_its_own_id(standin: KubeStandIn, tmp_path: Path,
                                                        probe: KubernetesProbe) -> None:
    """A Job (not its submitter) and a RayJob of one name: the Job keeps it, the RayJob is
    ``rayjob/<name>``, which ``jobtables job`` takes; a hostile id is still refused."""
    standin.rayjobs = {"rl-x": make_rayjob("rl-x", mode="HTTPMode")}
    head = make_ray_pod(cluster_of("rl-x"), "head")
    standin.pods[head.metadata.name] = head
    standin.jobs["rl-x"] = make_job("rl-x", active=1)
    standin.pods["rl-x-0"] = make_pod("rl-x-0", "rl-x")
    facts = await probe.collect()
    assert sorted(j.record.job_id for j in facts.jobs) == ["rayjob/rl-x", "rl-x"]
    answer = await jobtables(standin, tmp_path, "job", "rayjob/rl-x")
    jobs = [answer] if "job_id" in answer else answer["jobs"]
    assert [(j["job_id"], j["state"]) for j in jobs] == [("rayjob/rl-x", "RUNNING")]
    await probe.cancel("rayjob/rl-x", uid="uid-rl-x")
    assert "rl-x" not in standin.rayjobs and "rl-x" in standin.jobs


@pytest.mark.parametrize("hostile", ["rayjob/../etc", "rayjob/rl.run", "rayjob/", "rayjob/-x",
                                     "rayjob/rl;id", "rayjob/" + "a" * 64, "RAYJOB/rl-x"])
async def test_a_hostile_rayjob_id_is_refused(standin: KubeStandIn, tmp_path: Path,
                                              hostile: str) -> None:
    """``rayjob/`` qualifies a DNS-1035 label only (KubeRay's own check): anything else is
    refused with the one usage line (exit 2) and no API call is made."""
    standin.rayjobs = {"rl-x": make_rayjob("rl-x")}
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "job", hostile, "--config", str(toml),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        _, err = await process.communicate()
    assert process.returncode == 2, err
    assert "is not a job id" in err.decode() and "rayjob/NAME" in err.decode(), err
    assert standin.requests == []
