"""RBAC refusals (HTTP 403) through ``jobtables sweep``: the cluster's own detail, exit 0.

A Role that lacks a list verb makes that cluster ``unreachable`` with the API server's own
words (which resource, which verb), while the other clusters are reported as usual; JobSets,
read where installed, are the exception: refused, the Jobs are still reported and the
cluster's detail says JobSets were not listed. A Role
that lacks ``pods/log`` leaves the states (a state poll) and makes each log a failed fetch:
state unknown, never "dead".
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli import DEMO_RECORDING
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).parents[3]
HF_LOG = "{'loss': 1.2, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 0.1}\n"


async def sweep(standin: KubeStandIn, tmp_path: Path, form: str = "json") -> Any:
    """``jobtables sweep --format json`` (or ``form``: the text) over the stand-in and the demo
    recording; exit 0."""
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 5\n\n'
                    f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", form,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out) if form == "json" else out.decode()


def add_running(standin: KubeStandIn, name: str) -> None:
    standin.jobs[name] = make_job(name, active=1)
    standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
    standin.logs[f"{name}-0"] = HF_LOG


@pytest.mark.parametrize(("route", "says"), [
    ("jobs", 'list jobs: HTTP 403 Forbidden: jobs.batch is forbidden: User '
             '"system:serviceaccount:ml:jobtables" cannot list resource "jobs" in API group '
             '"batch" in the namespace "ml"'),
    ("pods", 'list pods: HTTP 403 Forbidden: pods is forbidden: User '
             '"system:serviceaccount:ml:jobtables" cannot list resource "pods"'),
])
async def test_a_forbidden_list_is_that_clusters_detail(
        standin: KubeStandIn, tmp_path: Path, route: str, says: str) -> None:
    """The Role lacks one list verb: beta is unreachable with the refusal, demo reports."""
    add_running(standin, "sft-a")
    standin.faults[route] = "403"
    report = await sweep(standin, tmp_path)
    beta, demo = report["clusters"]
    assert (beta["name"], beta["status"]) == ("beta", "unreachable")
    assert says in beta["detail"], beta["detail"]
    assert demo["status"] == "ok"
    assert {job["cluster"] for job in report["jobs"]} == {"demo"}


async def test_a_forbidden_jobset_list_keeps_the_jobs(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """The Role lacks list on jobsets (installed after the Role was written, or withheld): the
    batch/v1 Jobs are still reported, the cluster ok, its detail (JSON and the text header)
    saying JobSets were not listed and why. It made the whole cluster unreachable: no Job
    reported because an optional API was refused."""
    add_running(standin, "sft-a")
    standin.faults["jobsets"] = "403"
    report = await sweep(standin, tmp_path)
    beta = report["clusters"][0]
    assert (beta["name"], beta["status"]) == ("beta", "ok")
    assert beta["detail"].startswith("JobSets not listed: list jobsets: HTTP 403 Forbidden"), \
        beta["detail"]
    assert 'cannot list resource "jobsets" in API group "jobset.x-k8s.io"' in beta["detail"]
    jobs = [job for job in report["jobs"] if job["cluster"] == "beta"]
    assert [(job["job_id"], job["state"]) for job in jobs] == [("sft-a", "RUNNING")]
    text = await sweep(standin, tmp_path, "text")
    assert "beta ok (JobSets not listed: list jobsets: HTTP 403" in " ".join(text.split())


async def test_a_forbidden_log_is_a_failed_fetch_not_a_dead_job(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """No ``pods/log`` in the Role: the jobs are RUNNING from the API, each log a failed fetch
    naming the refusal, verdict unknown; the refusal is asked once (each job's log was asked
    twice, four refused requests a sweep for two jobs)."""
    add_running(standin, "sft-a")
    add_running(standin, "sft-b")
    standin.faults["log"] = "403"
    report = await sweep(standin, tmp_path)
    assert report["clusters"][0]["status"] == "ok"
    jobs = [job for job in report["jobs"] if job["cluster"] == "beta"]
    assert sorted(job["job_id"] for job in jobs) == ["sft-a", "sft-b"]
    for job in jobs:
        assert job["state"] == "RUNNING" and job["verdict"] == "unknown"
        assert "fetch-failed" in job["flags"]
        assert job["trend"].startswith("Log fetch failed"), job["trend"]
    assert len(standin.calls("GET", "/log")) == 1


async def test_a_log_refusal_reads_as_the_refusal_in_every_other_row(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """The jobs whose log was not asked (the first refusal stands for all) say the reads were
    refused, in the words a cut Trend cell keeps: their trend began 'Log fetch failed: not
    fetched: read log of pod/<another job's pod>: ...', the refusal cut off and another job's
    pod named in this job's row."""
    for name in ("sft-a", "sft-b", "sft-c"):
        add_running(standin, name)
    standin.faults["log"] = "403"
    report = await sweep(standin, tmp_path)
    jobs = {job["job_id"]: job for job in report["jobs"] if job["cluster"] == "beta"}
    asked = standin.calls("GET", "/log")[0].path.split("/")[-2]
    for job_id, job in jobs.items():
        if f"{job_id}-0" == asked:
            continue
        assert job["trend"].startswith("Log fetch failed: not fetched: log reads refused: HTTP "
                                       "403"), job["trend"]
