"""Kubernetes pod-level rules: the silent wedge and container faults that never self-heal.

Policy (seed, Kubernetes clusters: "running-but-0-pods or a record that has disappeared is
TERMINAL"): a RUNNING job with zero pods, or one the probe reports as vanished (reason
``vanished``, label ``jobtables/silent-wedge``), is flagged ``silent-wedge``, verdict
``failed``; so is a job Kubernetes started (``status.startTime``) that has 0 active pods and no
pod at all past ``AbsenceRules.k8s_no_pods_grace_minutes``. A container waiting on a real fault
(``CrashLoopBackOff``,
``CreateContainerConfigError``, ``InvalidImageName``, ``RunContainerError``) is no bring-up: the
job is ``failed`` with a ``diagnose`` and leaves the buffer table. Image pulls and container
creation stay bring-up (seed: transient image-pull self-heal is benign). The probe's spellings
are repeated here because ``report`` may not import
``probes.kubernetes``; a test holds them equal.
"""

from __future__ import annotations

from probes.models import JobState
from report.cells import format_duration
from report.failure_text import AGENT_LOGS_NOTE, diagnosis, fault_text, first_fault
from report.findings import Findings, JudgeContext, Priority, minutes_since
from report.rules import ABSENCE
from report.trend import shorten

WEDGE_LABEL = "jobtables/silent-wedge"
"""The label the Kubernetes probe sets on a silently wedged job (``no-pods`` or ``vanished``);
spelled here because ``report`` may not import ``probes.kubernetes``."""
VANISHED = "vanished"
SUSPENDED = "Suspended"
"""The probe's reason for a suspended workload (Kueue admission, or preempted and queued again):
it may keep an earlier run's start time with no pods, and waits; it is no wedge."""
FAULT_WAITING_REASONS = frozenset(
    {"CrashLoopBackOff", "CreateContainerConfigError", "InvalidImageName", "RunContainerError"}
)
"""Kubernetes container waiting reasons that are real faults (``probes.kubernetes.views``); image
pulls and container creation are bring-up and stay in the buffer table."""
RECURRING_LABEL = "jobtables/recurring-failure"
"""The probe's label for a failure repeated on consecutive attempts of one rank (a Job's
retries, a container's restarts): ``"<n> attempts: <reason>, exit <code>"``, then `` | `` and
the newest attempt's termination message when it left one."""
FAILED_RANK_LABEL = "jobtables/failed-rank"
"""The probe's label for a rank of a running multi-rank job (indexed Job, JobSet) that failed
and does not run again: ``"rank 2 failed (Error, exit 1): <its first error>; retry pending:
ContainerCreating"``."""
FAILED_RANK_POD_LABEL = "jobtables/failed-rank-pod"
"""That rank's failed pod (``pod/<name>``)."""
KIND_LABEL = "jobtables/kind"
"""The probe's label naming the workload's kind (``Job``, ``JobSet``)."""
SIDECAR_HELD_LABEL = "jobtables/sidecar-held"
"""The probe's label for a pod held running by sidecars after the job's container ended
(``"trainer ended (Error, exit 1); still running: fluent-bit"``)."""
LAST_FAILURE_LABEL = "jobtables/last-failure"
"""The probe's label for how the last run of a container waiting in a fault ended
(``"OOMKilled, exit 137"``)."""
RESTARTING_LABEL = "jobtables/restarting"
"""The probe's label for a Job restarting after a failed attempt under its ``backoffLimit``: a
container restarted in place (``restartPolicy: OnFailure``: ``"restart 3 of backoffLimit 6:
trainer Error, exit 1"``) or a new pod after a failed one (``"retry 1 of backoffLimit 6: Error,
exit 1; retry pending: ContainerCreating"``)."""
RESTARTED_LABEL = "jobtables/restarted"
"""The probe's label for a Job running again after failed attempts (its retry runs): ``"restart
1 (Error, exit 1)"``; for a restarted JobSet whose gang is up again, ``"restart 1 of maxRestarts
3"``."""
RESTARTED_POD_LABEL = "jobtables/restarted-pod"
"""That newest failed attempt's pod (``pod/<name>``)."""
SAME_NAME_LABEL = "jobtables/same-name"
"""The probe's label on the workload ``jobtables job NAME`` shows when other kinds share its
name (a Job and a JobSet): ``"JobSet"``."""
_LIVE_STATES = frozenset({JobState.PENDING, JobState.RUNNING, JobState.COMPLETING})

