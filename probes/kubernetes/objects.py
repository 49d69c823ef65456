"""Kubernetes API objects (client models and JobSet dicts) reduced to views and records.

Policy: pure functions, no I/O. A batch/v1 Job arrives as the client's ``V1Job`` model, a
JobSet as the plain dict the custom-objects API returns; both become one :class:`Workload`
so the rest of the probe never branches on the kind. The Job (or JobSet) name is the job id
and its name (what ``kubectl get`` lists); a JobSet that shares its name with a Job (other
resources: Kubernetes allows it) has kubectl's ``jobset/<name>`` as its id, so each has a
(cluster, id) of its own: ``app.kubernetes.io/name`` is the application's
name, shared by every run a chart launches, and renamed (and re-bucketed) them all. The owner
comes from the cluster's ``user_keys`` (labels first, then annotations). Labels carry the
image and a config hash when present: the report reads them for ``deep-probe``. Missing facts
stay ``None``; nothing is made up. A pod becomes its view in
:mod:`probes.kubernetes.pod_status`.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from probes.config import KubernetesCluster
from probes.kubernetes.attempts import failed_rank, repeated_pod_failure, retried_run
from probes.kubernetes.markers import record_labels
from probes.kubernetes.pod_logs import log_container, log_pod
from probes.kubernetes.pod_status import DEFAULT_CONTAINER
from probes.kubernetes.restarts import (
    DEFAULT_BACKOFF_LIMIT,
    gang_restart,
    pending_retry,
    restart_in_place,
)
from probes.kubernetes.states import sidecar_held
from probes.kubernetes.views import (
    FAULT_WAITING,
    ConditionView,
    PodView,
    StateVerdict,
    WorkloadView,
    newest_pod,
)
from probes.models import SchedulerRecord

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
"""Pod labels naming the owning Job: the current one first, the pre-1.27 one as a fallback."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
PYTORCHJOB_NAME_LABEL = "training.kubeflow.org/job-name"
"""The Kubeflow training operator's pod label naming the owning PyTorchJob."""
RAYJOB_NAME_LABEL = "ray.io/originated-from-cr-name"
"""KubeRay's label naming the RayJob on its submitter pods (with ``ray.io/originated-from-crd:
RayJob``, :data:`RAY_CRD_LABEL`)."""
RAY_CRD_LABEL = "ray.io/originated-from-crd"
RAY_CLUSTER_LABEL = "ray.io/cluster"
"""KubeRay's label naming a Ray pod's RayCluster (a RayJob's ``status.rayClusterName``)."""
POD_OWNER_LABELS = (*JOB_NAME_LABELS, JOBSET_NAME_LABEL, PYTORCHJOB_NAME_LABEL,
                    RAYJOB_NAME_LABEL, RAY_CLUSTER_LABEL)
"""The labels a pod is matched to its workload by (see ``Workload.pod_labels``)."""
_COMMAND_CHARS = 400


@dataclass(frozen=True, slots=True)
class Workload:
    """One reportable unit (a Job or a JobSet) with the metadata the record needs."""

    view: WorkloadView
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    time_limit_s: int | None = None
    image: str | None = None
    command: str | None = None
    restarts: int = 0
    owned_by_jobset: bool = False
    owned_by_rayjob: str | None = None
    """A Job's controller RayJob's uid (its submitter Job: reported through the RayJob)."""
    uid: str | None = None
    first_group: str | None = None
    """A JobSet's first replicated job (its leader's pods are read): ``log_pod``."""
    qualified: bool = False
    """Its id is ``jobset/<name>``: a Job of its name is listed too (:func:`qualify`)."""
    pod_sets: tuple[tuple[str, str], ...] = ()
    """(label, value) pairs each marking some of its pods, all of them its (a RayJob's
    submitter's and its RayCluster's); empty: ``pod_labels``' first that marks any."""
    submitter_uids: frozenset[str] = frozenset()
    """A RayJob's submitter Jobs' uids (listed Jobs whose controller it is): its submitter
    pods carry one as their controller-uid."""

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def job_id(self) -> str:
        """The name, or ``<kind>/<name>`` (kubectl's form) when another kind shares it."""
        return f"{self.view.kind.lower()}/{self.name}" if self.qualified else self.name

    def pod_labels(self) -> tuple[tuple[str, str], ...]:
        """The (label, value) pairs that mark this workload's pods, preferred first."""
        if self.view.kind == "JobSet":
            return ((JOBSET_NAME_LABEL, self.name),)
        if self.view.kind in ("PyTorchJob", "TFJob", "MPIJob"):  # the training operator's
            return ((PYTORCHJOB_NAME_LABEL, self.name),)
        if self.pod_sets:
            return self.pod_sets
        return tuple((label, self.name) for label in JOB_NAME_LABELS)


