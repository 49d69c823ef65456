"""Kubeflow training-operator TFJobs and MPIJobs (kubeflow.org/v1) and their pods, for the
stand-in.

Policy: shaped from the operator's own types and controllers (kubeflow/training-operator
v1.9.0), as ``tests.probes.kubernetes.pytorchjobs`` shapes a PyTorchJob: a TFJob's
``spec.tfReplicaSpecs`` keyed ``Chief``/``PS``/``Worker``/``Evaluator`` with the
``tensorflow`` container (``tensorflow_types.go``), its pods ``<job>-<type>-<index>`` labelled
by ``common/pod.go``, ``job-role: master`` on the chief (``IsMasterRole``); an MPIJob's
``spec.mpiReplicaSpecs`` keyed ``Launcher``/``Worker`` with the ``mpi`` container
(``mpi_types.go``), its launcher pod ``<job>-launcher`` (``launcherSuffix``) labelled
``replica-type: launcher`` and ``job-role: master`` with no index (``newLauncher``), its
workers ``<job>-worker-<index>`` (``newWorker``). Both share ``runPolicy``, the
``JobStatus`` (conditions with reasons ``<Kind><type>``, ``replicaStatuses``) and the
operator's labels: ``training.kubeflow.org/operator-name`` (``tfjob-controller``,
``mpijob-controller``), ``job-name``, ``replica-type`` (lower-cased).
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import V1OwnerReference

from tests.probes.kubernetes.builders import make_pod
from tests.probes.kubernetes.pytorchjobs import API_VERSION, make_pytorchjob

KINDS = {"TFJob": ("tfReplicaSpecs", "tensorflow", "tfjob-controller"),
         "MPIJob": ("mpiReplicaSpecs", "mpi", "mpijob-controller")}


def make_training_job(kind: str, name: str, *, replicas: dict[str, int],
                      **kwargs: Any) -> dict[str, Any]:
    """A TFJob or MPIJob: the operator's common job object (the PyTorchJob builder's, whose
    shape they share) with the kind's own replica specs' key, container, condition reasons
    and messages, and operator name."""
    key, container, operator = KINDS[kind]
    obj = make_pytorchjob(name, replicas=replicas, **kwargs)
    obj["kind"] = kind
    specs = obj["spec"].pop("pytorchReplicaSpecs")
    for spec in specs.values():
        spec["template"]["spec"]["containers"][0]["name"] = container
        spec["template"]["spec"]["containers"][0]["command"] = (
            ["mpirun", "-np", "4", "python", "train.py"] if kind == "MPIJob"
            else ["python", "train.py"])
    obj["spec"][key] = specs
    for cond in obj["status"]["conditions"]:
        cond["reason"] = cond["reason"].replace("PyTorchJob", kind, 1)
        cond["message"] = cond["message"].replace("PyTorchJob", kind, 1)
    for status in obj["status"]["replicaStatuses"].values():
        status["selector"] = status["selector"].replace("pytorchjob-controller", operator)
    return obj


def make_training_pod(kind: str, job: str, rtype: str, index: int | None, *,
                      master: bool = False, **kwargs: Any) -> Any:
    """The pod the operator creates for that replica (``index`` ``None``: an MPIJob's
    launcher, ``<job>-launcher``, unindexed)."""
    _key, container, operator = KINDS[kind]
    rt = rtype.lower()
    name = f"{job}-{rt}" if index is None else f"{job}-{rt}-{index}"
    pod = make_pod(name, job, containers=(container,), **kwargs)
    labels = {"training.kubeflow.org/operator-name": operator,
              "training.kubeflow.org/job-name": job,
              "training.kubeflow.org/replica-type": rt}
    if index is not None:
        labels["training.kubeflow.org/replica-index"] = str(index)
    if master:
        labels["training.kubeflow.org/job-role"] = "master"
    pod.metadata.labels = labels
    pod.metadata.owner_references = [V1OwnerReference(
        api_version=API_VERSION, kind=kind, name=job, uid="uid-" + job, controller=True,
        block_owner_deletion=True)]
    return pod


def add_tfjob(standin: Any, name: str, *, log: str, workers: int = 2, **kwargs: Any) -> None:
    """A running TFJob: a Chief (its log ``log``), a PS and ``workers`` Workers."""
    assert standin.tfjobs is not None
    standin.tfjobs[name] = make_training_job(
        "TFJob", name, replicas={"Chief": 1, "PS": 1, "Worker": workers}, **kwargs)
    standin.pods[f"{name}-chief-0"] = make_training_pod("TFJob", name, "Chief", 0, master=True)
    standin.logs[f"{name}-chief-0"] = log
    standin.pods[f"{name}-ps-0"] = make_training_pod("TFJob", name, "PS", 0)
    standin.logs[f"{name}-ps-0"] = "Started server with target: grpc://localhost:2222\n"
    for index in range(workers):
        standin.pods[f"{name}-worker-{index}"] = make_training_pod("TFJob", name, "Worker",
                                                                   index)
        standin.logs[f"{name}-worker-{index}"] = f"worker {index} training\n"


def add_mpijob(standin: Any, name: str, *, log: str, workers: int = 2, **kwargs: Any) -> None:
    """A running MPIJob: its launcher (which prints the run: ``log``) and ``workers``
    Workers."""
    assert standin.mpijobs is not None
    standin.mpijobs[name] = make_training_job(
        "MPIJob", name, replicas={"Launcher": 1, "Worker": workers}, **kwargs)
    standin.pods[f"{name}-launcher"] = make_training_pod("MPIJob", name, "Launcher", None,
                                                         master=True)
    standin.logs[f"{name}-launcher"] = log
    for index in range(workers):
        standin.pods[f"{name}-worker-{index}"] = make_training_pod("MPIJob", name, "Worker",
                                                                   index)
        standin.logs[f"{name}-worker-{index}"] = ""