RESTART_END_MAX = 44
"""The most of a Trend's restart end (``; restart 1 (Evicted: ...)``), so that with the
shortened text before it the Trend stays within ``TREND_MAX``."""


def _not_bring_up(f: Findings) -> None:
    """A fault found: the job leaves the buffer table (no buffer-filling, no buffering)."""
    if "buffer-filling" in f.flags:
        f.flags.remove("buffer-filling")
    f.verdicts.discard("buffering")


def silent_wedge_rule(ctx: JudgeContext, f: Findings) -> None:
    """RUNNING with 0 pods, a started job with 0 active pods and no pods at all (past the
    controller's grace), or a job record that disappeared (the probe marks it): terminal. A
    suspended job (queued for admission, or preempted by Kueue and queued again) keeps its
    start time with no pods and is waiting, not wedged."""
    record = ctx.facts.record
    marker = record.labels.get(WEDGE_LABEL)
    vanished = marker == VANISHED or (record.reason == VANISHED and record.pods_total == 0)
    started = minutes_since(ctx.now, record.start_time)
    if vanished:
        text = "silent wedge: job record disappeared while active"
    elif ctx.running and (record.pods_total == 0 or marker is not None):
        text = "silent wedge: running but 0 pods"
    elif (ctx.state is JobState.PENDING and record.pods_total == 0
          and record.reason != SUSPENDED
          and not record.pods_running and started is not None
          and started > ABSENCE.k8s_no_pods_grace_minutes):
        text = "silent wedge: started, but 0 active pods and no pods"
    else:
        return
    # A wedge is no bring-up: it leaves the buffer table.
    _not_bring_up(f)
    f.flag("silent-wedge")
    f.verdict("failed")
    f.trend(Priority.TERMINAL + 3, text)
    f.recommend(Priority.DIAGNOSE + 3, "diagnose",
                f"{text}; terminal on Kubernetes (never a live job): resubmit")


IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
"""Waiting reasons of a pull that may heal (bring-up) until it has failed for too long."""


def image_pull_rule(ctx: JudgeContext, f: Findings) -> None:
    """An image pull still failing past ``AbsenceRules.k8s_image_pull_grace_minutes`` since
    the job started is no self-healing bring-up (seed: *transient* image-pull self-heal is
    benign): the job is ``failed`` with a diagnose, out of the buffer table (a bad tag sat
    in "Filling buffer" forever)."""
    record = ctx.facts.record
    if record.reason not in IMAGE_PULL_REASONS or ctx.state not in _LIVE_STATES:
        return
    waited = minutes_since(ctx.now, record.start_time or record.submit_time)
    if waited is None or waited <= ABSENCE.k8s_image_pull_grace_minutes:
        return
    _not_bring_up(f)
    f.verdict("failed")
    text = f"{record.reason} for {format_duration(waited * 60)}: the image pull is failing"
    f.trend(Priority.TERMINAL, text)
    f.recommend(Priority.DIAGNOSE, "diagnose",
                text + "; check the image name and tag and the registry credentials")


def live_oom_rule(ctx: JudgeContext, f: Findings) -> None:
    """A live job one of whose containers was ``OOMKilled`` (restarted since, or one rank of
    an indexed job failed while the others run, or the job backing off before its retry):
    an ``oom`` and a warning, not a healthy row or a buffer filling (it read as either)."""
    if ctx.facts.record.reason != "OOMKilled" or ctx.state not in _LIVE_STATES:
        return
    _not_bring_up(f)
    f.flag("oom")
    f.verdict("warning")
    restarts = ctx.facts.record.restarts
    text = "OOMKilled: a container ran out of memory" + (
        f" ({restarts} restarts)" if restarts else "")
    f.trend(Priority.DIAGNOSE, text)
    f.recommend(Priority.DIAGNOSE, "diagnose", text + "; lower the batch or raise the limit")


