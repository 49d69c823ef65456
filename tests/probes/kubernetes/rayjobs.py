"""KubeRay RayJobs (ray.io/v1) and their pods, for the stand-in.

Policy: shaped from KubeRay's own types and controllers (ray-project/kuberay master, 1.7):
``ray-operator/apis/ray/v1/rayjob_types.go`` (``spec.entrypoint``, ``submissionMode``,
``shutdownAfterJobFinishes``, ``rayClusterSpec`` with ``headGroupSpec``/``workerGroupSpecs``;
``status.jobStatus`` PENDING/RUNNING/STOPPED/SUCCEEDED/FAILED, ``jobDeploymentStatus``
Initializing/Running/Complete/Failed/Suspended/Retrying/..., ``rayClusterName``, ``jobId``,
``dashboardURL``, ``startTime``/``endTime``, ``rayJobInfo``, ``succeeded``/``failed``,
``reason``/``message``), ``rayjob_controller.go`` (``createNewK8sJob``: the submitter Job
is named as the RayJob, labelled ``ray.io/originated-from-cr-name``,
``ray.io/originated-from-crd: RayJob``, ``app.kubernetes.io/created-by: kuberay-operator``,
its backoffLimit 2, the RayJob its controller owner; ``getSubmitterTemplate``: its pod
template carries the same three labels, the container ``ray-job-submitter``, restartPolicy
Never (the template's labels since KubeRay 1.7.0: before, the submitter pods carry the Job
controller's labels alone); ``GenerateRayClusterName``: ``<rayjob>-<5 random>``), ``common/pod.go``
``labelPod`` (a Ray pod's ``ray.io/cluster``, ``ray.io/node-type`` head/worker,
``ray.io/group``, ``ray.io/is-ray-node``, ``ray.io/identifier``, ``app.kubernetes.io/name:
kuberay``), the RayCluster their controller owner. SidecarMode puts the submitter container
into the head pod. The RayJob is the dict the custom-objects API returns; pods and Jobs are
the client's models.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kubernetes_asyncio.client import (
    V1Container,
    V1Job,
    V1JobSpec,
    V1JobStatus,
    V1ObjectMeta,
    V1OwnerReference,
    V1PodSpec,
    V1PodTemplateSpec,
)

from tests.probes.kubernetes.builders import NOW, make_pod, to_json

API_VERSION = "ray.io/v1"
RAY_IMAGE = "rayproject/ray:2.52.0-py311-gpu"
SUBMITTER = "ray-job-submitter"
ENTRYPOINT = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
              "data.train_batch_size=256 trainer.total_training_steps=200")
KUBERAY_LABELS = {"app.kubernetes.io/created-by": "kuberay-operator"}


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def cluster_of(name: str) -> str:
    """The RayCluster KubeRay names for the RayJob (``GenerateRayClusterName``)."""
    return f"{name}-x7k2p"


def _ray_template(container: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    containers = [V1Container(name=container, image=RAY_IMAGE)]
    containers += [V1Container(name=c, image=RAY_IMAGE) for c in extra]
    return to_json(V1PodTemplateSpec(spec=V1PodSpec(containers=containers)))  # type: ignore[no-any-return]


def make_rayjob(
    name: str,
    *,
    deployment: str = "Running",
    job_status: str = "RUNNING",
    mode: str = "K8sJobMode",
    reason: str | None = None,
    message: str | None = None,
    started: datetime | None = NOW - timedelta(hours=2),
    ended: datetime | None = None,
    failed: int = 0,
    succeeded: int = 0,
    backoff_limit: int | None = None,
    suspend: bool = False,
    cluster: str | None = "",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A RayJob as ``kubectl get rayjob -o json`` gives it; ``cluster`` ``""`` names the
    RayCluster :func:`cluster_of` does, ``None`` none (reset while suspended or retrying)."""
    meta = V1ObjectMeta(name=name, namespace="ml", uid="uid-" + name, generation=1,
                        labels={"team": "post-training", **(labels or {})},
                        finalizers=["ray.io/rayjob-finalizer"],
                        creation_timestamp=(started or NOW) - timedelta(minutes=1))
    spec: dict[str, Any] = {
        "entrypoint": ENTRYPOINT,
        "submissionMode": mode,
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": 600,
        "suspend": suspend,
        "rayClusterSpec": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                              "template": _ray_template("ray-head")},
            "workerGroupSpecs": [{"groupName": "gpu-group", "replicas": 2, "minReplicas": 2,
                                  "maxReplicas": 2, "numOfHosts": 1, "rayStartParams": {},
                                  "template": _ray_template("ray-worker")}],
        },
    }
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    status: dict[str, Any] = {"jobDeploymentStatus": deployment, "jobStatus": job_status,
                              "failed": failed, "succeeded": succeeded,
                              "observedGeneration": 1}
    ray_cluster = cluster_of(name) if cluster == "" else cluster
    if ray_cluster:
        status.update({
            "jobId": f"{name}-q9vzd", "rayClusterName": ray_cluster,
            "dashboardURL": f"{ray_cluster}-head-svc.ml.svc.cluster.local:8265",
            "rayClusterStatus": {"state": "ready", "readyWorkerReplicas": 2,
                                 "availableWorkerReplicas": 2, "desiredWorkerReplicas": 2,
                                 "minWorkerReplicas": 2, "maxWorkerReplicas": 2,
                                 "desiredCPU": "34", "desiredGPU": "16",
                                 "desiredMemory": "512Gi", "desiredTPU": "0",
                                 "head": {"podName": f"{ray_cluster}-head-8kptm",
                                          "podIP": "10.4.1.17", "serviceIP": "10.4.1.17"},
                                 "observedGeneration": 1}})
    if started is not None:
        status["startTime"] = stamp(started)
        if job_status not in ("", "PENDING"):
            status["rayJobInfo"] = {"startTime": stamp(started + timedelta(minutes=3))}
    if ended is not None:
        status["endTime"] = stamp(ended)
        status.setdefault("rayJobInfo", {})["endTime"] = stamp(ended)
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {"apiVersion": API_VERSION, "kind": "RayJob", "metadata": to_json(meta),
            "spec": spec, "status": status}


