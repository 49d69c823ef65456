"""``jobtables record`` of a Kubernetes cluster, and its replay, through the real CLI against
the API stand-in: the replay's jobs are the live sweep's, read without the API server.

The namespace holds a mix the probe reads differently: a running verl run (metrics), a
failed run with a traceback, a JobSet whose name a Job of another user also has (its id is
``jobset/<name>``), an indexed Job whose rank 1 failed (a second pod's log read), a crash
loop running again (its previous run's log read), a job whose kubelet answers its log read
with a 500 (fetch-failed), a pending job, and another user's run (not recorded).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1EnvVar,
    V1EnvVarSource,
    V1SecretKeySelector,
)

from tests.probes.kubernetes.builders import NOW, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).parents[3]
ALICE = {"user": "alice"}
VERL_LOG = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2{s} - critic/score/mean:0.{s}\n"
    for s in range(1, 9))
TRACEBACK = ("step:1 - loss:2.5 - grad_norm:1.0\nTraceback (most recent call last):\n"
             '  File "/app/train.py", line 9, in <module>\n'
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
SECRET = "wandb-0123456789abcdef"
"""A token in a container's environment: the probe reads none, a recording keeps none."""
APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PREVIOUS = ("Traceback (most recent call last):\n  File \"/app/train.py\", line 12, in <module>\n"
            "ModuleNotFoundError: No module named 'flash_attn'\n")


def populate(standin: KubeStandIn) -> None:
    """The namespace described in the module docstring."""
    assert standin.jobsets is not None
    standin.jobs["rl-grpo"] = make_job("rl-grpo", labels=ALICE, active=1,
                                       annotations={APPLIED: json.dumps({"env": SECRET})})
    standin.pods["rl-grpo-0"] = make_pod("rl-grpo-0", "rl-grpo")
    for spec in (standin.jobs["rl-grpo"].spec.template.spec, standin.pods["rl-grpo-0"].spec):
        spec.containers[0].env = [V1EnvVar(name="WANDB_API_KEY", value=SECRET),
                                  V1EnvVar(name="HF_TOKEN", value_from=V1EnvVarSource(
                                      secret_key_ref=V1SecretKeySelector(name="hf", key="t")))]
    standin.logs["rl-grpo-0"] = VERL_LOG
    standin.jobs["sft-crash"] = make_job("sft-crash", labels=ALICE, failed=1,
                                         conditions=(("Failed", "BackoffLimitExceeded"),),
                                         finished=NOW - timedelta(minutes=5))
    standin.pods["sft-crash-0"] = make_pod("sft-crash-0", "sft-crash", phase="Failed",
                                           state="terminated", reason="Error")
    standin.logs["sft-crash-0"] = TRACEBACK
    _jobset(standin)
    _indexed(standin)
    _relapsing(standin)
    standin.jobs["rl-kubelet"] = make_job("rl-kubelet", labels=ALICE, active=1)
    standin.pods["rl-kubelet-0"] = make_pod("rl-kubelet-0", "rl-kubelet")
    standin.faults["log:rl-kubelet-0"] = "500"
    standin.jobs["eval-wait"] = make_job("eval-wait", labels=ALICE, started=None)
    standin.pods["eval-wait-0"] = make_pod("eval-wait-0", "eval-wait", phase="Pending",
                                           state="waiting", reason="ContainerCreating")
    standin.jobs["datagen-bob"] = make_job("datagen-bob", labels={"user": "bob"}, active=1)
    standin.pods["datagen-bob-0"] = make_pod("datagen-bob-0", "datagen-bob")
    standin.logs["datagen-bob-0"] = "bob's secret log line\n"


def _jobset(standin: KubeStandIn) -> None:
    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js", labels=ALICE,
                                           replicated=("leader", "workers"))
    for group in ("leader", "workers"):
        child = f"rl-js-{group}-0"
        standin.jobs[child] = make_job(child, active=1, owner_jobset="rl-js")
        standin.pods[f"{child}-0"] = make_pod(f"{child}-0", child, jobset="rl-js", index=0,
                                              replicated_job=(group, 0))
        standin.logs[f"{child}-0"] = VERL_LOG if group == "leader" else "worker noise\n"
    standin.jobs["rl-js"] = make_job("rl-js", labels={"user": "bob"}, active=1)


