"""A pod's status (a client ``V1Pod``) reduced to the :class:`PodView` the state mapping, the
attempt reading and the log choice read.

Policy: pure, no I/O. Each container's state is read as the kubelet reports it: waiting
reasons (init containers included), how its last failed run ended (``"Error, exit 1"``, with
the termination message's shape to compare attempts), a crash awaiting its restart in place,
a crash loop caught running again, sidecars holding a pod whose job container ended; the
pod's disruption (``DisruptionTarget``, else ``status.reason``) and the scheduler's why.
Text from the cluster is whitespace-collapsed and shortened; nothing is made up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from probes.kubernetes.pod_logs import SIDECAR_CONTAINER, log_container
from probes.kubernetes.restarts import Crash
from probes.kubernetes.views import BACKOFF_RESET, FAULT_WAITING, PodView, Relapse
from probes.logs.lines import strip_ansi

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
"""A Kubeflow training-operator pod's replica type (``master``, ``worker``): its group."""
RANK_KEYS = ("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index",
             "training.kubeflow.org/replica-index")
"""A pod's indexes: an indexed Job's completion index, a JobSet's child Job index, a
training-operator replica's index (each replica type counts from 0)."""
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
"""A KubeRay pod's node type (``head``, ``worker``): its group; a worker is no rank 0 (the
driver runs beside the head, its output in the submitter's log)."""
RAY_CRD_LABEL = "ray.io/originated-from-crd"
"""On a RayJob's submitter pods (``RayJob``): their group is ``submitter``."""


def pod_view(pod: Any) -> PodView:
    """A ``V1Pod`` as a :class:`PodView`."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    init = list(status.init_container_statuses or ()) if status else []
    main = list(status.container_statuses or ()) if status else []
    waiting, terminated, exit_code = _container_states(init, main)
    failure, message = _failure(init, main)
    failed_init = _failed_init(init, main)
    if exit_code is None and failed_init is not None:
        exit_code = next(_init_failure(cs).exit_code for cs in init if cs.name == failed_init)
    disruption, said, unplaced = _conditions(status)
    keys = {**(meta.annotations or {}), **(meta.labels or {})}
    names = tuple(c.name for c in (spec.containers or ())) if spec else ()
    view = PodView(
        name=meta.name,
        phase=(status.phase if status and status.phase else "Pending"),
        created=meta.creation_timestamp,
        started=status.start_time if status else None,
        node=spec.node_name if spec else None,
        waiting=waiting,
        terminated=terminated,
        exit_code=exit_code,
        restarts=sum(cs.restart_count or 0 for cs in init + main),
        disruption=disruption,
        disruption_message=_said(said) or None,
        unschedulable=unplaced is not None,
        unschedulable_message=_scheduler_said(unplaced.message) if unplaced else None,
        rank0=(all(keys.get(key) in (None, "0") for key in RANK_KEYS)
               and (meta.labels or {}).get(RAY_NODE_TYPE_LABEL) != "worker"),
        rank=tuple(keys.get(key) for key in RANK_KEYS),
        group=_group(meta.labels or {}),
        failed_init=failed_init,
        deleting=meta.deletion_timestamp is not None,
        failure=failure,
        message=message,
        containers=names,
        default_container=(meta.annotations or {}).get(DEFAULT_CONTAINER),
        relapse=_relapse(main),
        fault_message=_fault_message(init, main),
    )
    return _job_container(view, spec, init, main)


def _group(labels: dict[str, str]) -> str | None:
    """The pod's group: its JobSet replicated job, its training-operator replica type, its
    Ray node type, or ``submitter`` for a RayJob's submitter pod."""
    for key in (REPLICATED_JOB_LABEL, REPLICA_TYPE_LABEL, RAY_NODE_TYPE_LABEL):
        if key in labels:
            return labels[key]
    return "submitter" if labels.get(RAY_CRD_LABEL) == "RayJob" else None


