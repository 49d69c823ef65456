"""Pure mapping from Kubernetes Job/JobSet and Pod status onto the contract's ``JobState``.

Policy (the seed: liveness is a state poll of the job lifecycle, never a log grep):

- A terminal condition decides first. ``Complete`` (a JobSet's ``Completed``, a PyTorchJob's
  ``Succeeded``) -> COMPLETED; ``Stopped`` (a RayJob's Ray job stopped) -> CANCELLED;
  ``Failed`` (or
  ``FailureTarget``) -> OUT_OF_MEMORY when any pod was ``OOMKilled``, TIMEOUT for
  ``DeadlineExceeded``, PREEMPTED / NODE_FAIL when a pod was disrupted that way, else FAILED.
- Bring-up is never a fault: suspended (Kueue admission), unschedulable, ``ContainerCreating``,
  ``PodInitializing`` and image pull back-off stay PENDING with the reason set, so the report
  puts the job in the buffer-filling table. A terminating pod (``deletionTimestamp``) no
  longer runs the job: its replacement's bring-up, or ``PodTerminating`` until there is one.
  ``CrashLoopBackOff`` keeps the job RUNNING but
  is carried as the reason (a real fault the report can name). A rank of a running
  multi-rank workload (indexed Job, JobSet) that failed and does not run again (its retry
  pending or not created yet) is no bring-up either: RUNNING, reason ``RankFailed``.
- A workload whose status counts active pods while none exist is the silent-wedge
  signature: RUNNING with zero pods and ``wedge="no-pods"``; the report treats it as terminal.

Nothing here does I/O: the views (:mod:`probes.kubernetes.views`) are built from client models
by :mod:`probes.kubernetes.objects`; a workload's failed attempts are read by
:mod:`probes.kubernetes.attempts`, the log to read chosen by :mod:`probes.kubernetes.pod_logs`.
The functions are tested by a parametrised table.
"""

from __future__ import annotations

from collections.abc import Sequence

from probes.kubernetes.attempts import failed_rank
from probes.kubernetes.restarts import pending_retry, restart_in_place
from probes.kubernetes.views import (
    FAULT_WAITING,
    PodView,
    StateVerdict,
    WorkloadView,
    bring_up_reason,
    created_stamp,
    disruption_text,
    first_given,
    newest_pod,
)
from probes.models import JobState

SUSPENDED = "Suspended"
"""The reason of a suspended workload (Kueue admission, or preempted and queued again): it
may carry the ``startTime`` of an earlier run while it has no pods, and is no wedge."""


TERMINATING = "PodTerminating"
"""The reason of a live workload whose only live pods are terminating (being replaced)."""


RANK_FAILED = "RankFailed"
"""The reason of a running multi-rank workload one rank of which failed and is not running
again (its retry pending, or not created yet): see :func:`failed_rank`."""


PREEMPTION_REASONS = frozenset({"PreemptionByScheduler", "PreemptionByKubeScheduler", "Preempted",
                                "EvictionByEvictionAPI"})
"""Pod disruptions that took its resources for another use: the scheduler's preemption (its
1.26 name ``PreemptionByKubeScheduler`` too), an eviction through the Eviction API (a drain,
an autoscaler's scale-down): not the job's own failure, as SLURM's PREEMPTED."""


NODE_FAILURE_REASONS = frozenset(
    {"NodeLost", "DeletionByPodGC", "TerminationByKubelet", "DeletionByTaintManager",
     "Evicted", "Terminated", "Shutdown"}
)
"""Pod disruptions by its node: lost, tainted NoExecute (unreachable / not ready), or the
kubelet terminating it (``TerminationByKubelet``: node-pressure eviction, graceful node
shutdown; where no ``DisruptionTarget`` condition is set, its ``status.reason``: ``Evicted``,
``Terminated``, before 1.22 ``Shutdown``)."""


ADMISSION_REJECTIONS = frozenset({
    "UnexpectedAdmissionError", "NodeAffinity", "InvalidNodeInfo", "TaintToleration",
    "TopologyAffinityError",
})
"""A pod's ``status.reason`` when its node's kubelet refused it at admission (besides
``OutOf<resource>``: the node lacks what the pod requests, e.g. ``OutOfnvidia.com/gpu`` when
its device plugin advertises no GPU; kubelet ``lifecycle/predicate.go``, whose predicates
include ``TaintToleration``: a NoExecute taint on the node; and the topology manager's
``TopologyAffinityError``: the node cannot align the GPUs and CPUs asked for under its
``single-numa-node``/``restricted`` policy): no container ran, the node is at fault."""


