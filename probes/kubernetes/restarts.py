"""A Job that is restarting after a failed attempt: in place, or by a new pod.

Policy: a failed attempt of a Job that is not over is no bring-up, no healthy run and no
failed job: it is restarting, counted against ``backoffLimit`` as the Job controller counts.

- In place (``restartPolicy: OnFailure``): the kubelet restarts a failed container in its
  pod; between the crash and the restart the pod stays Running (kubelet ``getPhase``: "in the
  process of restarting") and the container reads ``state.terminated``: no failed job and no
  job held by its sidecars. The Job controller fails the Job once the restarts of its Running
  and Pending pods reach ``backoffLimit`` (``pastBackoffLimitOnFailure``; with
  ``backoffLimit: 0``, any restart): a crash whose restart reaches it ends the Job
  (``BackoffLimitExceeded``), before the controller has written its Failed condition. A
  JobSet's child Jobs each count their own pods' restarts against their own template's
  ``backoffLimit``; a child Job that fails so restarts the JobSet while its
  ``failurePolicy.maxRestarts`` allows. A Kubeflow PyTorchJob counts the restarts of its
  Running pods of every replica type against ``runPolicy.backoffLimit`` (the training
  operator's ``PastBackoffLimit``).
- By a new pod (``restartPolicy: Never``): the attempt's pod Failed (a crash, an eviction, a
  preemption), no pod runs, and the controller creates the next one (after its backoff): the
  retry is pending, or not created yet. ``status.failed`` counts the attempts that failed
  (or the failed pods listed, before the controller has counted the newest): once they pass
  ``backoffLimit`` no retry comes, the Job is FAILED (``BackoffLimitExceeded``); an indexed
  Job's ``backoffLimitPerIndex`` counts that index's failed pods.

Pure: the views are built by ``probes.kubernetes.objects``; ``probes.kubernetes.states`` maps
an exhausted limit to FAILED, ``probes.kubernetes.attempts`` words a retry; the record's
``jobtables/restarting`` label carries either for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probes.kubernetes.views import PodView, WorkloadView

DEFAULT_BACKOFF_LIMIT = 6
"""The API server's default ``spec.backoffLimit`` (what a Job that sets none has)."""


@dataclass(frozen=True, slots=True)
class Crash:
    """A container of a live OnFailure pod that ended in failure and awaits its restart."""

    container: str
    failure: str
    """``"<reason>, exit <code>"`` (``Error, exit 1``, ``OOMKilled, exit 137``)."""
    restarts: int = 0
    """That container's own ``restartCount`` (the runs before this one)."""
    ran: timedelta | None = None
    """How long its run lasted (``startedAt`` to ``finishedAt``), when both are given."""


@dataclass(frozen=True, slots=True)
class RestartInPlace:
    """A crashed container's coming restart, as the Job controller counts it."""

    pod: PodView
    crash: Crash
    restart: int
    """The restart to come: its child Job's pods' restarts so far, plus this one."""
    limit: int

    @property
    def exhausted(self) -> bool:
        """This restart reaches ``backoffLimit``: the controller fails the Job with it."""
        return self.restart >= max(self.limit, 1)

    def describe(self, restarts_left: int = 0) -> str:
        """``restart 3 of backoffLimit 6: trainer Error, exit 1`` (the count first: a Trend
        cell keeps the start), its pod named when the workload has ranks (an indexed Job, a
        JobSet); a limit reached that restarts the JobSet says so."""
        ranked = any(value is not None for value in self.pod.rank)
        then = (f" (its Job fails; the JobSet restarts, {restarts_left} restart(s) left)"
                if self.exhausted else "")
        return (f"restart {self.restart} of backoffLimit {self.limit}{then}: "
                f"{'pod/' + self.pod.name + ' ' if ranked else ''}{self.crash.container} "
                f"{self.crash.failure}")


def restart_in_place(work: WorkloadView, pods: Sequence[PodView]) -> RestartInPlace | None:
    """The first crashed container awaiting its restart in place (by pod name), with its
    child Job's restart count and limit; ``None`` when no live pod has one."""
    crashed = sorted(((pod.name, pod, pod.crash) for pod in pods if pod.crash is not None),
                     key=lambda found: found[0])
    if not crashed:
        return None
    _, pod, crash = crashed[0]
    if work.kind == "PyTorchJob":
        # The training operator's PastBackoffLimit: every replica type's Running pods.
        tally = sum(other.restarts for other in pods if other.phase == "Running")
    else:
        child = _child_job(pod)
        tally = sum(other.restarts for other in pods
                    if _child_job(other) == child and other.phase in {"Running", "Pending"})
    limits = dict(work.backoff_limits)
    limit = limits.get(pod.group, limits.get(None, DEFAULT_BACKOFF_LIMIT))
    return RestartInPlace(pod=pod, crash=crash, restart=tally + 1, limit=limit)