def _indexed(standin: KubeStandIn) -> None:
    standin.jobs["rl-idx"] = make_job("rl-idx", labels=ALICE, active=2, failed=1)
    for rank in range(3):
        failed = rank == 1
        standin.pods[f"rl-idx-{rank}"] = make_pod(
            f"rl-idx-{rank}", "rl-idx", index=rank, phase="Failed" if failed else "Running",
            state="terminated" if failed else "running", reason="Error" if failed else None)
        standin.logs[f"rl-idx-{rank}"] = VERL_LOG if rank == 0 else (
            "Traceback (most recent call last):\nRuntimeError: NCCL error in rank 1\n")


def _relapsing(standin: KubeStandIn) -> None:
    """Its runs are timed from the real clock: the CLI's sweeps run now, and a crash loop is
    one whose runs end within minutes of each other and of now."""
    now = datetime.now(UTC)
    standin.jobs["sft-loop"] = make_job("sft-loop", labels=ALICE, active=1,
                                        started=now - timedelta(minutes=10))
    pod = make_pod("sft-loop-0", "sft-loop", restarts=5, created=now - timedelta(minutes=10))
    status = pod.status.container_statuses[0]
    status.state = V1ContainerState(running=V1ContainerStateRunning(
        started_at=now - timedelta(seconds=20)))
    status.last_state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=1, reason="Error", started_at=now - timedelta(seconds=90),
        finished_at=now - timedelta(seconds=60)))
    standin.pods["sft-loop-0"] = pod
    standin.logs["sft-loop-0"] = "Loading checkpoint shards: 100%|##########| 4/4\n"
    standin.logs["sft-loop-0/previous"] = PREVIOUS


def live_config(standin: KubeStandIn, tmp_path: Path) -> Path:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "live.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 5\n'
                    'users = ["alice"]\nrecent_hours = 1000\n')
    return toml


def replay_config(tmp_path: Path, recording: Path) -> Path:
    toml = tmp_path / "replay.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "replay"\npath = "{recording}"\n')
    return toml


async def cli(*argv: str) -> tuple[int, str, str]:
    """``python -m bot.cli ARGV``: its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(120):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def sweep(config: Path) -> dict[str, Any]:
    code, out, err = await cli("sweep", "--config", str(config), "--format", "json")
    assert code == 0, err
    swept: dict[str, Any] = json.loads(out)
    return swept


def without_elapsed(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The jobs with an unended job's ``elapsed_s`` left out: it is 'now' minus its start, and
    the live sweep's now is a moment after the recording's."""
    return [{k: v for k, v in job.items()
             if k != "elapsed_s" or job["state"] not in ("RUNNING", "PENDING")} for job in jobs]


async def test_a_recording_replays_as_the_live_sweep(standin: KubeStandIn,
                                                     tmp_path: Path) -> None:
    """Recorded through the CLI, then swept as a replay cluster: the same jobs with the same
    states, flags, metrics, verdicts, trends and recommendations as the live sweep, each
    running job's elapsed time at the recording's time, and no request to the API server."""
    populate(standin)
    live = live_config(standin, tmp_path)
    recording = tmp_path / "bug-1234"
    code, out, err = await cli("record", "--cluster", "beta", str(recording),
                               "--config", str(live))
    assert code == 0, err
    assert out.strip() == f"recorded beta into {recording}"
    swept = await sweep(live)
    asked = len(standin.requests)
    replayed = await sweep(replay_config(tmp_path, recording))
    assert len(standin.requests) == asked  # the replay reads no API server

    assert [c["status"] for c in replayed["clusters"]] == ["ok"]
    ids = sorted(job["job_id"] for job in swept["jobs"])
    assert ids == ["eval-wait", "jobset/rl-js", "rl-grpo", "rl-idx", "rl-kubelet", "sft-crash",
                   "sft-loop"]
    assert without_elapsed(replayed["jobs"]) == without_elapsed(swept["jobs"])
    meta = json.loads((recording / "cluster.json").read_text())
    recorded_at = datetime.fromisoformat(meta["recorded_at"].replace("Z", "+00:00"))
    running = {job["job_id"]: job["elapsed_s"] for job in replayed["jobs"]
               if job["job_id"] == "rl-grpo"}
    assert running == {"rl-grpo": int((recorded_at - (NOW - timedelta(hours=2))
                                       ).total_seconds())}
    looping = next(job for job in replayed["jobs"] if job["job_id"] == "sft-loop")
    assert "recurring-failure" in looping["flags"]  # its previous run's log was replayed
    assert "No module named 'flash_attn'" in looping["recommendation"]["why"]