def node_failure(reason: str | None) -> bool:
    """A pod disruption or rejection caused by its node (:data:`NODE_FAILURE_REASONS`, a
    kubelet admission rejection)."""
    return bool(reason) and (reason in NODE_FAILURE_REASONS or reason in ADMISSION_REJECTIONS
                             or str(reason).startswith("OutOf"))


def map_workload_state(work: WorkloadView, pods: Sequence[PodView]) -> StateVerdict:
    """Map a workload and its pods onto one contract state (see the module policy)."""
    terminal = _terminal_state(work, pods)
    if terminal is not None:
        return terminal
    if work.deleting:
        return StateVerdict(JobState.CANCELLED, "Deleting")
    if work.suspended or work.condition("Suspended") is not None:
        return StateVerdict(JobState.PENDING, SUSPENDED)
    if work.bring_up is not None and (pods or not work.active):  # active, no pod: a wedge
        fault = first_given(reason for pod in pods for reason in pod.waiting
                            if reason in FAULT_WAITING)
        return StateVerdict(JobState.PENDING, fault or work.bring_up)
    if not pods:
        if work.active > 0:
            return StateVerdict(JobState.RUNNING, "NoPods", wedge="no-pods")
        return StateVerdict(JobState.PENDING, "PodsNotCreated")
    restart = restart_in_place(work, pods)
    if restart is not None and restart.exhausted and work.restarts_left <= 0:
        # The controller fails the Job as this restart reaches backoffLimit: no restart.
        if restart.crash.failure.startswith("OOMKilled"):
            return StateVerdict(JobState.OUT_OF_MEMORY, "OOMKilled")
        return StateVerdict(JobState.FAILED, BACKOFF_LIMIT_EXCEEDED)
    retry = pending_retry(work, pods)
    # The failed pods listed count before the controller has counted the newest, unless a
    # podFailurePolicy decides what counts (an Ignored eviction is no failure toward the limit).
    counted = work.failed if work.failure_policy else retry.attempt if retry else 0
    if retry is not None and not retry.per_index and counted > retry.limit:
        # Its failures passed backoffLimit: the controller fails the Job, no retry comes.
        if "OOMKilled" in retry.failed.terminated:
            return StateVerdict(JobState.OUT_OF_MEMORY, "OOMKilled")
        return StateVerdict(JobState.FAILED, BACKOFF_LIMIT_EXCEEDED)
    held = sidecar_held(pods)
    if held is not None:
        return held
    return _live_state(pods)


BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
"""The Job controller's reason for a Job whose restarts reached ``backoffLimit``."""


SIDECAR_HELD = "SidecarHeld"
"""The reason of a job whose every live pod is held Running by sidecars alone (its job
container ended): COMPLETING when each ended with exit 0, else FAILED (OUT_OF_MEMORY,
reason ``OOMKilled``, when one was)."""


def sidecar_held(pods: Sequence[PodView]) -> StateVerdict | None:
    """The job's end when every live pod's job container ended and only sidecars run on."""
    live = [pod for pod in pods if pod.phase in {"Running", "Pending"} and not pod.deleting]
    if not live or not all(pod.held_by for pod in live):
        return None
    if any((pod.held_end or "").startswith("OOMKilled") for pod in live):
        return StateVerdict(JobState.OUT_OF_MEMORY, "OOMKilled")
    ok = all((pod.held_end or "").endswith(", exit 0") for pod in live)
    return StateVerdict(JobState.COMPLETING if ok else JobState.FAILED, SIDECAR_HELD)