@dataclass(frozen=True, slots=True)
class PendingRetry:
    """A Job's failed attempt (its pod Failed) and its retry to come, no pod running."""

    failed: PodView
    retry: PodView | None
    """The replacement, still pending; ``None`` while the controller backs off."""
    attempt: int
    """Failed attempts so far (``status.failed``, or the failed pods listed if more; with a
    ``backoffLimitPerIndex``, its index's failed pods)."""
    limit: int
    per_index: bool = False
    """``limit`` is the Job's ``backoffLimitPerIndex`` (its ``backoffLimit`` is then unset:
    the API server's largest int32)."""


def pending_retry(work: WorkloadView, pods: Sequence[PodView]) -> PendingRetry | None:
    """A Job (not a JobSet: its restarts are its own) none of whose pods runs, whose newest
    failed pod is followed by a pending one or by none yet; ``None`` otherwise."""
    if work.kind != "Job":
        return None
    live = [pod for pod in pods if not pod.deleting]
    failed = [pod for pod in pods if pod.phase == "Failed"]
    if not failed or any(pod.phase == "Running" for pod in live):
        return None
    last = max(failed, key=_order)
    later = [pod for pod in live if pod.phase == "Pending" and _order(pod) > _order(last)]
    if any(pod.phase == "Pending" for pod in live) and not later:
        return None  # an older attempt still pending: no retry of the failed one
    retry = max(later, key=_order) if later else None
    if work.per_index_limit is not None:
        index = [pod for pod in failed if pod.rank == last.rank]
        return PendingRetry(failed=last, retry=retry, attempt=len(index),
                            limit=work.per_index_limit, per_index=True)
    limits = dict(work.backoff_limits)
    return PendingRetry(failed=last, retry=retry, attempt=max(work.failed, len(failed)),
                        limit=limits.get(None, DEFAULT_BACKOFF_LIMIT))


def _order(pod: PodView) -> tuple[float, str]:
    return (pod.created.timestamp() if pod.created else float("-inf"), pod.name)


def _child_job(pod: PodView) -> tuple[str | None, str | None]:
    """The pod's Job: a JobSet's pods by replicated job and job index, a Job's all one."""
    return pod.group, (pod.rank[1] if len(pod.rank) > 1 else None)


@dataclass(frozen=True, slots=True)
class GangRestart:
    """A JobSet its failure policy restarted (a child Job failed: every child Job deleted and
    created again), whose new gang is still coming up: a failed attempt, no fresh launch."""

    restarts: int
    """``status.restarts``: the JobSet's restarts so far."""
    max_restarts: int | None
    """``spec.failurePolicy.maxRestarts`` (``None``: no policy given)."""
    waiting: str
    """What the new gang waits on (a pending pod's reason, or its pods not created yet)."""

    def describe(self) -> str:
        """``restart 1 of the JobSet's maxRestarts 3: a child Job failed; the new gang is
        coming up (ContainerCreating)`` (the count first: a Trend cell keeps the start)."""
        limit = ("" if self.max_restarts is None
                 else f" of the JobSet's maxRestarts {self.max_restarts}")
        return (f"restart {self.restarts}{limit}: a child Job failed; the new gang is coming "
                f"up ({self.waiting})")


def gang_restart(work: WorkloadView, restarts: int,
                 pods: Sequence[PodView]) -> GangRestart | None:
    """A restarted JobSet (``restarts`` > 0) none of whose live pods runs yet, or only some
    of them (a gang steps only once every rank is up); ``None`` for a Job, a first launch,
    or a gang that is up again (the restart is behind it)."""
    if work.kind != "JobSet" or restarts <= 0:
        return None
    live = [pod for pod in pods if not pod.deleting and pod.phase in {"Running", "Pending"}]
    pending = [pod for pod in live if pod.phase == "Pending"]
    if live and not pending:
        return None
    waiting = "pods not created yet"
    if pending:
        pod = pending[0]
        waiting = pod.waiting[0] if pod.waiting else (
            "Unschedulable" if pod.unschedulable else "PodPending")
    return GangRestart(restarts=restarts, max_restarts=work.max_restarts, waiting=waiting)
