"""The RBAC manifest grants exactly what the probe's requests need, and nothing more."""

from __future__ import annotations

import re
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # no stubs installed; safe_load_all only

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_jobset, make_pod
from tests.probes.kubernetes.pytorchjobs import add_pytorchjob
from tests.probes.kubernetes.rayjobs import add_rayjob
from tests.probes.kubernetes.standin import KubeStandIn, Recorded

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "k8s-rbac.yaml"
_PATH = re.compile(
    r"^/apis?/(?:(?P<group>[^/]+)/)?v[^/]+/namespaces/[^/]+/(?P<res>[^/]+)"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)


def permission(request: Recorded) -> tuple[str, str, str]:
    """(apiGroup, resource, verb) the API server checks for one recorded request."""
    match = _PATH.match(request.path)
    assert match, request.path
    group = match["group"] if request.path.startswith("/apis/") else ""
    resource = match["res"] + (f"/{match['sub']}" if match["sub"] else "")
    if request.method == "DELETE":
        return group or "", resource, "delete"
    return group or "", resource, "get" if match["name"] else "list"


def granted() -> set[tuple[str, str, str]]:
    role = next(d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["kind"] == "Role")
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


async def test_role_covers_every_request(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A sweep plus a Job, a JobSet, a PyTorchJob and a RayJob cancel use only verbs the Role
    grants (the PyTorchJob list and delete: kubeflow.org pytorchjobs; the RayJob's: ray.io
    rayjobs)."""
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.pytorchjobs = {}
    add_pytorchjob(standin, "rl-ptj", log="{'loss': 1.0}\n")
    standin.rayjobs = {}
    add_rayjob(standin, "rl-ray", log="{'loss': 1.0}\n")
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = "{'loss': 1.0}\n"
    await probe.collect()
    await probe.cancel("sft-a")
    await probe.cancel("rl-js")
    await probe.cancel("rl-ptj")
    await probe.cancel("rl-ray")
    used = {permission(r) for r in standin.requests}
    assert used <= granted()
    assert {("kubeflow.org", "pytorchjobs", "list"),
            ("kubeflow.org", "pytorchjobs", "delete"),
            ("ray.io", "rayjobs", "list"), ("ray.io", "rayjobs", "delete")} <= used
    assert {verb for _, _, verb in granted()} == {"get", "list", "delete"}
    assert ("", "pods/log", "get") in used


async def test_a_jobset_refused_after_it_was_seen_is_not_vanished(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A JobSet seen running, then its list refused (403: the Role changed): the sweep cannot
    see it, so it is not reported vanished (a silent wedge); the Jobs still are, and the
    cluster's detail says JobSets were not listed."""
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.jobs["rl-js-workers-0"] = make_job("rl-js-workers-0", active=1, owner_jobset="rl-js")
    standin.pods["rl-js-workers-0-0"] = make_pod("rl-js-workers-0-0", "rl-js-workers-0",
                                                 jobset="rl-js", index=0,
                                                 replicated_job=("workers", 0))
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    first = await probe.collect()
    assert sorted(job.record.job_id for job in first.jobs) == ["rl-js", "sft-a"]
    standin.faults["jobsets"] = "403"
    second = await probe.collect()
    assert second.status == "ok"
    assert second.detail is not None and second.detail.startswith("JobSets not listed")
    assert [(job.record.job_id, job.record.state.value) for job in second.jobs] == [
        ("sft-a", "RUNNING")]
    standin.faults.clear()  # the grant is back: the JobSet is read again, never vanished
    third = await probe.collect()
    assert sorted(job.record.job_id for job in third.jobs) == ["rl-js", "sft-a"]
    assert third.detail is None
    assert all(job.record.state.value == "RUNNING" for job in third.jobs)


async def test_one_job_of_a_refused_jobset_is_not_vanished(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Review of 89d74d5: the sweep's rule, for one job (``jobtables job``, ``/job``): a
    JobSet seen running, its list then refused, was read vanished (FAILED, silent-wedge) by
    ``collect_one``, the refusal unsaid. Now no job, and the refusal is the detail."""
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.jobs["rl-js-workers-0"] = make_job("rl-js-workers-0", active=1, owner_jobset="rl-js")
    standin.pods["rl-js-workers-0-0"] = make_pod("rl-js-workers-0-0", "rl-js-workers-0",
                                                 jobset="rl-js", index=0,
                                                 replicated_job=("workers", 0))
    assert [job.record.job_id for job in (await probe.collect()).jobs] == ["rl-js"]
    standin.faults["jobsets"] = "403"
    one = await probe.collect_one("rl-js")
    assert one.status == "ok" and one.jobs == (), [j.record.labels for j in one.jobs]
    assert one.detail is not None and one.detail.startswith("JobSets not listed")
