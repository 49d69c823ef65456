"""Writing a Kubernetes recording: the replay directory format of ``probes/kubernetes/replay.py``.

Policy: one sweep of the live probe, its API client wrapped in a
:class:`probes.kubernetes.recorded.RecordingClient`, so the recording holds exactly what the
probe read (each object as the API's JSON, each pod log read's text verbatim, each error by
its class and message). As a SLURM recording, it holds only the selected jobs (the
configured ``users``, active or within ``recent_hours``): their Jobs, JobSets, PyTorchJobs
and RayJobs, the child Jobs of those JobSets, the submitter Jobs of those RayJobs, a Job (or
JobSet, PyTorchJob) named like a selected JobSet, PyTorchJob or RayJob (it makes its id
``jobset/<name>``, ``pytorchjob/<name>``, ``rayjob/<name>``), and the pods the probe matched
to them; no other user's objects or logs.
Nor the jobs' secrets the probe never reads: each container's environment values and the
spec copy ``kubectl apply`` leaves in an annotation are written ``(not recorded)``.
The sweep's clock is cut to whole seconds, so ``recorded_at`` is the probe's "now" exactly.
The files are written for their owner only (``probes.recording_files``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from probes.config import KubernetesCluster
from probes.errors import UnreachableError
from probes.kubernetes.client import KubeClient
from probes.kubernetes.listing import TRAINING_KINDS, with_submitters
from probes.kubernetes.objects import (
    Workload,
    job_workload,
    jobset_workload,
    owned_by,
    qualify,
)
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.pytorchjob import KUBEFLOW_KINDS, kubeflow_workload, pytorchjob_workload
from probes.kubernetes.rayjob import rayjob_workload
from probes.kubernetes.recorded import Answers, RecordingClient, error_name, to_api_json
from probes.recording_files import check_dest, to_json, write_files

FORMAT = 1


async def record(
    cluster: KubernetesCluster,
    dest: Path,
    *,
    aliases: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Path:
    """Capture one sweep of a live cluster into a replay directory; ``ProbeError`` (nothing
    written) when the cluster cannot be read."""
    check_dest(dest)  # before anything connects
    client = RecordingClient(KubeClient(cluster))
    probe = KubernetesProbe(cluster, aliases=aliases, api=client,
                            clock=clock or (lambda: datetime.now(UTC).replace(microsecond=0)))
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    if facts.status != "ok":
        raise UnreachableError(facts.detail or "the cluster could not be read")
    kept = selected(client.answers, {job.record.job_id for job in facts.jobs})
    meta = {"format": FORMAT, "name": cluster.name, "kind": "kubernetes",
            "recorded_at": facts.collected_at.astimezone(UTC).isoformat().replace(
                "+00:00", "Z"),
            "namespace": cluster.namespace, "users": list(cluster.users),
            "user_keys": list(cluster.user_keys), "recent_hours": cluster.recent_hours,
            "min_log_lines": cluster.min_log_lines,
            "benign_patterns": list(cluster.benign_patterns)}
    await asyncio.to_thread(write_files, dest, recording_files(meta, kept))
    return dest


def selected(answers: Answers, ids: set[str]) -> Answers:
    """The answers bearing on the jobs ``ids`` only (the module policy)."""
    jobs = [(obj, job_workload(obj)) for obj in answers.jobs]
    sets = [(obj, jobset_workload(obj)) for obj in answers.jobsets]
    torch = [(obj, pytorchjob_workload(obj)) for obj in answers.pytorchjobs]
    training = {kind: [(obj, kubeflow_workload(obj, kind))
                       for obj in getattr(answers, KUBEFLOW_KINDS[kind][0])]
                for kind in TRAINING_KINDS}
    rays = with_submitters([rayjob_workload(obj) for obj in answers.rayjobs],
                           [w for _, w in jobs])
    works = qualify([w for _, w in jobs if not w.owned_by_jobset and not w.owned_by_rayjob]
                    + [w for _, w in sets] + [w for _, w in torch] + rays
                    + [w for listed in training.values() for _, w in listed])
    kept = [w for w in works if w.job_id in ids]
    names = {w.name for w in kept}
    set_names = {w.name for w in kept if w.view.kind == "JobSet"}
    # A JobSet (a PyTorchJob) named like a kept PyTorchJob (RayJob) qualifies its id: it is
    # kept with it.
    ray_names = {w.name for w in kept if w.view.kind == "RayJob"}
    torch_names = {w.name for w in kept if w.view.kind == "PyTorchJob"} | ray_names
    ray_uids = {w.uid for w in kept if w.view.kind == "RayJob"}
    kept_answers = Answers(
        jobs=[obj for obj, w in jobs if (w.name in names and not w.owned_by_jobset
                                         and not w.owned_by_rayjob)
              or _jobset_of(obj) in set_names or w.owned_by_rayjob in ray_uids],
        jobsets=[obj for obj, w in sets if w.name in set_names | torch_names],
        jobsets_error=answers.jobsets_error,
        pytorchjobs=[obj for obj, w in torch if w.name in torch_names],
        pytorchjobs_error=answers.pytorchjobs_error,
        rayjobs=[obj for obj in answers.rayjobs
                 if str((obj.get("metadata") or {}).get("name")) in ray_names],
        rayjobs_error=answers.rayjobs_error,
        pods=[pod for pod in answers.pods if any(_matched(pod, w) for w in kept)],
        reads=answers.reads,
    )
    for kind, listed in training.items():  # the training operator's other kinds
        plural = KUBEFLOW_KINDS[kind][0]
        setattr(kept_answers, plural, [obj for obj, w in listed if w.job_id in ids])
        setattr(kept_answers, f"{plural}_error", getattr(answers, f"{plural}_error"))
    return kept_answers


def _jobset_of(job: Any) -> str | None:
    """The JobSet that owns a child Job, by its owner reference."""
    refs = job.metadata.owner_references or ()
    return next((ref.name for ref in refs if ref.kind == "JobSet"), None)


def _matched(pod: Any, work: Workload) -> bool:
    """The probe reads ``pod`` as ``work``'s (``KubernetesProbe._pods``)."""
    labels = pod.metadata.labels or {}
    return any(labels.get(key) == value for key, value in work.pod_labels()) and owned_by(
        pod, work)