def make_submitter_job(name: str) -> V1Job:
    """The submitter Job KubeRay creates for the RayJob ``name`` in K8sJobMode: named as
    the RayJob, its labels KubeRay's only (none of the RayJob's own)."""
    labels = {"ray.io/originated-from-cr-name": name, "ray.io/originated-from-crd": "RayJob",
              **KUBERAY_LABELS}
    return V1Job(
        api_version="batch/v1", kind="Job",
        metadata=V1ObjectMeta(
            name=name, namespace="ml", uid="uid-submitter-" + name, labels=labels,
            owner_references=[V1OwnerReference(api_version=API_VERSION, kind="RayJob",
                                               name=name, uid="uid-" + name, controller=True,
                                               block_owner_deletion=True)],
            creation_timestamp=NOW - timedelta(minutes=110)),
        spec=V1JobSpec(backoff_limit=2, template=V1PodTemplateSpec(
            metadata=V1ObjectMeta(labels=labels),
            spec=V1PodSpec(restart_policy="Never", containers=[
                V1Container(name=SUBMITTER, image=RAY_IMAGE, command=["/bin/bash", "-ce", "--"],
                            args=["ray job submit ..."])]))),
        status=V1JobStatus(active=1, start_time=NOW - timedelta(minutes=110)))


def make_submitter_pod(name: str, *, suffix: str = "b7xqm", template_labels: bool = True,
                       **kwargs: Any) -> Any:
    """The submitter Job's pod (the Job controller's labels and owner; the template's KubeRay
    labels, which ``getSubmitterTemplate`` adds since KubeRay 1.7.0 only: ``template_labels``
    False is a pod of KubeRay 1.0-1.6, the Job controller's labels alone); ``kwargs``:
    :func:`builders.make_pod`'s phase, state, reason..."""
    pod = make_pod(f"{name}-{suffix}", name, containers=(SUBMITTER,), **kwargs)
    labels = pod.metadata.labels
    labels["batch.kubernetes.io/controller-uid"] = labels["controller-uid"] = (
        "uid-submitter-" + name)
    if template_labels:
        labels.update({"ray.io/originated-from-cr-name": name,
                       "ray.io/originated-from-crd": "RayJob", **KUBERAY_LABELS})
    pod.metadata.owner_references[0].uid = "uid-submitter-" + name
    return pod


