"""``jobtables probe NAME`` on a Kubernetes cluster, through the real CLI against the API
stand-in: the run's pod log is read whole for the completions TRL printed, and the verdict is
KILL or NO-KILL with the evidence quoted. The contract's probe names no backend; it refused
every Kubernetes cluster ('the deep probe reads SLURM jobs', exit 2)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from bot.config_file import load_config
from bot.deep_probe import run_deep_probe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).parents[3]
TRL = ROOT / "tests" / "fixtures" / "trl-1.16.0"


def _config(standin: KubeStandIn, tmp_path: Path) -> Path:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 5\n')
    return toml


def _run(standin: KubeStandIn, name: str, mode: str) -> None:
    standin.jobs[name] = make_job(name, active=1)
    standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
    standin.logs[f"{name}-0"] = (TRL / f"probe_{mode}.out").read_text(errors="replace")


async def _probe(toml: Path, name: str) -> tuple[int, dict[str, Any] | None, str]:
    return await _probe_named(toml, name, None)


async def _probe_named(toml: Path, name: str, cluster: str | None,
                       ) -> tuple[int, dict[str, Any] | None, str]:
    named = ["--cluster", cluster] if cluster else []
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "probe", name, *named, "--config", str(toml),
        "--format", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, json.loads(out) if out.strip() else None, err.decode()


async def test_probe_reads_a_kubernetes_runs_printed_completions(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A GRPO run whose weights were corrupted after step 10 is KILL, quoting the garbage; the
    healthy one is NO-KILL, saying what was read and that no pod file was."""
    toml = _config(standin, tmp_path)
    _run(standin, "grpo-corrupt", "corrupt")
    _run(standin, "grpo-healthy", "healthy")
    code, job, err = await _probe(toml, "grpo-corrupt")
    assert code == 0, err
    assert job is not None and job["cluster"] == "beta" and job["job_id"] == "grpo-corrupt"
    probe = job["deep_probe"]
    assert probe["verdict"] == "KILL"
    assert any("weight-sync garbage" in reason for reason in probe["reasons"])
    code, job, err = await _probe(toml, "grpo-healthy")
    assert code == 0, err
    assert job is not None and job["deep_probe"]["verdict"] == "NO-KILL"
    assert job["deep_probe"]["read"]["dumps"][0]["kind"] == "trl-log"
    assert any("no filesystem" in s for s in job["deep_probe"]["read"]["skipped"])


async def test_probe_of_an_unknown_kubernetes_job_is_a_clear_error(
        standin: KubeStandIn, tmp_path: Path) -> None:
    code, job, err = await _probe(_config(standin, tmp_path), "no-such-run")
    assert code == 2 and job is None
    assert "no job no-such-run on cluster 'beta'" in err and "Traceback" not in err


async def test_the_verdict_is_bound_to_the_job_instance(standin: KubeStandIn,
                                                        tmp_path: Path) -> None:
    """A KILL verdict's cancel button is bound to the Job's uid (a re-created Job of the same
    name is another job): the deep-probe episode had no uid, and a press on a Kubernetes
    verdict could never have matched the live Job."""
    _run(standin, "grpo-corrupt", "corrupt")
    config = load_config(_config(standin, tmp_path))
    detail = await run_deep_probe(config, "beta", "grpo-corrupt")
    uid, _ = detail.instance
    assert uid is not None and uid == standin.jobs["grpo-corrupt"].metadata.uid
    assert "instance" not in detail.model_dump(mode="json")


async def test_a_replay_cluster_is_still_refused(tmp_path: Path) -> None:
    """A recording has no rollouts to read: named, it is a usage error; unnamed, it is not
    counted among the clusters the probe could read."""
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "snap"\nkind = "replay"\npath = "{tmp_path}"\n')
    code, _, err = await _probe_named(toml, "123", "snap")
    assert code == 2 and "the deep probe reads SLURM and Kubernetes jobs" in err
    code, _, err = await _probe(toml, "123")
    assert code == 2 and "no active SLURM or Kubernetes cluster is configured" in err


async def test_probe_of_a_cluster_refusing_the_token_is_reported(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A revoked or expired token (401): CONTRACT §1, an unreachable cluster is reported, not an
    error: exit 0, the contract's report object naming the cluster unreachable and the refusal,
    no job, nothing on stderr. It was exit 1 (an internal error's code) and stderr alone."""
    _run(standin, "grpo-healthy", "healthy")
    toml = _config(standin, tmp_path)
    standin.write_kubeconfig(tmp_path / "kubeconfig", token="expired-token")
    code, answer, err = await _probe(toml, "grpo-healthy")
    assert (code, err) == (0, "")
    assert answer is not None and answer["jobs"] == []
    [cluster] = answer["clusters"]
    assert (cluster["name"], cluster["kind"], cluster["status"]) == ("beta", "kubernetes",
                                                                      "unreachable")
    assert "HTTP 401" in cluster["detail"], cluster