def _terminal_state(work: WorkloadView, pods: Sequence[PodView]) -> StateVerdict | None:
    # A Job's, a JobSet's, a PyTorchJob's success.
    if work.condition("Complete", "Completed", "Succeeded") is not None:
        return StateVerdict(JobState.COMPLETED)
    stopped = work.condition("Stopped")
    if stopped is not None:
        return StateVerdict(JobState.CANCELLED, stopped.describe() or "Stopped")
    failed = work.condition("Failed", "FailureTarget")
    if failed is None:
        if work.condition("SuccessCriteriaMet") is not None:
            return StateVerdict(JobState.COMPLETING, "SuccessCriteriaMet")
        return None
    if any("OOMKilled" in pod.terminated for pod in pods):
        return StateVerdict(JobState.OUT_OF_MEMORY, "OOMKilled")
    if failed.reason == "DeadlineExceeded":
        return StateVerdict(JobState.TIMEOUT, failed.reason)
    # Only each rank's last attempt ended the job: a preempted first attempt whose retries
    # then crashed failed by the crash.
    last = [pod for pod in _last_attempts(pods) if pod.disruption]
    for state, caused in ((JobState.PREEMPTED, PREEMPTION_REASONS.__contains__),
                          (JobState.NODE_FAIL, node_failure)):
        hit = sorted((pod for pod in last if caused(pod.disruption)),
                     key=lambda pod: str(pod.disruption))
        if hit:
            return StateVerdict(state, disruption_text(hit[0]))
    # The condition's message says why (a JobSet whose children are gone has nothing else).
    return StateVerdict(JobState.FAILED, failed.describe() or "Failed")


def _last_attempts(pods: Sequence[PodView]) -> list[PodView]:
    """Each rank's newest pod (a JobSet's replicated jobs each have their own ranks)."""
    ranks: dict[tuple[str | None, ...], PodView] = {}
    for pod in pods:
        key = (pod.group, *pod.rank)
        kept = ranks.get(key)
        if kept is None or ((created_stamp(pod.created), pod.name)
                            > (created_stamp(kept.created), kept.name)):
            ranks[key] = pod
    return list(ranks.values())


def _live_state(pods: Sequence[PodView]) -> StateVerdict:
    """A non-terminal workload with pods: running, in bring-up, or between retries."""
    running = [pod for pod in pods if pod.phase == "Running" and not pod.deleting]
    pending = [pod for pod in pods if pod.phase == "Pending" and not pod.deleting]
    fault = first_given(reason for pod in pods for reason in pod.waiting if reason in FAULT_WAITING)
    if running:
        bring_up = first_given(bring_up_reason(pod) for pod in pending)
        # Any pod: a rank that failed OOMKilled while the others run is the job's OOM too.
        oom = first_given("OOMKilled" for pod in pods if "OOMKilled" in pod.terminated)
        # A rank that failed and does not run again: no healthy job, whatever its rank 0 logs.
        rank = RANK_FAILED if failed_rank(pods) is not None else None
        return StateVerdict(JobState.RUNNING, fault or oom or rank or bring_up)
    if pending:
        return StateVerdict(JobState.PENDING,
                            fault or first_given(bring_up_reason(p) for p in pending))
    if any(pod.deleting and pod.phase in {"Running", "Pending"} for pod in pods):
        # Its pods are being killed and the controller has not replaced them yet.
        return StateVerdict(JobState.PENDING, fault or TERMINATING)
    if all(pod.phase == "Succeeded" for pod in pods):
        return StateVerdict(JobState.COMPLETING, "PodsSucceeded")
    if all(pod.phase == "Unknown" for pod in pods):
        # Its node stopped reporting (the node lifecycle controller's NodeLost): say which.
        lost = disruption_text(newest_pod(pods) or pods[0])
        return StateVerdict(JobState.UNKNOWN, f"{UNKNOWN_PHASE}: {lost}" if lost
                            else UNKNOWN_PHASE)
    # Every pod ended and the controller has not decided yet: it is backing off before
    # the next retry. The newest failure's reason is the story; the job is not terminal. An
    # eviction (a disruption) says more than the 'Error' its kill left, an OOM kill more
    # than the eviction.
    newest = newest_pod(pods)
    reason = None
    if newest is not None:
        ended = [r for r in newest.terminated if r != "Completed"]
        reason = first_given(["OOMKilled" if "OOMKilled" in ended else None,
                         disruption_text(newest), *ended])
    return StateVerdict(JobState.PENDING, reason or "BackoffBetweenRetries")


UNKNOWN_PHASE = "pod phase Unknown"
"""The reason of a workload whose every pod's phase is ``Unknown`` (its node is not reporting),
followed by the pod's own reason and message when it has them (``NodeLost: Node x which was
running pod y is unresponsive``)."""
