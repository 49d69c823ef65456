"""Kubernetes API objects for the stand-in, built with the client's own models.

Policy: every Job and Pod is a ``kubernetes_asyncio.client`` model (``V1Job``, ``V1Pod``,
``V1ContainerStatus`` ...) so that, once serialised by the client's own
``sanitize_for_serialization``, the JSON has exactly the real API's field names and nesting.
JobSets have no client model: they are dicts shaped like jobset.x-k8s.io/v1alpha2 objects,
with their metadata and pod template still built from client models.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes_asyncio.client import (
    ApiClient,
    V1Container,
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1Job,
    V1JobCondition,
    V1JobSpec,
    V1JobStatus,
    V1JobTemplateSpec,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
    V1PodTemplateSpec,
)

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
"""The tests' fixed 'now' (injected as the probe's clock)."""
IMAGE = "ghcr.io/example/trainer:2026.11"

# The client's serialiser needs no session: build the instance without __init__ so no
# aiohttp ClientSession is opened (and leaked) just to turn models into JSON.
_SERIALISER = ApiClient.__new__(ApiClient)


def to_json(obj: Any) -> Any:
    """The client's own JSON form of a model (the shape the real API server sends)."""
    return _SERIALISER.sanitize_for_serialization(obj)


def _template(containers: tuple[str, ...], labels: dict[str, str],
              restart_policy: str = "Never") -> V1PodTemplateSpec:
    return V1PodTemplateSpec(
        metadata=V1ObjectMeta(labels=labels),
        spec=V1PodSpec(
            restart_policy=restart_policy,
            containers=[
                V1Container(name=c, image=IMAGE, command=["python", "-m", "train"],
                            args=["--config", "cfg.yaml"])
                for c in containers
            ],
        ),
    )


def make_job(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    active: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    conditions: tuple[tuple[str, str | None], ...] = (),
    started: datetime | None = NOW - timedelta(hours=2),
    finished: datetime | None = None,
    suspend: bool = False,
    containers: tuple[str, ...] = ("trainer",),
    owner_jobset: str | None = None,
    backoff_limit: int = 0,
    restart_policy: str = "Never",
) -> V1Job:
    """A batch/v1 Job; ``conditions`` are ``(type, reason)`` pairs, all true;
    ``restart_policy`` is its pod template's."""
    owners = None
    if owner_jobset:
        owners = [V1OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet",
                                   name=owner_jobset, uid="u-" + owner_jobset, controller=True)]
    return V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=V1ObjectMeta(
            name=name, namespace="ml", uid="uid-" + name,
            labels={"team": "post-training", **(labels or {})},
            annotations=annotations, owner_references=owners,
            creation_timestamp=(started or NOW) - timedelta(minutes=1),
        ),
        spec=V1JobSpec(template=_template(containers, {"job-name": name}, restart_policy),
                       suspend=suspend, backoff_limit=backoff_limit),
        status=V1JobStatus(
            active=active or None, succeeded=succeeded or None, failed=failed or None,
            start_time=started, completion_time=finished if succeeded else None,
            conditions=[
                V1JobCondition(type=kind, status="True", reason=reason,
                               last_transition_time=finished or NOW)
                for kind, reason in conditions
            ] or None,
        ),
    )


def _state(state: str, reason: str | None) -> V1ContainerState:
    if state == "running":
        started = NOW - timedelta(hours=1)
        return V1ContainerState(running=V1ContainerStateRunning(started_at=started))
    if state == "waiting":
        return V1ContainerState(waiting=V1ContainerStateWaiting(reason=reason))
    code = 0 if reason == "Completed" else 137 if reason == "OOMKilled" else 1
    return V1ContainerState(terminated=V1ContainerStateTerminated(exit_code=code, reason=reason))