def qualify(workloads: Sequence[Workload], jobs_seen: Collection[str] = ()) -> list[Workload]:
    """The workloads, each named like a workload of a kind before its own in
    :data:`QUALIFY_ORDER` (a Job listed or in ``jobs_seen``, a JobSet, a PyTorchJob) with the
    id ``<kind>/<name>`` (``jobset/x``, ``pytorchjob/x``, ``rayjob/x``): the Job keeps the
    bare name (CONTRACT: a Kubernetes job's id is its name); two rows never share an id."""
    first: dict[str, int] = dict.fromkeys(jobs_seen, 0)
    for work in workloads:
        first[work.name] = min(first.get(work.name, _order(work)), _order(work))
    return [replace(work, qualified=True) if first[work.name] < _order(work) else work
            for work in workloads]


QUALIFY_ORDER = ("Job", "JobSet", "PyTorchJob", "RayJob", "TFJob", "MPIJob")
"""The kinds in the order they keep a shared name (the Job first, kubectl's bare name)."""


def _order(work: Workload) -> int:
    kind = work.view.kind
    return QUALIFY_ORDER.index(kind) if kind in QUALIFY_ORDER else len(QUALIFY_ORDER)


def job_workload(job: Any) -> Workload:
    """A ``V1Job`` as a :class:`Workload`."""
    meta, spec, status = job.metadata, job.spec, job.status
    conditions = tuple(
        ConditionView(c.type, c.status, c.reason, c.last_transition_time, c.message)
        for c in (status.conditions if status and status.conditions else ())
    )
    view = WorkloadView(
        kind="Job",
        name=meta.name,
        conditions=conditions,
        suspended=bool(spec and spec.suspend),
        deleting=meta.deletion_timestamp is not None,
        active=(status.active or 0) if status else 0,
        succeeded=(status.succeeded or 0) if status else 0,
        failed=(status.failed or 0) if status else 0,
        backoff_limits=((None, _backoff_limit(spec.backoff_limit if spec else None)),),
        per_index_limit=getattr(spec, "backoff_limit_per_index", None) if spec else None,
        failure_policy=getattr(spec, "pod_failure_policy", None) is not None,
    )
    terminal = view.condition("Complete", "Failed")
    finished = status.completion_time if status else None
    containers = list(spec.template.spec.containers or ()) if spec and spec.template.spec else []
    image, command = _main_container(containers, spec.template.metadata if spec else None)
    owners = meta.owner_references or ()
    return Workload(
        view=view,
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        created=meta.creation_timestamp,
        started=status.start_time if status else None,
        finished=finished or (terminal.last_transition if terminal else None),
        time_limit_s=spec.active_deadline_seconds if spec else None,
        image=image,
        command=command,
        restarts=view.failed,
        owned_by_jobset=any(owner.kind == "JobSet" for owner in owners),
        owned_by_rayjob=next((owner.uid for owner in owners
                              if owner.kind == "RayJob" and owner.controller), None),
        uid=getattr(meta, "uid", None),
    )


