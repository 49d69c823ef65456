"""The namespace a Kubernetes cluster is read in: the config's ``namespace``, else the
kubeconfig context's, as kubectl reads it.

Replayed through ``jobtables sweep`` against the API stand-in with a cluster entry naming no
``namespace`` and a kubeconfig whose context says ``namespace: ml``: the sweep listed
``default`` and reported no jobs, where ``kubectl get jobs`` with that kubeconfig lists ml's.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import yaml  # type: ignore[import-untyped]

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).parents[3]


def _cluster(kubeconfig: Path | str, **extra: object) -> KubernetesCluster:
    return KubernetesCluster(name="beta", kubeconfig=str(kubeconfig), request_timeout_s=5.0,
                             **extra)  # type: ignore[arg-type]


def _with_job(standin: KubeStandIn) -> None:
    standin.jobs["rl-ns"] = make_job("rl-ns", active=1)
    standin.pods["rl-ns-0"] = make_pod("rl-ns-0", "rl-ns")
    standin.logs["rl-ns-0"] = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2\n"


async def _ids(cluster: KubernetesCluster) -> tuple[str, list[str]]:
    probe = KubernetesProbe(cluster, clock=lambda: NOW)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    return facts.status, [job.record.job_id for job in facts.jobs]


async def test_no_namespace_reads_the_contexts(standin: KubeStandIn, tmp_path: Path) -> None:
    """No ``namespace`` in the config: the kubeconfig context's ``ml`` is listed (it read
    ``default``: no jobs)."""
    _with_job(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    assert await _ids(_cluster(kubeconfig)) == ("ok", ["rl-ns"])
    assert standin.calls("GET", "/namespaces/ml/jobs")
    assert not standin.calls("GET", "/namespaces/default/jobs")


async def test_the_configs_namespace_wins(standin: KubeStandIn, tmp_path: Path) -> None:
    """A ``namespace`` in the config is read whatever the context says."""
    _with_job(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    assert await _ids(_cluster(kubeconfig, namespace="other")) == ("ok", [])
    assert standin.calls("GET", "/namespaces/other/jobs")


async def test_a_context_without_namespace_reads_default(standin: KubeStandIn,
                                                         tmp_path: Path) -> None:
    """A context naming no namespace is ``default``, as kubectl's."""
    standin.namespace = "default"
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    del config["contexts"][0]["context"]["namespace"]
    kubeconfig.write_text(json.dumps(config))
    assert await _ids(_cluster(kubeconfig)) == ("ok", [])
    assert standin.calls("GET", "/namespaces/default/jobs")


async def test_the_named_contexts_namespace(standin: KubeStandIn, tmp_path: Path) -> None:
    """``context = "..."`` picks that context's namespace, not the current context's."""
    _with_job(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(kubeconfig.read_text())
    other = {"name": "elsewhere", "context": {**config["contexts"][0]["context"],
                                              "namespace": "elsewhere"}}
    config["contexts"].append(other)
    config["current-context"] = "elsewhere"
    kubeconfig.write_text(json.dumps(config))
    assert await _ids(_cluster(kubeconfig, context="standin")) == ("ok", ["rl-ns"])
    assert await _ids(_cluster(kubeconfig)) == ("ok", [])
    assert standin.calls("GET", "/namespaces/elsewhere/jobs")


async def test_a_kubeconfig_list_takes_the_first_current_context(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """``KUBECONFIG``-style lists merge as kubectl merges them: the first file that sets
    ``current-context`` wins (the library let the last one win), so its namespace is read."""
    _with_job(standin)
    first = standin.write_kubeconfig(tmp_path / "first")
    second = tmp_path / "second"
    second.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "other",
        "clusters": [{"name": "other", "cluster": {"server": standin.url}}],
        "users": [{"name": "other", "user": {"token": standin.token}}],
        "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other",
                                                   "namespace": "other"}}]}))
    assert await _ids(_cluster(f"{first}:{second}")) == ("ok", ["rl-ns"])
    assert not standin.calls("GET", "/namespaces/other/jobs")


async def test_an_empty_file_in_a_kubeconfig_list_is_an_empty_config(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """An empty file in a ``KUBECONFIG``-style list adds nothing, as kubectl reads it
    (client-go's ``clientcmd.Load``: no data is the empty config); the library's merge raised
    TypeError on it and the cluster was unreachable, 'not a kubeconfig'."""
    _with_job(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    empty = tmp_path / "empty"
    empty.write_text("")
    for listed in (f"{empty}:{kubeconfig}", f"{kubeconfig}:{empty}"):
        assert await _ids(_cluster(listed)) == ("ok", ["rl-ns"]), listed


async def test_sweep_without_namespace_through_the_cli(standin: KubeStandIn,
                                                       tmp_path: Path) -> None:
    """Through ``jobtables sweep --format json``: the context's namespace's job is listed."""
    _with_job(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\nrequest_timeout_s = 5\n')
    done = await _run(toml)
    assert [job["job_id"] for job in done["jobs"]] == ["rl-ns"]


async def _run(toml: Path) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    answer: dict[str, object] = json.loads(out)
    return answer

