"""``jobtables job NAME`` on Kubernetes, through the real CLI against the API stand-in: a
JobSet and an indexed Job show their leader's log and their state."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.probes.kubernetes.builders import NOW, add_namesakes, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
    for s in (1, 2, 3)
)
ROOT = Path(__file__).parents[3]


async def _job(standin: KubeStandIn, tmp_path: Path, name: str) -> dict[str, Any]:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 5\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "job", name, "--config", str(toml), "--format", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    job: dict[str, Any] = json.loads(out)
    return job


async def test_job_shows_a_jobsets_leader_and_an_indexed_jobs_failed_rank(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """The JobSet [leader, workers] shows the leader's rank 0 log (the workers' newer rank 0
    was read) and RUNNING healthy; the indexed Job with rank 1 failed and its retry pending
    shows rank 0's log, RUNNING, a warning naming rank 1's failure, its exit code and error."""
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js", replicated=("leader", "workers"))
    for group, pods in (("leader", 1), ("workers", 2)):
        child = f"rl-js-{group}-0"
        standin.jobs[child] = make_job(child, active=pods, owner_jobset="rl-js")
        for index in range(pods):
            pod = f"{child}-{index}"
            standin.pods[pod] = make_pod(pod, child, jobset="rl-js", index=index,
                                         replicated_job=(group, 0),
                                         created=NOW - timedelta(minutes=30 if group == "leader"
                                                                 else 29))
            standin.logs[pod] = VERL_LOG if group == "leader" else "worker noise\n"
    standin.jobs["rl-idx"] = make_job("rl-idx", active=3, failed=1)
    for rank in range(3):
        standin.pods[f"rl-idx-{rank}"] = make_pod(f"rl-idx-{rank}", "rl-idx", index=rank,
                                                  phase="Failed" if rank == 1 else "Running",
                                                  state="terminated" if rank == 1 else "running",
                                                  reason="Error" if rank == 1 else None)
        standin.logs[f"rl-idx-{rank}"] = VERL_LOG if rank == 0 else (
            "Traceback (most recent call last):\nRuntimeError: NCCL error in rank 1\n")
    standin.pods["rl-idx-1-b"] = make_pod("rl-idx-1-b", "rl-idx", index=1, phase="Pending",
                                          state="waiting", reason="ContainerCreating",
                                          created=NOW - timedelta(minutes=1))

    jobset = await _job(standin, tmp_path, "rl-js")
    assert (jobset["state"], jobset["log_path"]) == ("RUNNING", "pod/rl-js-leader-0-0")
    assert jobset["step"] == 3 and jobset["verdict"] != "warning"

    indexed = await _job(standin, tmp_path, "rl-idx")
    assert (indexed["state"], indexed["log_path"]) == ("RUNNING", "pod/rl-idx-0")
    assert indexed["step"] == 3 and indexed["verdict"] == "warning"
    assert indexed["trend"].startswith("rank 1 failed (Error, exit 1): RuntimeError: NCCL")
    assert indexed["recommendation"]["action"] == "diagnose"
    assert "pod/rl-idx-1" in indexed["recommendation"]["why"]


async def test_job_names_a_jobset_of_the_same_name(standin: KubeStandIn, tmp_path: Path) -> None:
    """A Job and a JobSet share a name (different resources, both allowed): ``jobtables job
    NAME`` shows the Job, as before, and says the JobSet exists too and how to look at it.
    It showed the Job alone: the JobSet's run, in the sweep under the same id, was hidden
    from the one command that takes its name."""
    add_namesakes(standin, VERL_LOG)
    job = await _job(standin, tmp_path, "rl-dup")
    assert job["log_path"] == "pod/rl-dup-0"
    assert "a JobSet rl-dup exists too" in (job["note"] or ""), job["note"]
    del standin.jobsets["rl-dup"]  # near-miss: a name only a Job has carries no such note
    alone = await _job(standin, tmp_path, "rl-dup")
    assert "JobSet" not in (alone["note"] or "")


async def test_job_of_an_unlisted_jobset_says_jobsets_were_refused(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """Review of 89d74d5: with the Role refusing the JobSet list (403) the sweep says
    'JobSets not listed', but ``jobtables job rl-js`` (a JobSet) answered that no such job
    exists, nothing said of the refusal: the JobSet read as gone. The answer names it."""
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.faults["jobsets"] = "403"
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 5\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "job", "rl-js", "--config", str(toml),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    said = " ".join((out + err).decode().split())
    assert "JobSets not listed: list jobsets: HTTP 403 Forbidden" in said, (
        process.returncode, said)


async def test_a_job_and_a_jobset_of_one_name_have_ids_of_their_own(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A Job and a JobSet named alike were both listed under the id ``rl-dup``: one (cluster,
    id) for two runs, so ``jobtables job rl-dup`` could reach the Job only and the bot's
    per-job state (history, alerts, vanished tracking) mixed them. The JobSet's id is then
    kubectl's ``jobset/rl-dup``; ``jobtables job`` reaches each by the id the sweep shows."""
    add_namesakes(standin, VERL_LOG)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\nrequest_timeout_s = 5\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    ids = {job["job_id"]: job["log_path"] for job in json.loads(out)["jobs"]}
    assert ids == {"rl-dup": "pod/rl-dup-0", "jobset/rl-dup": "pod/rl-dup-workers-0-0"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        text, _ = await process.communicate()
    rows = [line.split("│")[1].strip() for line in text.decode().splitlines()
            if line.startswith("│ rl-dup")]
    assert sorted(rows) == ["rl-dup", "rl-dup (JobSet)"], rows  # the table tells them apart
    jobset = await _job(standin, tmp_path, "jobset/rl-dup")
    assert (jobset["job_id"], jobset["log_path"]) == ("jobset/rl-dup", "pod/rl-dup-workers-0-0")
    assert "a Job rl-dup exists too" in (jobset["note"] or ""), jobset["note"]
    job = await _job(standin, tmp_path, "rl-dup")
    assert (job["job_id"], job["log_path"]) == ("rl-dup", "pod/rl-dup-0")
    assert "jobtables job jobset/rl-dup" in (job["note"] or ""), job["note"]


async def test_job_on_a_cluster_refusing_the_token_is_reported(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """An expired token (401): CONTRACT §1, exit 0 with the contract's report object naming
    the cluster unreachable and why, no job. It was exit 2 (bad usage) and 'not found'."""
    from functools import partial

    standin.jobs["rl-x"] = make_job("rl-x", active=1)
    # The kubeconfig written holds a token the API server refuses.
    standin.write_kubeconfig = partial(KubeStandIn.write_kubeconfig, standin,  # type: ignore[method-assign]
                                       token="expired-token")
    answer = await _job(standin, tmp_path, "rl-x")
    assert answer["jobs"] == []
    [cluster] = answer["clusters"]
    assert (cluster["name"], cluster["status"]) == ("beta", "unreachable")
    assert "HTTP 401" in cluster["detail"]
