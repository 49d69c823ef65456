"""Kubeflow training-operator PyTorchJobs (kubeflow.org/v1) and their pods, for the stand-in.

Policy: shaped from the operator's own types and controller (kubeflow/training-operator
v1.9.0): ``pkg/apis/kubeflow.org/v1/pytorch_types.go`` (``spec.runPolicy``,
``spec.pytorchReplicaSpecs`` keyed ``Master``/``Worker``, the ``pytorch`` container),
``common_types.go`` (``status.conditions`` of type Created/Running/Restarting/Succeeded/
Failed/Suspended with ``lastUpdateTime``/``lastTransitionTime``, ``replicaStatuses``
{active, succeeded, failed, selector}, ``startTime``, ``completionTime``), condition reasons
``util.NewReason(kind, reason)`` (``PyTorchJobRunning``) and the controller's messages
(``pytorchjob_controller.go`` ``UpdateJobStatus``). A pod is labelled as
``common/pod.go`` ``createNewPod`` labels it: ``training.kubeflow.org/operator-name``,
``job-name``, ``replica-type`` (lower-cased), ``replica-index``, ``job-role: master`` on the
master role (the Master, else worker 0: ``IsMasterRole``), named ``<job>-<type>-<index>``
(``GenGeneralName``), with the PyTorchJob as its controller owner reference
(``GenOwnerReference``). The object is the dict the custom-objects API returns; pods and
templates are the client's models.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kubernetes_asyncio.client import (
    V1Container,
    V1ObjectMeta,
    V1OwnerReference,
    V1PodSpec,
    V1PodTemplateSpec,
)

from tests.probes.kubernetes.builders import IMAGE, NOW, make_pod, to_json

API_VERSION = "kubeflow.org/v1"


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def make_pytorchjob(
    name: str,
    *,
    replicas: dict[str, int] | None = None,
    active: dict[str, int] | None = None,
    succeeded: dict[str, int] | None = None,
    failed: dict[str, int] | None = None,
    conditions: tuple[tuple[str, str], ...] = (("Created", "is created."),
                                               ("Running", "is running.")),
    started: datetime | None = NOW - timedelta(hours=2),
    finished: datetime | None = None,
    backoff_limit: int | None = 3,
    restart_policy: str = "OnFailure",
    suspend: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A PyTorchJob; ``replicas``/``active``/``succeeded``/``failed`` by replica type
    (``Master``, ``Worker``); ``conditions`` are (type, the controller's message after the
    job's name), each true, with the reason ``PyTorchJob<type>`` (the last true one is the
    current, as ``UpdateJobConditions`` leaves them)."""
    replicas = replicas if replicas is not None else {"Master": 1, "Worker": 2}
    active = active if active is not None else dict(replicas)
    meta = V1ObjectMeta(name=name, namespace="ml", uid="uid-" + name,
                        labels={"team": "post-training", **(labels or {})},
                        creation_timestamp=(started or NOW) - timedelta(minutes=1))
    specs = {}
    for rtype, count in replicas.items():
        template = V1PodTemplateSpec(spec=to_pod_spec(restart_policy))
        specs[rtype] = {"replicas": count, "restartPolicy": restart_policy,
                        "template": to_json(template)}
    at = stamp(finished or NOW)
    status: dict[str, Any] = {
        "conditions": [{"type": kind, "status": "True", "reason": f"PyTorchJob{kind}",
                        "message": f"PyTorchJob {name} {said}", "lastUpdateTime": at,
                        "lastTransitionTime": at} for kind, said in conditions],
        "replicaStatuses": {rtype: {
            **({"active": active[rtype]} if active.get(rtype) else {}),
            **({"succeeded": succeeded[rtype]} if (succeeded or {}).get(rtype) else {}),
            **({"failed": failed[rtype]} if (failed or {}).get(rtype) else {}),
            "selector": (f"training.kubeflow.org/job-name={name},training.kubeflow.org/"
                         f"operator-name=pytorchjob-controller,training.kubeflow.org/"
                         f"replica-type={rtype.lower()}")} for rtype in replicas},
        "lastReconcileTime": stamp(NOW),
    }
    if started is not None:
        status["startTime"] = stamp(started)
    if finished is not None:
        status["completionTime"] = stamp(finished)
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None", "suspend": suspend}
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    return {"apiVersion": API_VERSION, "kind": "PyTorchJob", "metadata": to_json(meta),
            "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs},
            "status": status}


def to_pod_spec(restart_policy: str) -> V1PodSpec:
    """The replica template's pod spec: the operator's default container name, ``pytorch``."""
    return V1PodSpec(restart_policy=restart_policy, containers=[V1Container(
        name="pytorch", image=IMAGE, command=["torchrun", "train.py"],
        args=["--config", "cfg.yaml"])])


def make_pytorch_pod(job: str, rtype: str, index: int, *, master_role: bool | None = None,
                     **kwargs: Any) -> Any:
    """The pod ``<job>-<type>-<index>`` the operator creates for that replica (``kwargs``:
    :func:`builders.make_pod`'s phase, state, reason, restarts, created)."""
    rt = rtype.lower()
    name = f"{job}-{rt}-{index}"
    pod = make_pod(name, job, containers=("pytorch",), **kwargs)
    labels = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/job-name": job,
              "training.kubeflow.org/replica-type": rt,
              "training.kubeflow.org/replica-index": str(index)}
    if master_role if master_role is not None else rt == "master":
        labels["training.kubeflow.org/job-role"] = "master"
    pod.metadata.labels = labels
    pod.metadata.owner_references = [V1OwnerReference(
        api_version=API_VERSION, kind="PyTorchJob", name=job, uid="uid-" + job,
        controller=True, block_owner_deletion=True)]
    return pod


def add_pytorchjob(standin: Any, name: str, *, log: str | None = None,
                   workers: int = 2, **kwargs: Any) -> None:
    """A running PyTorchJob ``name`` (a Master and ``workers`` Workers, every pod running),
    its master's log ``log`` and each worker's a line of its own, in a ``KubeStandIn``."""
    assert standin.pytorchjobs is not None
    standin.pytorchjobs[name] = make_pytorchjob(
        name, replicas={"Master": 1, "Worker": workers}, **kwargs)
    standin.pods[f"{name}-master-0"] = make_pytorch_pod(name, "Master", 0)
    for index in range(workers):
        standin.pods[f"{name}-worker-{index}"] = make_pytorch_pod(name, "Worker", index)
        standin.logs[f"{name}-worker-{index}"] = f"worker {index} waiting on the master\n"
    if log is not None:
        standin.logs[f"{name}-master-0"] = log