def _conditions(status: Any) -> tuple[Any, Any, Any]:
    """The pod's disruption (a ``DisruptionTarget`` condition's reason, else the pod's own
    status reason), what it said (that condition's message, else the status message), and
    its ``PodScheduled=False`` ``Unschedulable`` condition (``None`` when placed)."""
    conditions = list(status.conditions or ()) if status else []
    target = next((c for c in conditions if c.type == "DisruptionTarget" and c.status == "True"
                   and c.reason), None)
    disruption = target.reason if target else (status.reason if status else None)
    said = target.message if target else (status.message if status else None)
    unplaced = next((c for c in conditions if c.type == "PodScheduled" and c.status == "False"
                     and c.reason == "Unschedulable"), None)
    return disruption, said, unplaced


def _job_container(view: PodView, spec: Any, init: Sequence[Any],
                   main: Sequence[Any]) -> PodView:
    """``view`` completed from the job's own container (the one its log is read from): its
    image, how it crashed, the sidecars holding the pod after it, its restart in place."""
    chosen = log_container(replace(view, failed_init=None))  # the job's image, not the init's
    declared = (spec.containers or ()) if spec else ()
    image = next((c.image for c in declared if c.name == chosen), None)
    crash = _crash(view, init, main, chosen, spec.restart_policy if spec else None)
    # A crashed job container restarted in place holds nothing: it runs again.
    held_by, held_end = _sidecar_hold(main, chosen) if crash is None else ((), None)
    return replace(view, image=image, held_by=held_by, held_end=held_end, crash=crash,
                   in_place=_in_place(main, chosen))


def _in_place(main: Sequence[Any], chosen: str | None) -> tuple[int, str] | None:
    """The job container (``chosen``) running again after a restart in place: its restart
    count and how its last run ended (another container's restarts are not the job's)."""
    cs = next((cs for cs in main if cs.name == chosen), None)
    running = cs.state.running if cs is not None and cs.state else None
    ended = cs.last_state.terminated if cs is not None and cs.last_state else None
    if cs is None or running is None or ended is None or not cs.restart_count:
        return None
    return cs.restart_count, f"{ended.reason or 'Error'}, exit {ended.exit_code}"


def _fault_message(init: Sequence[Any], main: Sequence[Any]) -> str | None:
    """The message of the first container waiting in a fault (``FAULT_WAITING``) other than
    the crash loop's back-off (whose message only names the back-off: its last run says)."""
    for cs in [*init, *main]:
        waiting = cs.state.waiting if cs.state else None
        if (waiting is not None and waiting.reason in FAULT_WAITING
                and waiting.reason != "CrashLoopBackOff" and waiting.message):
            return _said(waiting.message)[:_MESSAGE_CHARS] or None
    return None


def _crash(view: PodView, init: Sequence[Any], main: Sequence[Any], chosen: str | None,
           policy: str | None) -> Crash | None:
    """The job's container (``chosen``; while the pod is Pending, an init container first)
    ended in failure in a live pod whose ``restartPolicy`` is ``OnFailure``: the kubelet
    restarts it in place (``probes.kubernetes.restarts``). A success is not restarted."""
    if policy != "OnFailure" or view.deleting or view.phase not in {"Running", "Pending"}:
        return None
    candidates = [cs for cs in main if cs.name == chosen]
    if view.phase == "Pending":
        candidates = [*init, *candidates]
    for cs in candidates:
        ended = cs.state.terminated if cs.state else None
        if ended is None or (ended.reason in (None, "Completed") and not ended.exit_code):
            continue
        ran = (ended.finished_at - ended.started_at
               if ended.started_at and ended.finished_at else None)
        return Crash(str(cs.name), f"{ended.reason or 'Error'}, exit {ended.exit_code}",
                     cs.restart_count or 0, ran)
    return None


def _sidecar_hold(main: Sequence[Any], chosen: str | None) -> tuple[tuple[str, ...], str | None]:
    """The sidecars (by name) still running after the job's container ``chosen`` ended, and
    how it ended; ``()`` unless it ended and only sidecars run (a second job container still
    running is the job still running)."""
    ended = next((cs.state.terminated for cs in main
                  if cs.name == chosen and cs.state and cs.state.terminated), None)
    running = [str(cs.name) for cs in main if cs.state and cs.state.running]
    if ended is None or not running or not all(SIDECAR_CONTAINER.search(n) for n in running):
        return (), None
    return tuple(running), f"{ended.reason or 'Error'}, exit {ended.exit_code}"