def waiting_fault_rule(ctx: JudgeContext, f: Findings) -> None:
    """A container stuck in a real fault (``CrashLoopBackOff``...) is no bring-up: it never
    heals without a change, so the job is failing, not filling its buffer."""
    reason = ctx.facts.record.reason
    if reason not in FAULT_WAITING_REASONS or ctx.state not in _LIVE_STATES:
        return
    _not_bring_up(f)
    f.verdict("failed")
    restarts = ctx.facts.record.restarts
    text = f"{reason}" + (f" ({restarts} restarts)" if restarts else "")
    ended = ctx.facts.record.labels.get(LAST_FAILURE_LABEL)  # how its last run ended
    never_ran = bool(ended) and str(ended).startswith(f"{reason}: ")  # the kubelet's why
    oom = bool(ended) and str(ended).startswith("OOMKilled")
    if oom:
        f.flag("oom")
    if never_ran:
        text = str(ended).replace(reason, text, 1)
    elif ended:
        text += f": {ended}"
    f.trend(Priority.TERMINAL, f"{text}; container cannot start" if never_ran
            else f"{text}; container keeps failing" if ended
            else f"{text}: container keeps failing")
    fix = ("lower the batch or raise the memory limit" if oom
           else "fix the pod spec" if never_ran
           else "read the previous container log or fix the pod spec")
    f.recommend(Priority.DIAGNOSE, "diagnose", f"{text}: {fix}; it will not heal on its own")


def failed_rank_rule(ctx: JudgeContext, f: Findings) -> None:
    """One rank of a running multi-rank job failed and does not run again (its retry pending,
    or not created yet): no healthy row and no bring-up, whatever rank 0's metrics say (its
    peers wait on it; at best the replacement is in bring-up). A warning naming the rank, its
    failure and exit code and its first error, with a diagnose (a retry failing alike is a
    recurring failure, which outranks this)."""
    record = ctx.facts.record
    failed = record.labels.get(FAILED_RANK_LABEL)
    if not failed or ctx.state is not JobState.RUNNING:
        return
    _not_bring_up(f)
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE + 1, shorten(failed))
    pod = record.labels.get(FAILED_RANK_POD_LABEL)
    f.recommend(Priority.DIAGNOSE - 1, "diagnose",
                f"{failed}" + (f"; read {pod}'s log" if pod else "")
                + "; a retry failing the same way is not transient")


def sidecar_held_rule(ctx: JudgeContext, f: Findings) -> None:
    """The job's container ended while sidecars hold its pod Running: the Job never ends on
    its own and keeps its pod (and GPUs). No healthy or running row: a warning when the
    container completed (its work is done), failed when it failed; a diagnose to delete the
    Job, with the failure's own diagnosis."""
    held = ctx.facts.record.labels.get(SIDECAR_HELD_LABEL)
    if not held:
        return
    _not_bring_up(f)
    failed = ctx.state in (JobState.FAILED, JobState.OUT_OF_MEMORY)
    f.verdict("failed" if failed else "warning")
    f.trend(Priority.TERMINAL + 1, shorten(f"{held}: the Job never ends"))
    why = (f"{held}: the Job never ends and keeps its pod; delete it (a native sidecar, an "
           "init container with restartPolicy: Always, ends with the job)")
    if failed:
        why += f"; it failed: {diagnosis(ctx.facts)}; {AGENT_LOGS_NOTE}"
    f.recommend(Priority.DIAGNOSE + 2, "diagnose", why)


def restarting_rule(ctx: JudgeContext, f: Findings) -> None:
    """A Job restarting after a failed attempt (a container the kubelet restarts in place, or
    a new pod after a failed one: its retry pending or not created yet), its ``backoffLimit``
    not reached: ``restarting``, not failed (the Job goes on) and not healthy or in bring-up
    (an attempt failed: no fresh launch). The Trend gives the count against the limit, how the
    attempt ended, then the log's first error; the failure is to be read before the next one
    (a recurring one is the recurring-failure rule's)."""
    restart = ctx.facts.record.labels.get(RESTARTING_LABEL)
    if not restart or ctx.state not in _LIVE_STATES:
        return
    _not_bring_up(f)
    f.verdict("restarting")
    fault = first_fault(ctx.facts)
    said = f": {fault_text(fault)}" if fault is not None else ""
    f.trend(Priority.TERMINAL + 1, shorten(f"{restart[:1].upper()}{restart[1:]}{said}"))
    why = f": {fault.kind}: {fault_text(fault)}" if fault is not None else ""
    kind = ctx.facts.record.labels.get(KIND_LABEL)
    kind, limit = {"JobSet": ("JobSet", "maxRestarts"),
                   "PyTorchJob": ("PyTorchJob", "runPolicy.backoffLimit")}.get(
                       kind or "", ("Job", "backoffLimit"))
    f.recommend(Priority.INFO, "diagnose",
                f"an attempt failed, the {kind} restarts it ({restart}){why}; read why before "
                f"the next one: the {kind} fails once its restarts reach {limit}")