async def test_a_recording_holds_only_the_selected_jobs(standin: KubeStandIn,
                                                        tmp_path: Path) -> None:
    """Another user's run (its object, its pod, its log) is in no file of the recording, nor
    is an environment variable's value (a token) of a recorded job's containers, or the
    copy of the whole spec kubectl apply leaves in an annotation (the probe reads neither; a
    recording travels); the files say kind kubernetes and are the owner's only."""
    populate(standin)
    recording = tmp_path / "rec"
    code, _, err = await cli("record", "--cluster", "beta", str(recording),
                             "--config", str(live_config(standin, tmp_path)))
    assert code == 0, err
    assert json.loads((recording / "cluster.json").read_text())["kind"] == "kubernetes"
    for path in recording.iterdir():
        assert "datagen-bob" not in path.read_text(), path.name
        assert "bob's secret" not in path.read_text(), path.name
        assert SECRET not in path.read_text(), path.name
        assert path.stat().st_mode & 0o777 == 0o600
    assert recording.stat().st_mode & 0o777 == 0o700
    pods = json.loads((recording / "pods.json").read_text())["items"]
    [grpo] = [pod for pod in pods if pod["metadata"]["name"] == "rl-grpo-0"]
    assert grpo["spec"]["containers"][0]["env"] == [
        {"name": "WANDB_API_KEY", "value": "(not recorded)"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}]


async def test_record_names_the_kinds_it_records(tmp_path: Path) -> None:
    """A replay cluster cannot be recorded: the usage error (exit 2) and ``record --help`` name
    the kinds that can, Kubernetes among them (they said SLURM only)."""
    recording = tmp_path / "rec"
    recording.mkdir()
    code, _, err = await cli("record", "--cluster", "beta", str(tmp_path / "again"),
                             "--config", str(replay_config(tmp_path, recording)))
    assert code == 2 and "record needs a slurm or kubernetes cluster" in err, err
    code, out, _ = await cli("record", "--help")
    assert code == 0 and "SLURM or Kubernetes cluster" in " ".join(out.split())


async def test_a_job_of_a_recording_reads_as_the_live_job(standin: KubeStandIn,
                                                          tmp_path: Path) -> None:
    """``jobtables job`` on the replay cluster answers as on the live one (the rank that
    failed, its error, the diagnose), from the recording alone."""
    populate(standin)
    live = live_config(standin, tmp_path)
    recording = tmp_path / "rec"
    code, _, err = await cli("record", "--cluster", "beta", str(recording), "--config", str(live))
    assert code == 0, err
    answers = []
    for config in (live, replay_config(tmp_path, recording)):
        code, out, err = await cli("job", "rl-idx", "--config", str(config), "--format", "json")
        assert code == 0, err
        answers.append(json.loads(out))
    assert without_elapsed(answers[1:]) == without_elapsed(answers[:1])
    assert answers[1]["trend"].startswith("rank 1 failed (Error, exit 1): RuntimeError: NCCL")


async def test_an_unreachable_cluster_is_not_recorded(standin: KubeStandIn,
                                                      tmp_path: Path) -> None:
    """The API server answers the job list with 500s: one line naming why, exit 1, and no
    directory written (an empty recording would replay as a cluster with no jobs)."""
    populate(standin)
    standin.faults["jobs"] = "500"
    recording = tmp_path / "rec"
    code, out, err = await cli("record", "--cluster", "beta", str(recording),
                               "--config", str(live_config(standin, tmp_path)))
    assert (code, out) == (1, "")
    assert err.startswith("jobtables: cannot record 'beta': list jobs: HTTP 500"), err
    assert not recording.exists()
