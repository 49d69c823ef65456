"""A Kubeflow training-operator job (kubeflow.org/v1, as a dict) as a :class:`Workload`: a
PyTorchJob, a TFJob or an MPIJob (:data:`KUBEFLOW_KINDS`).

Policy: pure, no I/O; the shapes are the operator's own (kubeflow/training-operator v1.9.0,
``pkg/apis/kubeflow.org/v1/pytorch_types.go``, ``tensorflow_types.go``, ``mpi_types.go`` and
``common_types.go``: the three kinds share ``runPolicy``, the ``JobStatus`` and the pod
labels, and differ in their replica specs' key and replica types):

- ``status.conditions`` of type Created, Running, Restarting, Succeeded, Failed, Suspended
  (their reasons ``PyTorchJob<type>``, ``util.NewReason``): Succeeded and Failed are
  terminal (:mod:`probes.kubernetes.states` reads them as a Job's Complete and Failed), the
  end ``status.completionTime``, else that condition's transition. A Failed condition whose
  message says the job ran past ``runPolicy.activeDeadlineSeconds`` (the operator's
  reason is PyTorchJobFailed either way) is read as the Job controller's
  ``DeadlineExceeded``: TIMEOUT.
- ``status.replicaStatuses`` (``Master``, ``Worker``: active, succeeded, failed) are summed
  as a JobSet's replicated jobs' are: active replicas with no pod at all is the silent wedge.
- ``runPolicy.backoffLimit`` bounds the restarts in place of its pods (the operator's
  ``PastBackoffLimit`` counts them as the Job controller does); unset, the operator sets no
  bound (:data:`NO_BACKOFF_LIMIT`). ``runPolicy.suspend`` is suspended.
- Its pods are the operator's bare pods: labelled ``training.kubeflow.org/job-name`` (the
  index key, ``objects.Workload.pod_labels``), ``replica-type`` (``master``, ``worker``: the
  pod's group) and ``replica-index`` (its rank, :mod:`probes.kubernetes.pod_status`), the
  PyTorchJob their controller owner. The log read is the master's (``first_group``):
  the ``Master`` replica's index 0, else (no Master replica) worker 0, as the operator's
  ``IsMasterRole`` gives the master role; a TFJob's ``Chief`` (or ``Master``), else worker 0
  (``tfjob_controller.go`` ``IsMasterRole``); an MPIJob's ``Launcher`` (the pod that runs
  ``mpirun`` and prints the run's output, ``mpijob_controller.go``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.kubernetes.objects import Workload, main_container_dict, timestamp
from probes.kubernetes.views import ConditionView, WorkloadView

PYTORCHJOB_GROUP, PYTORCHJOB_VERSION, PYTORCHJOB_PLURAL = "kubeflow.org", "v1", "pytorchjobs"
KUBEFLOW_KINDS = {
    "PyTorchJob": ("pytorchjobs", "pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfjobs", "tfReplicaSpecs", ("Chief", "Master", "Worker", "PS", "Evaluator")),
    "MPIJob": ("mpijobs", "mpiReplicaSpecs", ("Launcher", "Worker")),
}
"""Each training-operator kind: its plural, its replica specs' key, its replica types in the
order the log's pod is taken (the operator's master role first)."""
NO_BACKOFF_LIMIT = 2**31 - 1
"""A PyTorchJob without ``runPolicy.backoffLimit``: the operator fails it on no restart count."""
DEADLINE_SAID = "active longer than specified deadline"
"""The operator's Failed message for a job past ``activeDeadlineSeconds`` (``common/job.go``)."""


def pytorchjob_workload(obj: Mapping[str, Any]) -> Workload:
    """A PyTorchJob (kubeflow.org/v1, as a dict) as a :class:`Workload` (module policy)."""
    return kubeflow_workload(obj, "PyTorchJob")


def kubeflow_workload(obj: Mapping[str, Any], kind: str) -> Workload:
    """A training-operator job of ``kind`` (:data:`KUBEFLOW_KINDS`) as a :class:`Workload`."""
    _plural, specs_key, order = KUBEFLOW_KINDS[kind]
    # A custom object is the API's JSON, unchecked by any client model: a field of another
    # shape (a CRD of another version, an object edited by hand) is read as absent.
    meta, spec, status = (_dict(obj.get(key)) for key in ("metadata", "spec", "status"))
    run_policy = _dict(spec.get("runPolicy"))
    conditions = tuple(_condition(c) for c in _list(status.get("conditions"))
                       if isinstance(c, Mapping))
    replicas = {str(k): v for k, v in _dict(status.get("replicaStatuses")).items()
                if isinstance(v, Mapping)}
    limit = run_policy.get("backoffLimit")
    view = WorkloadView(
        kind=kind,
        name=str(meta.get("name")),
        conditions=conditions,
        suspended=bool(run_policy.get("suspend")),
        deleting=meta.get("deletionTimestamp") is not None,
        active=sum(_count(r, "active") for r in replicas.values()),
        succeeded=sum(_count(r, "succeeded") for r in replicas.values()),
        failed=sum(_count(r, "failed") for r in replicas.values()),
        backoff_limits=((None, limit if isinstance(limit, int) else NO_BACKOFF_LIMIT),),
    )
    terminal = view.condition("Succeeded", "Failed")
    specs = {k: _dict(v) for k, v in _dict(spec.get(specs_key)).items()}
    ordered = sorted((str(k) for k in specs), key=lambda k: (
        order.index(k) if k in order else len(order), k))
    leader = specs.get(ordered[0]) if ordered else None
    image, command = main_container_dict(_dict((leader or {}).get("template")))
    deadline = run_policy.get("activeDeadlineSeconds")
    return Workload(
        view=view,
        labels=_dict(meta.get("labels")),
        annotations=_dict(meta.get("annotations")),
        uid=meta.get("uid"),
        created=timestamp(meta.get("creationTimestamp")),
        started=timestamp(status.get("startTime")),
        finished=(timestamp(status.get("completionTime")) if terminal else None)
        or (terminal.last_transition if terminal else None),
        time_limit_s=deadline if isinstance(deadline, int) else None,
        image=image,
        command=command,
        restarts=view.failed,
        first_group=ordered[0].lower() if ordered else None,
    )


def _condition(cond: Mapping[str, Any]) -> ConditionView:
    """One condition; a Failed one past the deadline reads as the Job controller's
    ``DeadlineExceeded`` (the module policy)."""
    kind, message = str(cond.get("type")), cond.get("message")
    reason = cond.get("reason")
    if kind == "Failed" and DEADLINE_SAID in str(message or ""):
        reason = "DeadlineExceeded"
    return ConditionView(kind, str(cond.get("status")), reason,
                         timestamp(cond.get("lastTransitionTime")), message)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _count(replica: Mapping[str, Any], key: str) -> int:
    value = replica.get(key)
    return value if isinstance(value, int) else 0
