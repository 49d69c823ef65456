"""The labels the Kubernetes probe writes on a record: its markers, all under ``jobtables/``.

Policy: a marker says what the probe saw that the scheduler state cannot (a silent wedge, a
failed rank, a recurring pod failure, a restart under ``backoffLimit``, a sidecar holding the
pod, a workload of another kind sharing the name, the object's uid); its value is short text a
row can quote. :func:`record_labels` gives a record its labels: the workload's own (less any
under ``jobtables/``: only the probe writes markers), ``image``, ``config_hash`` and the
markers; the report reads them by the same strings (``report.pods``), never importing this wing.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from probes.kubernetes.attempts import FailedRank, describe_retry
from probes.kubernetes.pod_logs import log_container
from probes.kubernetes.restarts import GangRestart, PendingRetry, RestartInPlace
from probes.kubernetes.views import PodView, StateVerdict
from probes.models import JobState

if TYPE_CHECKING:  # annotation only: probes.kubernetes.objects imports this module
    from probes.kubernetes.objects import Workload


CONFIG_HASH_KEY = re.compile(r"config[-_.]?hash$", re.IGNORECASE)
MARKER_PREFIX = "jobtables/"
"""The probe's own record labels (markers) live under this prefix."""
WEDGE_LABEL = "jobtables/silent-wedge"
KIND_LABEL = "jobtables/kind"
RECURRING_LABEL = "jobtables/recurring-failure"
"""The failure repeated on consecutive attempts of one rank (``"3 attempts: Error, exit 1"``)."""
FAILED_RANK_LABEL = "jobtables/failed-rank"
"""A rank of a running multi-rank job failed and does not run again (``"rank 2 failed (Error,
exit 1): RuntimeError: ...; retry pending: ContainerCreating"``): ``attempts.failed_rank``."""
FAILED_RANK_POD_LABEL = "jobtables/failed-rank-pod"
"""That rank's failed pod (``pod/<name>``), whose log holds its error."""
SIDECAR_HELD_LABEL = "jobtables/sidecar-held"
"""The job's container ended while sidecars hold its pod running: ``"trainer ended (Error,
exit 1); still running: fluent-bit"`` (``states.sidecar_held``)."""
SAME_NAME_LABEL = "jobtables/same-name"
"""The other kinds (``JobSet``) that share the name of the workload ``jobtables job NAME``
shows (a Job and a JobSet may share a name): its answer says they exist."""
LAST_FAILURE_LABEL = "jobtables/last-failure"
"""How the last run of a container waiting in a fault (``CrashLoopBackOff``) ended, from its
``lastState.terminated``: ``"OOMKilled, exit 137"`` (the waiting reason outranks it); for one
that never ran, the kubelet's why: ``"CreateContainerConfigError: secret "x" not found"``."""
RESTARTING_LABEL = "jobtables/restarting"
"""A Job restarting after a failed attempt, under its ``backoffLimit``
(``probes.kubernetes.restarts``): a container restarted in place (``restartPolicy:
OnFailure``: ``"restart 3 of backoffLimit 6: trainer Error, exit 1"``), or a new pod after a
failed one (``"retry 1 of backoffLimit 6: Error, exit 1; retry pending: ContainerCreating"``)."""
RESTARTED_LABEL = "jobtables/restarted"
"""A Job running again after failed attempts (its retry runs): ``"restart 1 (Error, exit 1)"``,
the count and how the newest failed attempt ended; its container restarted in place
(``restartPolicy: OnFailure``): ``"restart 1 in place (Error, exit 1)"``; a restarted JobSet
whose gang is up again: ``"restart 1 of maxRestarts 3"`` (``attempts.retried_run``)."""
RESTARTED_POD_LABEL = "jobtables/restarted-pod"
"""That failed attempt's pod (``pod/<name>``; ``pod/<name> --previous`` for a restart in
place), whose log holds its error."""
_LIVE = frozenset({JobState.RUNNING, JobState.PENDING})
UID_LABEL = "jobtables/uid"
"""The object's uid: a Job re-created under the same name is another job (the bot's episodes)."""


def record_labels(work: Workload, leader: PodView | None, verdict: StateVerdict,
                  recurring: str | None = None,
                  rank: FailedRank | None = None, *, held: bool = False,
                  restart: RestartInPlace | None = None,
                  restarts_left: int = 0, retry: PendingRetry | None = None,
                  gang: GangRestart | None = None,
                  looping: str | None = None,
                  retried: tuple[str, str | None] | None = None) -> dict[str, str]:
    """The workload's labels plus ``image``, ``config_hash`` and the jobtables markers. A label
    of the job's own under ``jobtables/`` is dropped: only the probe writes its markers (a
    ``jobtables/silent-wedge`` label forced a terminal verdict on a healthy job)."""
    labels = {str(k): str(v) for k, v in work.labels.items()
              if not str(k).startswith(MARKER_PREFIX)}
    image = (leader.image if leader else None) or work.image
    if image:
        labels["image"] = image
    for source in (work.labels, work.annotations):
        for key, value in source.items():
            if CONFIG_HASH_KEY.search(key) and "config_hash" not in labels:
                labels["config_hash"] = str(value)
    labels[KIND_LABEL] = work.view.kind
    if work.uid:
        labels[UID_LABEL] = str(work.uid)
    if verdict.wedge:
        labels[WEDGE_LABEL] = verdict.wedge
    if recurring:
        labels[RECURRING_LABEL] = recurring
    if rank is not None:  # the probe adds the error its log or termination message gives
        labels[FAILED_RANK_LABEL] = rank.describe()
        labels[FAILED_RANK_POD_LABEL] = f"pod/{rank.pod.name}"
    if held and leader is not None and leader.held_by:
        job = log_container(replace(leader, failed_init=None)) or "the job's container"
        labels[SIDECAR_HELD_LABEL] = (f"{job} ended ({leader.held_end}); still running: "
                                      + ", ".join(leader.held_by))
    if restart is not None and verdict.state in _LIVE:
        labels[RESTARTING_LABEL] = restart.describe(restarts_left)
    elif retry is not None and verdict.state in _LIVE:
        labels[RESTARTING_LABEL] = describe_retry(retry)
    elif gang is not None and verdict.state in _LIVE:
        labels[RESTARTING_LABEL] = gang.describe()
    elif retried is not None and verdict.state is JobState.RUNNING and rank is None:
        # Running again after failed attempts: the row tells the restart (report.pods).
        labels[RESTARTED_LABEL] = retried[0]
        if retried[1] is not None:
            labels[RESTARTED_POD_LABEL] = retried[1]
    if looping:
        labels[LAST_FAILURE_LABEL] = looping
    return labels