def recording_files(meta: Mapping[str, Any], answers: Answers) -> dict[str, str]:
    """File name -> text: ``cluster.json``, the lists, ``logs.json`` and a file per read."""
    files = {"cluster.json": to_json(meta),
             "jobs.json": to_json(_list("batch/v1", "JobList", answers.jobs)),
             "pods.json": to_json(_list("v1", "PodList", answers.pods))}
    refused = answers.jobsets_error
    files["jobsets.json"] = to_json(
        {"error": {"type": error_name(refused), "message": str(refused)}} if refused
        else _list("jobset.x-k8s.io/v1alpha2", "JobSetList", answers.jobsets))
    failed = answers.pytorchjobs_error
    files["pytorchjobs.json"] = to_json(
        {"error": {"type": error_name(failed), "message": str(failed)}} if failed
        else _list("kubeflow.org/v1", "PyTorchJobList", answers.pytorchjobs))
    for kind in TRAINING_KINDS:
        plural = KUBEFLOW_KINDS[kind][0]
        failed = getattr(answers, f"{plural}_error")
        files[f"{plural}.json"] = to_json(
            {"error": {"type": error_name(failed), "message": str(failed)}} if failed
            else _list("kubeflow.org/v1", f"{kind}List", getattr(answers, plural)))
    failed = answers.rayjobs_error
    files["rayjobs.json"] = to_json(
        {"error": {"type": error_name(failed), "message": str(failed)}} if failed
        else _list("ray.io/v1", "RayJobList", answers.rayjobs))
    reads = []
    for number, read in enumerate(answers.reads, start=1):
        entry: dict[str, Any] = {"pod": read.pod, "container": read.container,
                                 "previous": read.previous}
        if read.error is not None:
            entry["error"] = {"type": error_name(read.error), "message": str(read.error)}
        else:
            entry["file"] = f"log-{number:04d}.txt"
            entry["cut"] = read.cut
            files[entry["file"]] = read.text
        reads.append(entry)
    files["logs.json"] = to_json({"reads": reads})
    return files


def _list(api_version: str, kind: str, items: Iterable[Any]) -> dict[str, Any]:
    """A List object as the API serves one (its items as the API's JSON, less secrets)."""
    return {"apiVersion": api_version, "kind": kind, "metadata": {},
            "items": [_unsecret(to_api_json(item)) for item in items]}


NOT_RECORDED = "(not recorded)"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _unsecret(node: Any) -> Any:
    """``node`` with each container's environment values, and the spec ``kubectl apply``
    copies into an annotation, replaced by :data:`NOT_RECORDED`: the probe reads neither,
    and they hold tokens (a recording travels). References (``valueFrom``) stay."""
    if isinstance(node, list):
        return [_unsecret(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _unsecret(value) for key, value in node.items()}
    for key in CONTAINER_LISTS:
        for container in out.get(key) or ():
            for var in (container.get("env") or ()) if isinstance(container, dict) else ():
                if isinstance(var, dict) and "value" in var:
                    var["value"] = NOT_RECORDED
    annotations = out.get("annotations")
    if isinstance(annotations, dict) and APPLIED in annotations:
        annotations[APPLIED] = NOT_RECORDED
    return out
