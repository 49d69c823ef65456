"""Kubeflow training-operator PyTorchJobs (kubeflow.org/v1) are read as Jobs and JobSets are.

Found reading the backend against what ML teams run: a PyTorchJob's pods have no batch Job
owner (the operator creates bare pods with the PyTorchJob as their controller), and only Jobs
and JobSets were listed, so a running PyTorchJob was not in ``jobtables sweep`` at all. Now
one PyTorchJob list per sweep (as the JobSet list), its pods matched by the operator's
``training.kubeflow.org/job-name`` label and owner uid, its state from its conditions and
replica statuses, the log read the master's (replica-type master, index 0; else worker 0).
The objects are shaped from the operator's types (``tests.probes.kubernetes.pytorchjobs``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.vanished import VANISHED
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.contract import jobtables, sweep
from tests.probes.kubernetes.pytorchjobs import add_pytorchjob, make_pytorch_pod, make_pytorchjob
from tests.probes.kubernetes.standin import KubeStandIn

HF_LOG = "".join(f"{{'loss': {1.5 - i / 100:.2f}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                 f"'epoch': {i / 100:.2f}}}\n" for i in range(1, 31))


def beta_jobs(report: dict) -> list[dict]:  # type: ignore[type-arg]
    return [job for job in report["jobs"] if job["cluster"] == "beta"]


async def test_a_running_pytorchjob_is_in_the_sweep(standin: KubeStandIn,
                                                    tmp_path: Path) -> None:
    """A Master and two Workers running: one row, named by the PyTorchJob, RUNNING, its
    metrics and log the master's (before: no row at all)."""
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "sft-ptj", log=HF_LOG)
    report = await sweep(standin, tmp_path)
    assert report["clusters"][0]["status"] == "ok", report["clusters"]
    jobs = beta_jobs(report)
    assert [(j["job_id"], j["name"], j["state"]) for j in jobs] == [
        ("sft-ptj", "sft-ptj", "RUNNING")], jobs
    assert jobs[0]["log_path"] == "pod/sft-ptj-master-0"
    assert jobs[0]["metrics"]["loss"] == pytest.approx(1.2)
    assert jobs[0]["bucket"] == "sft"


async def test_jobtables_job_reads_a_pytorchjob(standin: KubeStandIn, tmp_path: Path) -> None:
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "sft-ptj", log=HF_LOG)
    add_pytorchjob(standin, "sft-other", log=HF_LOG)
    answer = await jobtables(standin, tmp_path, "job", "sft-ptj")
    jobs = [answer] if "job_id" in answer else answer["jobs"]  # not found: no job
    assert [(j["job_id"], j["state"], j["log_path"]) for j in jobs] == [
        ("sft-ptj", "RUNNING", "pod/sft-ptj-master-0")]
    logs = [r.path for r in standin.calls("GET", "/log")]
    assert logs == ["/api/v1/namespaces/ml/pods/sft-ptj-master-0/log"]


@pytest.mark.parametrize(("conditions", "state", "reason"), [
    ((("Created", "is created."), ("Running", "is running."),
      ("Succeeded", "is successfully completed.")), "COMPLETED", None),
    ((("Created", "is created."), ("Failed", "is failed because 1 Worker replica(s) failed.")),
     "FAILED", "PyTorchJobFailed: PyTorchJob rl-ptj is failed because 1 Worker replica(s) "
               "failed."),
    ((("Created", "is created."), ("Failed", "has failed because it was active longer than "
                                             "specified deadline")), "TIMEOUT", None),
    ((("Created", "is created."), ("Suspended", "is suspended.")), "PENDING", "Suspended"),
])
async def test_a_pytorchjob_state_from_its_conditions(
        standin: KubeStandIn, probe: KubernetesProbe, conditions: tuple[tuple[str, str], ...],
        state: str, reason: str | None) -> None:
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob(
        "rl-ptj", conditions=conditions, active={},
        finished=NOW - timedelta(minutes=5) if conditions[-1][0] != "Suspended" else None)}
    if conditions[-1][0] == "Succeeded":
        standin.pods["rl-ptj-master-0"] = make_pytorch_pod(
            "rl-ptj", "Master", 0, phase="Succeeded", state="terminated", reason="Completed")
    facts = await probe.collect()
    [job] = facts.jobs
    assert (job.record.job_id, job.record.state.value) == ("rl-ptj", state)
    if reason is not None:
        assert job.record.reason is not None and job.record.reason.startswith(reason), (
            job.record.reason)
    if state != "PENDING":
        assert job.record.end_time == NOW - timedelta(minutes=5)


async def test_worker_zero_is_read_without_a_master(standin: KubeStandIn,
                                                    probe: KubernetesProbe) -> None:
    """Workers only (``IsMasterRole``: worker 0 is the master role): worker 0's log."""
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob("rl-ptj", replicas={"Worker": 3})}
    for index in (2, 0, 1):
        standin.pods[f"rl-ptj-worker-{index}"] = make_pytorch_pod("rl-ptj", "Worker", index,
                                                                  master_role=index == 0)
        standin.logs[f"rl-ptj-worker-{index}"] = f"worker {index}\n"
    [job] = (await probe.collect()).jobs
    assert job.record.stdout_path == "pod/rl-ptj-worker-0"
    assert (job.record.pods_total, job.record.pods_running) == (3, 3)


