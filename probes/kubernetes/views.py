"""The views of Kubernetes objects that the state mapping, the attempt reading and the log
choice read: a Job's or JobSet's status (:class:`WorkloadView`), one pod's (:class:`PodView`),
and the mapped state (:class:`StateVerdict`), with the few helpers all of them use.

Policy: plain frozen dataclasses, built from client models by :mod:`probes.kubernetes.objects`
only; nothing here does I/O or decides a state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from probes.kubernetes.restarts import Crash
from probes.models import JobState

BRING_UP_WAITING = frozenset(
    {"ContainerCreating", "PodInitializing", "ErrImagePull", "ImagePullBackOff"}
)
"""Container waiting reasons that are part of bring-up and heal on their own."""


FAULT_WAITING = frozenset(
    {"CrashLoopBackOff", "CreateContainerConfigError", "InvalidImageName", "RunContainerError"}
)
"""Container waiting reasons that are real faults (they do not heal without a change)."""


DISRUPTION_CHARS = 240
"""The disruption's message quoted after its reason (the kubelet's names the resource the node
ran low on and the container using it)."""


BACKOFF_RESET = timedelta(minutes=10)
"""The kubelet resets a container's restart backoff once it has run this long without
crashing: a restarted container running for less is still in its crash loop, caught between
two crashes (it reads Running, then CrashLoopBackOff again)."""


@dataclass(frozen=True, slots=True)
class ConditionView:
    """One ``status.conditions`` entry, reduced to what the mapping reads."""

    type: str
    status: str
    reason: str | None = None
    last_transition: datetime | None = None
    message: str | None = None
    """The controller's words for it, whitespace collapsed (a failed JobSet's only why once
    its child Jobs are gone: "jobset failed due to reaching max number of restarts")."""

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    def describe(self) -> str | None:
        """``<reason>: <message>`` (the message shortened), or whichever of them it has."""
        message = " ".join((self.message or "").split())
        if len(message) > DISRUPTION_CHARS:
            message = message[:DISRUPTION_CHARS - 1].rstrip() + "…"
        if not message:
            return self.reason
        return f"{self.reason}: {message}" if self.reason else message


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """A batch/v1 Job or a JobSet, as the state mapping sees it."""

    kind: str
    name: str
    conditions: tuple[ConditionView, ...] = ()
    suspended: bool = False
    deleting: bool = False
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    backoff_limits: tuple[tuple[str | None, int], ...] = ()
    """``spec.backoffLimit`` by JobSet replicated job (a Job's under ``None``): see
    :mod:`probes.kubernetes.restarts`."""
    per_index_limit: int | None = None
    """An indexed Job's ``spec.backoffLimitPerIndex``: each index retried that many times."""
    failure_policy: bool = False
    """The Job has a ``spec.podFailurePolicy``: its rules decide which failed pods count
    toward ``backoffLimit`` (an ``Ignore``d one does not), so only the controller's own count,
    ``status.failed``, says the limit is passed."""
    restarts_left: int = 0
    """A JobSet's restarts left under ``failurePolicy.maxRestarts``: a child Job that fails
    then restarts the JobSet, no end of it."""
    max_restarts: int | None = None
    """A JobSet's ``failurePolicy.maxRestarts`` (``None``: no failure policy)."""
    bring_up: str | None = None
    """Its controller says the job is not running yet (a RayJob's RayCluster coming up, or
    retrying after a failed attempt): PENDING with this reason, whatever its pods say."""

    def condition(self, *types: str) -> ConditionView | None:
        """The first true condition of one of ``types``, in the order given."""
        for wanted in types:
            for cond in self.conditions:
                if cond.type == wanted and cond.is_true:
                    return cond
        return None


@dataclass(frozen=True, slots=True)
class Relapse:
    """A main container running again after 2+ restarts whose last run failed within
    :data:`BACKOFF_RESET` of its start (so the kubelet had not reset its backoff: the runs
    before it failed in a row too). Its current run started at ``started``: caught within
    :data:`BACKOFF_RESET` of that, it is between two crashes of one loop. Counted per
    container: restarts of other containers (a sidecar, an init container) are not its."""

    started: datetime
    restarts: int
    failure: str
    """``"<reason>, exit <code>"``, then `` | `` and the blanked message, as ``PodView.failure``."""
    message: str | None = None


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod of a workload, reduced to what the mapping and the log fetch read."""

    name: str
    phase: str
    created: datetime | None = None
    started: datetime | None = None
    node: str | None = None
    waiting: tuple[str, ...] = ()
    """Waiting reasons of its containers (init containers included)."""
    terminated: tuple[str, ...] = ()
    """Terminated reasons, current and last state (``OOMKilled``, ``Error``, ``Completed``)."""
    exit_code: int | None = None
    restarts: int = 0
    disruption: str | None = None
    """``DisruptionTarget`` reason or ``status.reason`` (``Evicted``, ``NodeLost``)."""
    disruption_message: str | None = None
    """That condition's (or the status's) message, whitespace collapsed."""
    unschedulable: bool = False
    unschedulable_message: str | None = None
    """The scheduler's why (``0/4 nodes are available: 4 Insufficient nvidia.com/gpu``)."""
    rank0: bool = True
    """Completion/job index 0 (or not indexed): where trainers log their metrics."""
    containers: tuple[str, ...] = ()
    default_container: str | None = None
    image: str | None = None
    deleting: bool = False
    """``metadata.deletionTimestamp`` is set: the pod is terminating (preempted, evicted,
    drained, deleted) and no longer runs the job, whatever its phase still says."""
    failed_init: str | None = None
    """The init container that failed before any of its containers started (its log says
    why the pod never ran: the containers' own logs are empty)."""
    failure: str | None = None
    """How its last failed container run ended (``Error, exit 1``, ``OOMKilled, exit 137``),
    with the termination message's shape: equal on two attempts, the same failure."""
    message: str | None = None
    """That run's termination message, as written (whitespace collapsed, shortened)."""
    in_place: tuple[int, str] | None = None
    """Its job container restarted in place (``restartPolicy: OnFailure``) and running again:
    its ``restartCount`` and how its last run ended (``lastState.terminated``: ``Error, exit
    1``), whether or not the kubelet has reset its backoff since."""
    rank: tuple[str | None, ...] = ()
    """Its completion / JobSet job index (empty values when not indexed): retries of one rank
    are consecutive attempts, failures of several ranks at once are one."""
    group: str | None = None
    """Its JobSet replicated job (``leader``, ``workers``): each has its own job index 0."""
    relapse: Relapse | None = None
    """Its container running again inside a crash loop, if one is (:class:`Relapse`)."""
    held_by: tuple[str, ...] = ()
    """The sidecars still running after the job's container ended (a log shipper run as a
    plain container): they hold the pod Running, and the Job never ends on its own."""
    held_end: str | None = None
    """How the job's container ended then (``Completed, exit 0``, ``Error, exit 1``)."""
    fault_message: str | None = None
    """The kubelet's message of a container waiting in a fault it never ran past
    (``CreateContainerConfigError``: ``secret "hf-token" not found``), whitespace collapsed."""
    crash: Crash | None = None
    """Its job container (or, while it is Pending, an init container) ended in failure and
    the kubelet will restart it in place (``restartPolicy: OnFailure``)."""