def jobset_workload(obj: Mapping[str, Any]) -> Workload:
    """A JobSet (jobset.x-k8s.io/v1alpha2, as a dict) as a :class:`Workload`."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = tuple(
        ConditionView(
            str(c.get("type")), str(c.get("status")), c.get("reason"),
            timestamp(c.get("lastTransitionTime")), c.get("message"),
        )
        for c in status.get("conditions") or ()
    )
    replicated = status.get("replicatedJobsStatus") or ()
    replicated_jobs = list(spec.get("replicatedJobs") or ())
    templates = [r.get("template") or {} for r in replicated_jobs]
    view = WorkloadView(
        kind="JobSet",
        name=str(meta.get("name")),
        conditions=conditions,
        suspended=bool(spec.get("suspend")),
        deleting=meta.get("deletionTimestamp") is not None,
        active=sum(int(r.get("active") or 0) for r in replicated),
        succeeded=sum(int(r.get("succeeded") or 0) for r in replicated),
        failed=sum(int(r.get("failed") or 0) for r in replicated),
        backoff_limits=tuple(
            (str(r.get("name")), _backoff_limit((t.get("spec") or {}).get("backoffLimit")))
            for r, t in zip(replicated_jobs, templates, strict=True)),
        restarts_left=_restarts_left(spec, status),
        max_restarts=_max_restarts(spec),
    )
    terminal = view.condition("Completed", "Failed")
    pod_template = ((templates[0].get("spec") or {}).get("template") or {}) if templates else {}
    image, command = main_container_dict(pod_template)
    return Workload(
        view=view,
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        uid=meta.get("uid"),
        created=timestamp(meta.get("creationTimestamp")),
        finished=terminal.last_transition if terminal else None,
        image=image,
        command=command,
        restarts=int(status.get("restarts") or 0),
        first_group=str(replicated_jobs[0].get("name") or "") or None if replicated_jobs
        else None,
    )


def build_record(
    cluster: KubernetesCluster,
    work: Workload,
    pods: Sequence[PodView],
    verdict: StateVerdict,
    now: datetime,
) -> SchedulerRecord:
    """The contract's scheduler record for one workload, its pods and its mapped state."""
    leader = log_pod(pods, work.first_group)
    newest = leader or newest_pod(pods)
    started = work.started or min((p.started for p in pods if p.started), default=None)
    elapsed = None
    if started is not None:
        elapsed = max(0, int(((work.finished or now) - started).total_seconds()))
    return SchedulerRecord(
        cluster=cluster.name,
        job_id=work.job_id,
        name=work.name,
        user=owner_of(work, cluster.user_keys),
        state=verdict.state,
        reason=verdict.reason,
        submit_time=work.created,
        start_time=started,
        end_time=work.finished,
        elapsed_s=elapsed,
        time_limit_s=work.time_limit_s,
        stdout_path=f"pod/{leader.name}" if leader else None,
        exit_code=newest.exit_code if newest else None,
        command=work.command,
        nodes=",".join(sorted({p.node for p in pods if p.node})) or None,
        restarts=work.restarts + sum(p.restarts for p in pods),
        pods_total=len(pods),
        pods_running=sum(1 for p in pods if p.phase == "Running" and not p.deleting),
        labels=record_labels(work, leader, verdict, repeated_pod_failure(pods, now),
                             failed_rank(pods), held=sidecar_held(pods) is not None,
                             restart=restart_in_place(work.view, pods),
                             restarts_left=work.view.restarts_left,
                             retry=pending_retry(work.view, pods),
                             gang=gang_restart(work.view, work.restarts, pods),
                             looping=_looping(pods, verdict),
                             retried=retried_run(work.view, pods, work.restarts)),
    )