def make_ray_pod(cluster: str, node_type: str, *, suffix: str = "8kptm",
                 containers: tuple[str, ...] | None = None, **kwargs: Any) -> Any:
    """A pod of the RayCluster ``cluster`` (``node_type`` head or worker), labelled as
    KubeRay's ``labelPod`` labels it, the RayCluster its controller owner."""
    group = "headgroup" if node_type == "head" else "gpu-group"
    shown = containers or (("ray-head",) if node_type == "head" else ("ray-worker",))
    name = f"{cluster}-{'head' if node_type == 'head' else group + '-worker'}-{suffix}"
    pod = make_pod(name, cluster, containers=shown, **kwargs)
    pod.metadata.labels = {
        "ray.io/is-ray-node": "yes", "ray.io/cluster": cluster, "ray.io/node-type": node_type,
        "ray.io/group": group, "ray.io/identifier": f"{cluster}-{node_type}",
        "app.kubernetes.io/name": "kuberay", **KUBERAY_LABELS}
    pod.metadata.owner_references = [V1OwnerReference(
        api_version=API_VERSION, kind="RayCluster", name=cluster, uid="uid-rc-" + cluster,
        controller=True, block_owner_deletion=True)]
    pod.spec.restart_policy = "Always"
    return pod


def add_rayjob(standin: Any, name: str, *, log: str | None = None, workers: int = 2,
               **kwargs: Any) -> None:
    """A running RayJob ``name`` in K8sJobMode in a ``KubeStandIn``: the RayJob, its
    submitter Job and pod (whose log, ``ray job logs --follow``, is ``log``: the driver's),
    its RayCluster's head and ``workers`` workers, each Ray pod's log its ``ray start``."""
    assert standin.rayjobs is not None
    standin.rayjobs[name] = make_rayjob(name, **kwargs)
    cluster = cluster_of(name)
    standin.jobs[name] = make_submitter_job(name)
    submitter = make_submitter_pod(name)
    standin.pods[submitter.metadata.name] = submitter
    head = make_ray_pod(cluster, "head")
    standin.pods[head.metadata.name] = head
    standin.logs[head.metadata.name] = RAY_START
    for index in range(workers):
        worker = make_ray_pod(cluster, "worker", suffix=f"w{index}zq")
        standin.pods[worker.metadata.name] = worker
        standin.logs[worker.metadata.name] = RAY_START
    if log is not None:
        standin.logs[submitter.metadata.name] = submitter_log(name, log)


RAY_START = ("2026-11-30 14:01:12,331\tINFO usage_lib.py:467 -- Usage stats collection is "
             "enabled by default without user confirmation because this terminal is detected "
             "to be non-interactive.\n"
             "2026-11-30 14:01:12,332\tINFO scripts.py:865 -- Local node IP: 10.4.1.17\n"
             "2026-11-30 14:01:15,002\tSUCC scripts.py:902 -- Ray runtime started.\n")
"""What a Ray pod's own container logs (``ray start --block``): never the driver's output."""


def submitter_log(name: str, driver: str) -> str:
    """The submitter pod's log: KubeRay's wait loop, ``ray job submit --no-wait``'s lines,
    then ``ray job logs --follow``: the driver's output as it prints it."""
    address = f"http://{cluster_of(name)}-head-svc.ml.svc.cluster.local:8265"
    return (f"Waiting for Ray Dashboard GCS to become healthy at {address} ...\n"
            f"2026-11-30 14:03:01,118\tINFO cli.py:41 -- Job submission server address: "
            f"{address}\n"
            "2026-11-30 14:03:01,904\tSUCC cli.py:65 -- "
            "-------------------------------------------------------\n"
            f"2026-11-30 14:03:01,904\tSUCC cli.py:66 -- Job '{name}-q9vzd' submitted "
            "successfully\n"
            "2026-11-30 14:03:01,904\tSUCC cli.py:67 -- "
            "-------------------------------------------------------\n"
            + driver)
