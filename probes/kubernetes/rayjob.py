"""A KubeRay RayJob (ray.io/v1, as a dict) as a :class:`Workload`.

Policy: pure, no I/O; the shapes are KubeRay's own (ray-project/kuberay 1.x,
``ray-operator/apis/ray/v1/rayjob_types.go`` and ``controllers/ray/rayjob_controller.go``):

- ``status.jobDeploymentStatus`` decides, with ``jobStatus`` (the Ray job's) and
  ``reason``/``message``. ``Complete`` is the Ray job ended: ``SUCCEEDED`` COMPLETED,
  ``STOPPED`` (``ray job stop``) CANCELLED, ``FAILED`` FAILED. ``Failed`` (and
  ``ValidationFailed``) is FAILED ``<reason>: <message>``, TIMEOUT for ``DeadlineExceeded``
  (``spec.activeDeadlineSeconds`` passed). They are read as conditions
  (:mod:`probes.kubernetes.states` maps them as a Job's); the end is ``status.endTime``.
- ``Suspending``/``Suspended`` or ``spec.suspend`` (Kueue) is suspended. ``New``,
  ``Initializing`` (its RayCluster coming up, the job not submitted yet), ``Waiting``
  (InteractiveMode: waiting for the user's submission) and ``Retrying`` (an attempt failed
  under ``spec.backoffLimit``; a new RayCluster comes) are bring-up: PENDING, whatever its
  pods say; so is ``Running`` with ``jobStatus: PENDING`` (submitted, Ray has not started
  the driver: its runtime_env or resources being set up). ``Running`` is the Ray job
  submitted: one active driver, so running with no pod at all is the silent wedge.
  ``status.failed`` counts its failed attempts (restarts).
- Its pods are its submitter's (K8sJobMode: a batch Job named as the RayJob, its controller;
  its pods labelled ``job-name: <the RayJob>`` by the Job controller, and since KubeRay 1.7.0
  ``ray.io/originated-from-cr-name``/``-crd: RayJob`` too) and its RayCluster's
  (``ray.io/cluster: <status.rayClusterName>``; ``ray.io/node-type`` head or worker, their
  group; a RayJob on an existing RayCluster, ``spec.clusterSelector``, has its submitter's
  only: the cluster is not its own, its pods older than it). The driver's output is the
  submitter's log (``ray job logs --follow``): the log read is the submitter pod
  (``first_group`` ``submitter``), else the head pod, whose ``ray-job-submitter`` container
  (SidecarMode) is the driver's too (:mod:`probes.kubernetes.pod_logs`). In HTTPMode and
  InteractiveMode no container's log holds the driver's output (it is in the head's
  ``/tmp/ray`` session logs): the head's own log is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.kubernetes.objects import (
    JOB_NAME_LABELS,
    RAY_CLUSTER_LABEL,
    RAYJOB_NAME_LABEL,
    Workload,
    main_container_dict,
    timestamp,
)
from probes.kubernetes.views import ConditionView, WorkloadView

RAYJOB_GROUP, RAYJOB_VERSION, RAYJOB_PLURAL = "ray.io", "v1", "rayjobs"
SUBMITTER_GROUP = "submitter"
"""The group of a RayJob's submitter pods (:mod:`probes.kubernetes.pod_status`)."""
HEAD_GROUP = "head"
BRING_UP = frozenset({"", "New", "Initializing", "Waiting", "Retrying",
                      "WaitForDashboard", "WaitForDashboardReady", "WaitForK8sJob"})
"""Deployment statuses before the Ray job runs (KubeRay's ``JobDeploymentStatus``; the
``WaitFor...`` ones KubeRay 1.0's)."""
SUSPENDED = frozenset({"Suspending", "Suspended"})
FINISHED = {"SUCCEEDED": "Succeeded", "STOPPED": "Stopped", "FAILED": "Failed"}
"""A ``Complete`` deployment's Ray job status, as the condition the state mapping reads."""