@dataclass(frozen=True, slots=True)
class StateVerdict:
    """The mapped state, the reason to show, and the silent-wedge marker if any."""

    state: JobState
    reason: str | None = None
    wedge: str | None = None


def disruption_text(pod: PodView) -> str | None:
    """The pod's disruption reason, and its message when it has one
    (``TerminationByKubelet: The node was low on resource: memory. ...``)."""
    if not pod.disruption or not pod.disruption_message:
        return pod.disruption
    message = pod.disruption_message
    if len(message) > DISRUPTION_CHARS:
        message = message[:DISRUPTION_CHARS - 1].rstrip() + "…"
    return f"{pod.disruption}: {message}"


def bring_up_reason(pod: PodView) -> str:
    waiting = first_given(reason for reason in pod.waiting if reason in BRING_UP_WAITING)
    if waiting:
        return waiting
    if pod.unschedulable:
        said = pod.unschedulable_message
        if said and len(said) > DISRUPTION_CHARS:
            said = said[:DISRUPTION_CHARS - 1].rstrip() + "…"
        return f"Unschedulable: {said}" if said else "Unschedulable"
    return pod.waiting[0] if pod.waiting else "PodPending"


def first_given(values: Iterable[str | None]) -> str | None:
    for value in values:
        if value:
            return value
    return None


def newest_pod(pods: Sequence[PodView]) -> PodView | None:
    """The most recently created pod (creation time, then name, as a stable tiebreak)."""
    if not pods:
        return None
    return max(pods, key=lambda pod: (created_stamp(pod.created), pod.name))


def created_stamp(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else float("-inf")
