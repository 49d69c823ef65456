"""The namespace's workloads, one list per kind per sweep: batch/v1 Jobs, then the kinds read
where their API is installed, JobSets (jobset.x-k8s.io), Kubeflow PyTorchJobs
(kubeflow.org/v1) and KubeRay RayJobs (ray.io/v1).

Policy: the calls are made one at a time, in that order. The Job list failing fails the sweep
(the caller says the cluster is unreachable). A JobSet or PyTorchJob list that is refused
(403: the Role does not grant it) or fails on its own (5xx or 429 past its retry, no answer,
an answer that is no object: an undecodable object in etcd, a broken CRD's storage, a proxy's
page for that path) leaves the other kinds reported: its reason is returned by kind (the
cluster's detail, ``<Kinds> not listed: <the list's error>``) and the caller does not take
that kind's jobs seen before for vanished. A CRD not installed (404) is no kind to list and
no reason. A JobSet's child Jobs are reported through the JobSet, not one by one; a RayJob's
submitter Job (named as the RayJob, its controller) through the RayJob, which learns its uid
(its submitter pods carry it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from functools import partial
from typing import Any

from probes.errors import UnreachableError
from probes.kubernetes.api import KubeApi
from probes.kubernetes.api_errors import ForbiddenError
from probes.kubernetes.objects import Workload, job_workload, jobset_workload, qualify
from probes.kubernetes.pytorchjob import kubeflow_workload, pytorchjob_workload
from probes.kubernetes.rayjob import rayjob_workload


async def list_workloads(api: KubeApi, jobs_seen: Collection[str] = ()
                         ) -> tuple[list[Workload], dict[str, str]]:
    """The namespace's workloads (ids qualified: :func:`objects.qualify`, a Job seen last
    sweep in ``jobs_seen`` still qualifying its namesakes: the sweep that reports the Job
    vanished does not give another kind its bare name, two rows of one id), and the reason
    each kind that could not be listed was not, by kind (``"JobSet"``, ``"PyTorchJob"``,
    ``"RayJob"``, ``"TFJob"``, ``"MPIJob"``)."""
    jobs = [job_workload(job) for job in await api.list_jobs()]
    refused: dict[str, str] = {}
    jobsets = await _optional(api.list_jobsets, "JobSet", refused)
    pytorchjobs = await _optional(api.list_pytorchjobs, "PyTorchJob", refused)
    rayjobs = await _optional(api.list_rayjobs, "RayJob", refused)
    training = [kubeflow_workload(obj, kind) for kind in TRAINING_KINDS
                for obj in await _optional(partial(api.list_training_jobs, kind), kind, refused)]
    return qualify([w for w in jobs if not w.owned_by_jobset and not w.owned_by_rayjob]
                   + [jobset_workload(obj) for obj in jobsets]
                   + [pytorchjob_workload(obj) for obj in pytorchjobs] + training
                   + with_submitters([rayjob_workload(obj) for obj in rayjobs], jobs),
                   jobs_seen), refused


TRAINING_KINDS = ("TFJob", "MPIJob")
"""The training operator's kinds listed besides PyTorchJobs (``api.list_training_jobs``)."""


def with_submitters(rayjobs: list[Workload], jobs: list[Workload]) -> list[Workload]:
    """The RayJobs, each with the uids of the listed Jobs it is the controller of."""
    owned: dict[str, set[str]] = {}
    for job in jobs:
        if job.owned_by_rayjob and job.uid:
            owned.setdefault(job.owned_by_rayjob, set()).add(job.uid)
    return [replace(work, submitter_uids=frozenset(owned.get(work.uid or "", ())))
            for work in rayjobs]


async def _optional(listed: Callable[[], Awaitable[list[Any]]], kind: str,
                    refused: dict[str, str]) -> list[Any]:
    """One optional kind's list; refused or failing on its own, none, its reason noted."""
    try:
        return await listed()
    except (ForbiddenError, UnreachableError) as exc:
        # The Jobs just listed: the server answers, only this list fails. The other kinds
        # are still the report's; the pod list that follows says if the server is down.
        refused[kind] = f"{kind}s not listed: {exc}"
        return []


def refusal_detail(refused: dict[str, str]) -> str | None:
    """The cluster's detail for the kinds not listed (``None``: every kind was)."""
    return "; ".join(refused.values()) or None