def _container_states(
    init: Sequence[Any], main: Sequence[Any]
) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """Waiting reasons, terminated reasons (current and last state) and the first exit code."""
    waiting = tuple(
        cs.state.waiting.reason for cs in [*init, *main]
        if cs.state and cs.state.waiting and cs.state.waiting.reason
    )
    terminated: list[str] = []
    exit_code: int | None = None
    for cs in main:
        for state in (cs.state, cs.last_state):
            ended = state.terminated if state else None
            if ended is not None:
                terminated.append(ended.reason or "Error")
                exit_code = ended.exit_code if exit_code is None else exit_code
    for cs in init:
        # An init container that completed is normal bring-up; only its failures count.
        ended = cs.state.terminated if cs.state else None
        if ended is not None and ended.reason not in (None, "Completed"):
            terminated.append(ended.reason)
    return waiting, tuple(terminated), exit_code


def _relapse(main: Sequence[Any]) -> Relapse | None:
    """The main container running again inside its crash loop (:class:`Relapse`), the one
    restarted most if several are: 2+ restarts of that container, its last run failed, and
    that run lasted less than the backoff reset (when its times are given)."""
    found: Relapse | None = None
    for cs in main:
        running = cs.state.running if cs.state else None
        ended = cs.last_state.terminated if cs.last_state else None
        if (running is None or running.started_at is None or ended is None
                or (cs.restart_count or 0) < 2):
            continue
        if ended.started_at and ended.finished_at and (
                ended.finished_at - ended.started_at >= BACKOFF_RESET):
            continue  # it ran past the reset before failing: the loop had ended
        failure, message = _failure((), [cs])
        if failure is not None and (found is None or cs.restart_count > found.restarts):
            found = Relapse(running.started_at, cs.restart_count, failure, message)
    return found


def _failed_init(init: Sequence[Any], main: Sequence[Any]) -> str | None:
    """The init container that ended in failure while no container has run yet, if any."""
    def ran(cs: Any) -> bool:
        now, last = cs.state, cs.last_state
        return bool((now and (now.running or now.terminated)) or (last and last.terminated))

    if any(ran(cs) for cs in main):
        return None
    for cs in init:
        ended = _init_failure(cs)
        if ended is not None:
            return str(cs.name)
    return None


def _init_failure(cs: Any) -> Any:
    """The init container's failed run: ended in failure (``restartPolicy: Never``), or in
    its crash loop (``OnFailure``: waiting to restart, the failed run in ``lastState``, whose
    log the kubelet serves), else ``None``."""
    ended = cs.state.terminated if cs.state else None
    if ended is None and cs.state is not None and cs.state.waiting is not None:
        ended = cs.last_state.terminated if cs.last_state else None
    if ended is not None and (ended.reason not in (None, "Completed") or ended.exit_code):
        return ended
    return None


def _said(text: Any) -> str:
    """A message from the cluster (a container writes its termination message itself) as a
    log line reads: terminal escapes stripped, whitespace collapsed (one line)."""
    return " ".join(strip_ansi(str(text or "")).split())


def _scheduler_said(message: Any) -> str | None:
    """Why the scheduler could not place the pod (``0/4 nodes are available: 4 Insufficient
    nvidia.com/gpu``), without its preemption part (why evicting others would not help)."""
    said = _said(message).split(". preemption:", 1)[0].rstrip(".")
    return said or None


_MESSAGE_NOISE = re.compile(r"0x[0-9a-f]+|\d+|/\S+", re.IGNORECASE)
_MESSAGE_CHARS = 200


def _failure(init: Sequence[Any], main: Sequence[Any]) -> tuple[str | None, str | None]:
    """The pod's last failed container run: ``"<reason>, exit <code>"``, then `` | `` and the
    termination message with ids, numbers and paths blanked (for comparing attempts); and that
    message as written (its end, where the error usually is)."""
    for cs in [*init, *main]:
        for state in (cs.state, cs.last_state):
            ended = state.terminated if state else None
            if ended is None or (ended.reason in (None, "Completed") and not ended.exit_code):
                continue
            text = f"{ended.reason or 'Error'}, exit {ended.exit_code}"
            message = _said(ended.message)
            if message:
                text += " | " + _MESSAGE_NOISE.sub("#", message.lower())[-_MESSAGE_CHARS:]
            return text, message[-_MESSAGE_CHARS:] or None
    return None, None