def rayjob_workload(obj: Mapping[str, Any]) -> Workload:
    """A RayJob (ray.io/v1, as a dict) as a :class:`Workload` (module policy)."""
    # A custom object is the API's JSON, unchecked by any client model: a field of another
    # shape (a CRD of another version, an object edited by hand) is read as absent.
    meta, spec, status = (_dict(obj.get(key)) for key in ("metadata", "spec", "status"))
    deployment = _str(status.get("jobDeploymentStatus"))
    ended = timestamp(_str(status.get("endTime")) or None)
    condition = _condition(deployment, status, ended)
    failed = _int(status.get("failed"))
    view = WorkloadView(
        kind="RayJob",
        name=str(meta.get("name")),
        conditions=(condition,) if condition else (),
        suspended=bool(spec.get("suspend")) or deployment in SUSPENDED,
        deleting=meta.get("deletionTimestamp") is not None,
        active=1 if deployment == "Running" else 0,
        failed=failed,
        bring_up=_bring_up(deployment, status, failed, spec),
    )
    mode = _str(spec.get("submissionMode")) or "K8sJobMode"
    head = _dict(_dict(_dict(spec.get("rayClusterSpec")).get("headGroupSpec")).get("template"))
    image, _ = main_container_dict(head)
    entrypoint = _str(spec.get("entrypoint")).strip()
    deadline = spec.get("activeDeadlineSeconds")
    # On an existing RayCluster (``clusterSelector``) the cluster is not the RayJob's own.
    cluster = "" if _dict(spec.get("clusterSelector")) else _str(status.get("rayClusterName"))
    name = str(meta.get("name"))
    return Workload(
        view=view,
        labels=_dict(meta.get("labels")),
        annotations=_dict(meta.get("annotations")),
        uid=meta.get("uid"),
        created=timestamp(meta.get("creationTimestamp")),
        started=timestamp(_str(status.get("startTime")) or None),
        finished=ended if condition else None,
        time_limit_s=deadline if isinstance(deadline, int) else None,
        image=image,
        command=entrypoint[:400] or None,
        restarts=failed,
        first_group=SUBMITTER_GROUP if mode == "K8sJobMode" else HEAD_GROUP,
        pod_sets=(*(((label, name) for label in (RAYJOB_NAME_LABEL, *JOB_NAME_LABELS))
                    if mode == "K8sJobMode" else ()),
                  *(((RAY_CLUSTER_LABEL, cluster),) if cluster else ())),
    )


def _condition(deployment: str, status: Mapping[str, Any],
               ended: Any) -> ConditionView | None:
    """The terminal deployment status as a condition (``None`` while it is not over)."""
    reason, message = _str(status.get("reason")) or None, _str(status.get("message")) or None
    if deployment == "Complete":
        kind = FINISHED.get(_str(status.get("jobStatus")), "Succeeded")
        return ConditionView(kind, "True", reason or kind, ended,
                             message if kind != "Succeeded" else None)
    if deployment in ("Failed", "ValidationFailed"):
        return ConditionView("Failed", "True", reason or deployment, ended, message)
    return None


def _bring_up(deployment: str, status: Mapping[str, Any], failed: int,
              spec: Mapping[str, Any]) -> str | None:
    """The reason of a RayJob not running its Ray job yet (``None``: it is, or it ended)."""
    if deployment == "Running" and status.get("jobStatus") == "PENDING":
        # Submitted; Ray has not started the driver (runtime_env setup, entrypoint resources).
        return "Ray job PENDING: its runtime_env or resources are being set up"
    if deployment not in BRING_UP:
        return None
    if deployment == "Retrying" or (failed and deployment != "Waiting"):
        limit = spec.get("backoffLimit")
        bound = f" of backoffLimit {limit}" if isinstance(limit, int) else ""
        return f"Retrying: attempt {failed}{bound} failed, a new RayCluster comes up"
    return deployment or "New"


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