async def test_restarts_are_counted(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The master restarted in place twice (``restartPolicy: OnFailure``), a worker once."""
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob("rl-ptj")}
    standin.pods["rl-ptj-master-0"] = make_pytorch_pod("rl-ptj", "Master", 0, restarts=2)
    standin.pods["rl-ptj-worker-0"] = make_pytorch_pod("rl-ptj", "Worker", 0, restarts=1)
    standin.pods["rl-ptj-worker-1"] = make_pytorch_pod("rl-ptj", "Worker", 1)
    standin.logs["rl-ptj-master-0"] = HF_LOG
    [job] = (await probe.collect()).jobs
    assert job.record.restarts == 3


async def test_a_pytorchjob_with_active_replicas_and_no_pods_is_a_silent_wedge(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob("rl-ptj")}
    [job] = (await probe.collect()).jobs
    assert (job.record.state.value, job.record.pods_total) == ("RUNNING", 0)
    assert job.record.labels.get("jobtables/silent-wedge") == "no-pods"


async def test_a_pytorchjob_gone_while_running_is_vanished(standin: KubeStandIn,
                                                           probe: KubernetesProbe) -> None:
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "rl-ptj", log=HF_LOG)
    assert [j.record.state.value for j in (await probe.collect()).jobs] == ["RUNNING"]
    del standin.pytorchjobs["rl-ptj"]
    for pod in [name for name in standin.pods if name.startswith("rl-ptj-")]:
        del standin.pods[pod]
    [job] = (await probe.collect()).jobs
    assert (job.record.job_id, job.record.state.value, job.record.reason) == (
        "rl-ptj", "FAILED", VANISHED)


async def test_a_pod_of_a_recreated_pytorchjob_is_not_its(standin: KubeStandIn,
                                                          probe: KubernetesProbe) -> None:
    """A pod labelled with the job's name whose controller is another object (a PyTorchJob
    deleted and created again: the new one's uid differs) is not read as the job's."""
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob("rl-ptj")}
    old = make_pytorch_pod("rl-ptj", "Master", 0, phase="Failed", state="terminated",
                           reason="Error")
    old.metadata.owner_references[0].uid = "uid-an-earlier-rl-ptj"
    standin.pods["rl-ptj-master-0"] = old
    [job] = (await probe.collect()).jobs
    assert job.record.pods_total == 0


@pytest.mark.parametrize(("fault", "says"), [
    ("403", "PyTorchJobs not listed: list pytorchjobs: HTTP 403 Forbidden"),
    ("500", "PyTorchJobs not listed: list pytorchjobs: HTTP 500 Internal Server Error"),
])
async def test_a_failing_pytorchjob_list_keeps_the_jobs(standin: KubeStandIn, tmp_path: Path,
                                                        fault: str, says: str) -> None:
    standin.pytorchjobs = {}
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = HF_LOG
    standin.faults["pytorchjobs"] = fault
    report = await sweep(standin, tmp_path)
    beta = report["clusters"][0]
    assert beta["status"] == "ok", beta
    assert beta["detail"].startswith(says), beta["detail"]
    assert [(j["job_id"], j["state"]) for j in beta_jobs(report)] == [("sft-a", "RUNNING")]


async def test_no_pytorchjob_crd_is_no_problem(standin: KubeStandIn, tmp_path: Path) -> None:
    """The CRD not installed (404): Jobs reported, nothing said."""
    assert standin.pytorchjobs is None
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = HF_LOG
    report = await sweep(standin, tmp_path)
    assert (report["clusters"][0]["status"], report["clusters"][0]["detail"]) == ("ok", None)
    assert [j["job_id"] for j in beta_jobs(report)] == ["sft-a"]


async def test_a_pytorchjob_seen_before_is_not_vanished_while_unlisted(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "rl-ptj", log=HF_LOG)
    assert [j.record.job_id for j in (await probe.collect()).jobs] == ["rl-ptj"]
    standin.faults["pytorchjobs"] = "500"
    unlisted = await probe.collect()
    assert unlisted.status == "ok" and unlisted.jobs == (), unlisted.jobs
    one = await probe.collect_one("rl-ptj")
    assert one.jobs == () and (one.detail or "").startswith("PyTorchJobs not listed")
    standin.faults.pop("pytorchjobs")
    again = await probe.collect()
    assert [(j.record.job_id, j.record.state.value) for j in again.jobs] == [
        ("rl-ptj", "RUNNING")]


async def test_a_pytorchjob_named_like_a_job_has_its_own_id_and_cancel(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A Job and a PyTorchJob of one name: the Job keeps it, the PyTorchJob is
    ``pytorchjob/<name>`` (kubectl's form); cancelling it deletes the PyTorchJob (uid
    precondition), not the Job."""
    standin.pytorchjobs = {}
    standin.jobs["rl-x"] = make_job("rl-x", active=1)
    standin.pods["rl-x-0"] = make_pod("rl-x-0", "rl-x")
    add_pytorchjob(standin, "rl-x", log=HF_LOG)
    facts = await probe.collect()
    assert sorted(j.record.job_id for j in facts.jobs) == ["pytorchjob/rl-x", "rl-x"]
    await probe.cancel("pytorchjob/rl-x", uid="uid-rl-x")
    assert "rl-x" not in standin.pytorchjobs and "rl-x" in standin.jobs
    [delete] = standin.calls("DELETE", "/pytorchjobs/rl-x")
    assert delete.body["preconditions"] == {"uid": "uid-rl-x"}


async def test_a_crashed_master_awaiting_its_restart_is_restarting(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """``restartPolicy: OnFailure``: the master's container ended in failure in its Running
    pod, the kubelet restarts it in place: restarting, counted against the PyTorchJob's
    ``runPolicy.backoffLimit`` (the operator's ``PastBackoffLimit``), which its diagnose names."""
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "rl-ptj", log=HF_LOG + "RuntimeError: CUDA error: an illegal "
                   "memory access was encountered\n")
    standin.pods["rl-ptj-master-0"] = make_pytorch_pod(
        "rl-ptj", "Master", 0, state="terminated", reason="Error", restarts=1,
        restart_policy="OnFailure")
    [job] = beta_jobs(await sweep(standin, tmp_path))
    assert (job["state"], job["verdict"]) == ("RUNNING", "restarting"), job
    assert job["trend"].startswith("Restart 2 of backoffLimit 3: pod/rl-p"), job  # cut: 60
    why = job["recommendation"]["why"]
    assert "the PyTorchJob restarts it" in why and "runPolicy.backoffLimit" in why, why


async def test_a_pytorchjob_of_another_shape_is_read_as_absent_fields(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A custom object no client model checks: a spec, status or replica status of another
    shape (a number, a string) is read as absent, never a probe crash; the Jobs are read."""
    standin.pytorchjobs = {"rl-odd": {**make_pytorchjob("rl-odd"), "spec": 5,
                                      "status": {"conditions": "zz", "replicaStatuses": [7]}}}
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = HF_LOG
    facts = await probe.collect()
    assert facts.status == "ok", facts.detail
    assert sorted((j.record.job_id, j.record.state.value) for j in facts.jobs) == [
        ("rl-odd", "PENDING"), ("sft-a", "RUNNING")]


async def test_a_failed_worker_while_the_master_runs_is_a_failed_rank(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """``restartPolicy: ExitCode``: worker 1 failed with a retryable code, the operator
    restarting it (the Restarting condition); the master runs on. No healthy run: RUNNING,
    ``RankFailed``, the rank named; the log read is still the master's."""
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob(
        "rl-ptj", restart_policy="ExitCode", active={"Master": 1, "Worker": 1},
        failed={"Worker": 1}, conditions=(
            ("Created", "is created."),
            ("Restarting", "is restarting because 1 Worker replica(s) failed.")))}
    standin.pods["rl-ptj-master-0"] = make_pytorch_pod("rl-ptj", "Master", 0)
    standin.pods["rl-ptj-worker-0"] = make_pytorch_pod("rl-ptj", "Worker", 0)
    standin.pods["rl-ptj-worker-1"] = make_pytorch_pod(
        "rl-ptj", "Worker", 1, phase="Failed", state="terminated", reason="Error")
    standin.logs["rl-ptj-master-0"] = HF_LOG
    standin.logs["rl-ptj-worker-1"] = "Traceback (most recent call last):\nRuntimeError: NCCL\n"
    [job] = (await probe.collect()).jobs
    assert (job.record.state.value, job.record.reason) == ("RUNNING", "RankFailed")
    assert job.record.stdout_path == "pod/rl-ptj-master-0"
    assert job.record.labels["jobtables/failed-rank-pod"] == "pod/rl-ptj-worker-1"


async def test_restarts_of_every_replica_count_toward_backoff_limit(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The operator's ``PastBackoffLimit`` sums the restarts of the job's Running pods of
    every replica type (``core/job.go``): the master restarted once, a worker once and now
    crashed awaiting its restart: the third restart reaches ``backoffLimit: 3``, so the
    operator fails the job with it (it read 'restart 2 of backoffLimit 3', counting the
    worker's replica type alone)."""
    standin.pytorchjobs = {"rl-ptj": make_pytorchjob("rl-ptj", backoff_limit=3)}
    standin.pods["rl-ptj-master-0"] = make_pytorch_pod("rl-ptj", "Master", 0, restarts=1)
    standin.pods["rl-ptj-worker-0"] = make_pytorch_pod(
        "rl-ptj", "Worker", 0, state="terminated", reason="Error", restarts=1,
        restart_policy="OnFailure")
    standin.pods["rl-ptj-worker-1"] = make_pytorch_pod("rl-ptj", "Worker", 1)
    standin.logs["rl-ptj-master-0"] = HF_LOG
    [job] = (await probe.collect()).jobs
    assert (job.record.state.value, job.record.reason) == ("FAILED", "BackoffLimitExceeded")
