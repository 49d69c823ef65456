"""Validation of job ids and cluster names before they go anywhere near a command.

Policy: an id is accepted only if it is a plain SLURM id (digits, optionally ``_N`` array
task or ``+N`` het offset) or a Kubernetes object name of at most 63 characters: a Job's is
an RFC 1123 subdomain (the API server validates Job names so: dots allowed, as in
``rl-qwen2.5-7b``; 63 at most, as its pods' ``job-name`` label value), a JobSet's an RFC 1123
label, which kubectl's ``jobset/<name>`` may qualify: a JobSet that shares its name with a
Job has that id (:mod:`probes.kubernetes.objects`), as a Kubeflow PyTorchJob (its name a
DNS-1035 label, the training operator's webhook checks) ``pytorchjob/<name>`` and a KubeRay
RayJob (a DNS-1035 label too, KubeRay's ``ValidateRayJobMetadata``) ``rayjob/<name>``. No
label of a name is empty or starts or ends with ``-``: no ``..`` reaches a path. Everything
else raises :class:`InvalidJobIdError` and nothing runs.
"""

from __future__ import annotations

import re

from probes.errors import InvalidJobIdError

SLURM_ID = re.compile(r"\A[0-9]{1,12}(?:_[0-9]{1,8}|\+[0-9]{1,4})?\Z")
_DNS_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
K8S_NAME = re.compile(
    rf"\A(?:(?=.{{1,63}}\Z){_DNS_LABEL}(?:\.{_DNS_LABEL})*"  # a Job: a DNS-1123 subdomain
    rf"|(?:jobset|pytorchjob|rayjob|tfjob|mpijob)/(?=.{{1,63}}\Z){_DNS_LABEL})\Z")  # a JobSet's ...
CLUSTER_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
SHOWN = 40
"""How much of a refused word an error quotes: a 5,000-digit id is not echoed whole."""


def shown(word: str) -> str:
    """``word`` quoted as Python quotes it, cut to :data:`SHOWN` characters with an ellipsis."""
    return repr(word[:SHOWN] + "…" if len(word) > SHOWN else word)


def validate_job_id(job_id: str) -> str:
    """Return ``job_id`` unchanged if it is a plain id, else raise ``InvalidJobIdError``."""
    if SLURM_ID.match(job_id) or K8S_NAME.match(job_id):
        return job_id
    raise InvalidJobIdError(
        f"{shown(job_id)} is not a job id: expected digits (optionally _N or +N) or a Kubernetes "
        "name (optionally jobset/NAME, pytorchjob/NAME, rayjob/NAME, tfjob/NAME or mpijob/NAME)"
    )


def validate_cluster_name(name: str) -> str:
    """Return ``name`` if it is a well-formed cluster name, else raise ``InvalidJobIdError``."""
    if CLUSTER_NAME.match(name):
        return name
    raise InvalidJobIdError(f"{shown(name)} is not a cluster name")


def scheduler_job(job_id: str) -> str:
    """The job an id belongs to: an array task's array (``123_4`` -> ``123``), a hetjob
    component's hetjob (``123+1`` -> ``123``); any other id is its own."""
    return job_id.split("_", 1)[0].split("+", 1)[0]


def split_job_ref(ref: str) -> tuple[str | None, str]:
    """Split ``cluster:id`` (or a bare ``id``) and validate both parts."""
    cluster, sep, job_id = ref.strip().rpartition(":")
    if not sep:
        return None, validate_job_id(job_id)
    return validate_cluster_name(cluster), validate_job_id(job_id)
