"""Kubeflow TFJobs and MPIJobs (kubeflow.org/v1) are read as PyTorchJobs are.

Found reading the backend against the training operator (kubeflow/training-operator v1.9.0):
only its PyTorchJobs were listed, so a running TFJob or MPIJob, whose pods are the operator's
bare pods with no batch Job owner, was in no ``jobtables sweep`` at all, and ``jobtables job
tfjob/NAME`` was refused as no job id. Now each kind is listed once a sweep, its pods matched
by the operator's ``training.kubeflow.org/job-name`` label and owner uid, the log read the
master role's: a TFJob's chief, an MPIJob's launcher (the pod running ``mpirun``). The
objects are shaped from the operator's types (``tests.probes.kubernetes.training_jobs``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.ids import validate_job_id
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW
from tests.probes.kubernetes.contract import jobtables, sweep
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.training_jobs import add_mpijob, add_tfjob, make_training_job

HF_LOG = "".join(f"{{'loss': {1.5 - i / 100:.2f}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                 f"'epoch': {i / 100:.2f}}}\n" for i in range(1, 31))


def beta_jobs(report: dict) -> list[dict]:  # type: ignore[type-arg]
    return [job for job in report["jobs"] if job["cluster"] == "beta"]


async def test_a_running_tfjob_and_mpijob_are_in_the_sweep(standin: KubeStandIn,
                                                           tmp_path: Path) -> None:
    """One row each, RUNNING, metrics and log from the chief and the launcher."""
    standin.tfjobs, standin.mpijobs = {}, {}
    add_tfjob(standin, "sft-tf", log=HF_LOG)
    add_mpijob(standin, "sft-mpi", log=HF_LOG)
    report = await sweep(standin, tmp_path)
    assert report["clusters"][0]["status"] == "ok", report["clusters"]
    rows = {j["job_id"]: j for j in beta_jobs(report)}
    assert sorted(rows) == ["sft-mpi", "sft-tf"], rows
    assert rows["sft-tf"]["log_path"] == "pod/sft-tf-chief-0"
    assert rows["sft-mpi"]["log_path"] == "pod/sft-mpi-launcher"
    for row in rows.values():
        assert row["state"] == "RUNNING"
        assert row["metrics"]["loss"] == pytest.approx(1.2)


async def test_jobtables_job_reads_a_tfjob(standin: KubeStandIn, tmp_path: Path) -> None:
    """``jobtables job NAME`` finds the TFJob, read as the sweep reads it; ``tfjob/NAME`` and
    ``mpijob/NAME`` (kubectl's form, the id of one sharing a Job's name) are job ids."""
    standin.tfjobs, standin.mpijobs = {}, {}
    add_tfjob(standin, "sft-tf", log=HF_LOG)
    answer = await jobtables(standin, tmp_path, "job", "sft-tf")
    jobs = [answer] if "job_id" in answer else answer["jobs"]
    assert [(j["job_id"], j["state"], j["log_path"]) for j in jobs] == [
        ("sft-tf", "RUNNING", "pod/sft-tf-chief-0")]
    assert validate_job_id("tfjob/sft-tf") and validate_job_id("mpijob/sft-mpi")


async def test_a_failed_mpijob_reads_failed_and_its_cancel_deletes_it(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Its Failed condition is FAILED with the operator's reason; a cancel of a running one
    deletes that MPIJob (with its uid)."""
    standin.tfjobs, standin.mpijobs = {}, {}
    standin.mpijobs["rl-mpi"] = make_training_job(
        "MPIJob", "rl-mpi", replicas={"Launcher": 1, "Worker": 2}, active={},
        conditions=(("Created", "is created."), ("Failed", "is failed because 1 Launcher"
                                                           " replica(s) failed.")),
        finished=NOW - timedelta(minutes=5))
    add_mpijob(standin, "rl-mpi-live", log=HF_LOG)
    facts = await probe.collect()
    states = {j.record.job_id: j.record.state for j in facts.jobs}
    assert states == {"rl-mpi": "FAILED", "rl-mpi-live": "RUNNING"}
    await probe.cancel("rl-mpi-live", uid="uid-rl-mpi-live")
    assert "rl-mpi-live" not in standin.mpijobs
    assert [c.path for c in standin.calls("DELETE", "/rl-mpi-live")] == [
        "/apis/kubeflow.org/v1/namespaces/ml/mpijobs/rl-mpi-live"]