def owner_of(work: Workload, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` present in the labels, then in the annotations."""
    for source in (work.labels, work.annotations):
        for key in keys:
            if source.get(key):
                return str(source[key])
    return None


CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
"""The owning Job's uid on each of its pods (the Job controller sets both, 1.27+; the second
alone before)."""
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"


def owned_by(pod: Any, work: Workload) -> bool:
    """The pod is this workload's, not only named after it: a pod carries its Job's uid (the
    controller-uid label, else a controller owner reference), a JobSet's pods its uid label
    where JobSet sets one. A Job re-created under the same name (its old pods still listed)
    or a bare pod labelled ``job-name: <someone else's job>`` is another object: its log and
    state are never read as this job's."""
    if not work.uid:
        return True
    meta = pod.metadata
    labels = meta.labels or {}
    if work.view.kind == "JobSet":
        uid = labels.get(JOBSET_UID_LABEL)
        return uid is None or uid == work.uid
    if work.view.kind == "RayJob":
        return _rayjobs(pod, labels, work)
    for key in CONTROLLER_UID_LABELS:
        if key in labels:
            return bool(labels[key] == work.uid)
    return any(ref.uid == work.uid and ref.controller for ref in meta.owner_references or ())


def _rayjobs(pod: Any, labels: Mapping[str, str], work: Workload) -> bool:
    """A pod is the RayJob's: its RayCluster's (the ``ray.io/cluster`` its status names,
    indexed so) or its submitter's (``ray.io/originated-from-crd: RayJob``, or before
    KubeRay 1.7 the Job controller's ``job-name`` alone; the controller-uid one of its
    submitter Jobs' when listed), never created before the RayJob itself (a re-created
    RayJob's predecessor's pods; its RayCluster's name is new each attempt)."""
    created = pod.metadata.creation_timestamp
    if work.created is not None and created is not None and created < work.created:
        return False
    if RAY_CLUSTER_LABEL in labels:
        return True
    if labels.get(RAY_CRD_LABEL) != "RayJob" and not any(
            labels.get(key) == work.name for key in JOB_NAME_LABELS):
        return False
    uid = next((labels[key] for key in CONTROLLER_UID_LABELS if key in labels), None)
    return not work.submitter_uids or uid in work.submitter_uids


def _looping(pods: Sequence[PodView], verdict: StateVerdict) -> str | None:
    """How the last run of the container waiting in the job's fault ended (``OOMKilled, exit
    137``), when the job's reason is such a wait (``CrashLoopBackOff``)."""
    if verdict.reason not in FAULT_WAITING:
        return None
    for pod in pods:
        if verdict.reason in pod.waiting and (pod.failure or pod.fault_message):
            return (pod.failure.split(" | ", 1)[0] if pod.failure
                    else f"{verdict.reason}: {pod.fault_message}")
    return None


def _main_container(containers: Sequence[Any], template_meta: Any) -> tuple[str | None, str | None]:
    annotations = (template_meta.annotations or {}) if template_meta else {}
    names = tuple(c.name for c in containers)
    chosen = log_container(PodView(name="", phase="", containers=names,
                                   default_container=annotations.get(DEFAULT_CONTAINER)))
    for container in containers:
        if container.name == chosen:
            return container.image, _command(container.command, container.args)
    return None, None


def main_container_dict(template: Mapping[str, Any]) -> tuple[str | None, str | None]:
    containers = (template.get("spec") or {}).get("containers") or ()
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    names = tuple(str(c.get("name")) for c in containers)
    chosen = log_container(PodView(name="", phase="", containers=names,
                                   default_container=annotations.get(DEFAULT_CONTAINER)))
    for container in containers:
        if container.get("name") == chosen:
            return container.get("image"), _command(container.get("command"), container.get("args"))
    return None, None


def _command(command: Sequence[str] | None, args: Sequence[str] | None) -> str | None:
    words = [*(command or ()), *(args or ())]
    return shlex.join(words)[:_COMMAND_CHARS] if words else None


def _restarts_left(spec: Mapping[str, Any], status: Mapping[str, Any]) -> int:
    """A JobSet's restarts left: ``failurePolicy.maxRestarts`` (none without a policy) less
    those counted toward it (``restartsCountTowardsMax``, else ``restarts``)."""
    allowed = (spec.get("failurePolicy") or {}).get("maxRestarts")
    used = status.get("restartsCountTowardsMax", status.get("restarts"))
    if not isinstance(allowed, int):
        return 0
    return max(0, allowed - (used if isinstance(used, int) else 0))


def _max_restarts(spec: Mapping[str, Any]) -> int | None:
    """A JobSet's ``failurePolicy.maxRestarts``, when it has a failure policy."""
    allowed = (spec.get("failurePolicy") or {}).get("maxRestarts")
    return allowed if isinstance(allowed, int) else None


def _backoff_limit(value: Any) -> int:
    """A Job spec's ``backoffLimit``, the API server's default when it is not given."""
    return int(value) if isinstance(value, int) else DEFAULT_BACKOFF_LIMIT


def timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from a JobSet dict (the client only parses typed models)."""
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