def same_name_rule(ctx: JudgeContext, f: Findings) -> None:
    """The Job shown shares its name with a JobSet (Kubernetes allows it: other resources):
    a note names the other, so its run is not taken for absent; in a table the JobSet's row
    (id ``jobset/<name>``) reads ``<name> (JobSet)``."""
    record = ctx.facts.record
    others = [kind for kind in record.labels.get(SAME_NAME_LABEL, "").split(",") if kind]
    kind = record.labels.get(KIND_LABEL) or "Job"
    if kind != "Job" and record.job_id != record.name:  # its id is jobset/<name> (...)
        f.name_suffix += f" ({kind})"  # the table's row, beside its namesake Job's
    for other in others:
        # Its id: the Job keeps the bare name, a JobSet sharing it is jobset/<name>.
        other_id = record.name if other == "Job" else f"{other.lower()}/{record.name}"
        f.notes.append(f"a {other} {record.name} exists too; this is the {kind} of that name "
                       f"(the sweep lists both; jobtables job {other_id}; "
                       f"kubectl get {other.lower()} {record.name})")


def recurring_pod_failure_rule(ctx: JudgeContext, f: Findings) -> None:
    """A failure the Kubernetes probe saw repeat on consecutive attempts of one rank (the Job
    controller's retries under ``backoffLimit``, a container restarted into
    ``CrashLoopBackOff``): seed, "Recurring identical failures are not transient". The job is
    ``recurring-failure`` with a diagnose; a job that has ended failed stays failed, one still
    retrying is a warning (its next attempt is likely to fail the same way)."""
    record = ctx.facts.record
    label = record.labels.get(RECURRING_LABEL)
    if not label or ctx.state in (JobState.COMPLETED, JobState.CANCELLED):
        return
    recurring, _, message = label.partition(" | ")
    _not_bring_up(f)
    f.flag("recurring-failure")
    f.verdict("failed" if ctx.state not in _LIVE_STATES else "warning")
    fault = first_fault(ctx.facts)
    # The log's error first; else the newest attempt's termination message (a crash-looping
    # init container leaves a Pending pod whose log is not read: nothing said why).
    why = f"{fault.kind}: {fault_text(fault)}" if fault is not None else (message or None)
    text = f"RECURRING ({recurring})" + (f": {why}" if why else "")
    f.trend(Priority.TERMINAL + 2, shorten(text))
    f.recommend(Priority.DIAGNOSE + 4, "diagnose",
                f"the same failure on {recurring}" + (f": {why}" if why else "")
                + "; not transient, do not just resubmit or let it retry; find the cause, "
                f"and {AGENT_LOGS_NOTE}")


def restarted_rule(ctx: JudgeContext, f: Findings) -> None:
    """A Job running again after failed attempts: its Trend ends with the restart and how the
    attempt ended (``; restart 1 (Error, exit 1)``), as a requeued SLURM job's count is told
    (``Requeued (2x)``), so a retry that runs well reads healthy without hiding that an
    attempt failed; a requeued SLURM job running again ends ``; restart 2 (requeued)``. Its
    verdict is the retry's own: the failure is behind it (the same failure twice is the
    recurring-failure rule's, whose Trend says it)."""
    record = ctx.facts.record
    if ctx.state is JobState.RUNNING and record.restarts and record.pods_total is None:
        # SLURM's restart_cnt: a requeue (scontrol requeue, a node failure, the job's own
        # requeue near its walltime) ran it before; squeue says no more of how that run ended.
        f.trend_ends.append(f"; restart {record.restarts} (requeued)")
        f.notes.append(f"requeued {record.restarts}x: SLURM ran this job before and runs it "
                       "again under the same id (its log may hold the earlier run's lines)")
        return
    restart = record.labels.get(RESTARTED_LABEL)
    if not restart or ctx.state is not JobState.RUNNING or RECURRING_LABEL in record.labels:
        return
    # Kept at the Trend's end, but shortened as any cell text: an eviction's message (the
    # kubelet's pressure text) runs to ~240 characters; the note keeps it whole.
    f.trend_ends.append(f"; {shorten(restart, RESTART_END_MAX)}")
    pod = record.labels.get(RESTARTED_POD_LABEL)
    kind = record.labels.get(KIND_LABEL) or "Job"
    f.notes.append(f"{restart}: an attempt failed and the {kind} runs again"
                   + (f"; the failed attempt's log: kubectl logs {pod}" if pod else ""))