def make_pod(
    name: str,
    job: str,
    *,
    phase: str = "Running",
    state: str = "running",
    reason: str | None = None,
    containers: tuple[str, ...] = ("trainer",),
    jobset: str | None = None,
    index: int | None = None,
    created: datetime = NOW - timedelta(hours=1),
    restarts: int = 0,
    replicated_job: tuple[str, int] | None = None,
    restart_policy: str | None = None,
) -> V1Pod:
    """A pod of ``job`` as its Job controller makes it (the job-name and controller-uid
    labels, old and new, and the owner reference); every container is in ``state``
    (running/waiting/terminated). ``replicated_job``: (its JobSet replicated job's name, the
    child Job's index in it), labelled as the JobSet controller does."""
    labels = {"batch.kubernetes.io/job-name": job, "job-name": job,
              "batch.kubernetes.io/controller-uid": "uid-" + job, "controller-uid": "uid-" + job}
    if jobset:  # as the JobSet controller labels its Jobs' pod templates
        labels["jobset.sigs.k8s.io/jobset-name"] = jobset
        labels["jobset.sigs.k8s.io/jobset-uid"] = "uid-" + jobset
    if replicated_job:
        labels["jobset.sigs.k8s.io/replicatedjob-name"] = replicated_job[0]
        labels["jobset.sigs.k8s.io/job-index"] = str(replicated_job[1])
    if index is not None:
        labels["batch.kubernetes.io/job-completion-index"] = str(index)
    conditions = None
    if phase == "Pending" and state != "waiting":
        conditions = [V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable")]
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(name=name, namespace="ml", labels=labels, uid="uid-" + name,
                              creation_timestamp=created, owner_references=[
                                  V1OwnerReference(api_version="batch/v1", kind="Job", name=job,
                                                   uid="uid-" + job, controller=True)]),
        spec=V1PodSpec(node_name="gpu-node-07", restart_policy=restart_policy, containers=[
            V1Container(name=c, image=IMAGE) for c in containers
        ]),
        status=V1PodStatus(
            phase=phase,
            start_time=created + timedelta(seconds=5),
            conditions=conditions,
            container_statuses=[
                V1ContainerStatus(name=c, image=IMAGE, image_id="sha256:abc",
                                  ready=state == "running", restart_count=restarts,
                                  state=_state(state, reason))
                for c in containers
            ],
        ),
    )


def make_jobset(
    name: str,
    *,
    active_jobs: int = 1,
    conditions: tuple[tuple[str, str | None], ...] = (),
    labels: dict[str, str] | None = None,
    replicated: tuple[str, ...] = ("workers",),
) -> dict[str, Any]:
    """A JobSet as the custom-objects API returns it (a dict); ``replicated`` names its
    replicated jobs, in spec order."""
    meta = V1ObjectMeta(name=name, namespace="ml", uid="uid-" + name,
                        labels={"team": "post-training", **(labels or {})},
                        creation_timestamp=NOW - timedelta(hours=3))
    template = V1JobTemplateSpec(spec=V1JobSpec(template=_template(("trainer",), {})))
    terminal = next((kind for kind, _ in conditions if kind in ("Completed", "Failed")), None)
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": to_json(meta),
        "spec": {"replicatedJobs": [{"name": group, "replicas": 2, "template": to_json(template)}
                                    for group in replicated]},
        "status": {  # jobset.x-k8s.io/v1alpha2 JobSetStatus: one entry per replicated job
            "restarts": 0,
            "restartsCountTowardsMax": 0,
            **({"terminalState": terminal} if terminal else {}),
            "replicatedJobsStatus": [{"name": group, "ready": active_jobs if i == 0 else 0,
                                      "succeeded": 0, "failed": 0,
                                      "active": active_jobs if i == 0 else 0, "suspended": 0}
                                     for i, group in enumerate(replicated)],
            "conditions": [
                {"type": kind, "status": "True", "reason": reason,
                 "lastTransitionTime": NOW.isoformat().replace("+00:00", "Z")}
                for kind, reason in conditions
            ],
        },
    }


def add_namesakes(standin: Any, log: str | None = None) -> None:
    """A running Job ``rl-dup`` and a running JobSet of the same name, each with its pod (and
    ``log`` as each pod's log, when given), in a ``KubeStandIn``."""
    assert standin.jobsets is not None
    standin.jobs["rl-dup"] = make_job("rl-dup", active=1)
    standin.pods["rl-dup-0"] = make_pod("rl-dup-0", "rl-dup")
    standin.jobsets["rl-dup"] = make_jobset("rl-dup")
    standin.jobs["rl-dup-workers-0"] = make_job("rl-dup-workers-0", active=1,
                                                owner_jobset="rl-dup")
    standin.pods["rl-dup-workers-0-0"] = make_pod("rl-dup-workers-0-0", "rl-dup-workers-0",
                                                  jobset="rl-dup", index=0,
                                                  replicated_job=("workers", 0))
    if log is not None:
        standin.logs["rl-dup-0"] = log
        standin.logs["rl-dup-workers-0-0"] = log
