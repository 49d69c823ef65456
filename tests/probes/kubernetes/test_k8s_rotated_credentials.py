"""Credentials that rotate under a long-lived probe (the bot's): a projected service-account
token file the kubelet rewrites, an exec plugin whose short-lived token expired (EKS's last 15
minutes). Through the real client and kubeconfig against the API stand-in, which accepts only
the current token.

The probe kept the token it loaded first until a 401, and the 401 made that sweep's cluster
``unreachable`` (its jobs gone from the report) before the next sweep loaded the new one: with
a token shorter-lived than the sweep period, every other sweep. As client-go does (the exec
plugin run again on a 401; a token file read again), a 401 on credentials loaded by an
earlier sweep loads them again and asks once more.
"""

from __future__ import annotations

import json
from pathlib import Path

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn


def _kubeconfig(standin: KubeStandIn, path: Path, user: dict[str, object]) -> Path:
    config = json.loads(standin.write_kubeconfig(path).read_text())
    config["users"] = [{"name": "tester", "user": user}]
    path.write_text(json.dumps(config))
    return path


def _plugin(tmp_path: Path, token_file: Path) -> Path:
    """An exec plugin answering the token in ``token_file``, valid for 15 minutes from NOW."""
    script = tmp_path / "plugin.sh"
    script.write_text(
        "#!/bin/sh\nprintf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", "
        "\"kind\": \"ExecCredential\", \"status\": {\"token\": \"%s\", "
        "\"expirationTimestamp\": \"2026-11-30T16:15:00Z\"}}' \"$(cat " + str(token_file)
        + ")\"\n")
    script.chmod(0o755)
    return script


def _cluster(cluster: KubernetesCluster, kubeconfig: Path) -> KubernetesCluster:
    return cluster.model_copy(update={"kubeconfig": str(kubeconfig)})


async def test_a_rotated_token_is_loaded_again_within_the_sweep(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """Sweep, then the API server takes only a new token (the token file rewritten; the exec
    plugin's token expired and it now answers a new one): the next sweep is ok, its job
    listed, the credentials loaded again once; a token still refused after that is the
    cluster's 401 (unreachable), asked once more only."""
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2\n"
    token_file = tmp_path / "token"
    token_file.write_text(standin.token)
    users = {"file": {"tokenFile": str(token_file)},
             "exec": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                               "command": str(_plugin(tmp_path, token_file)),
                               "interactiveMode": "Never"}}}
    for kind, user in users.items():
        token_file.write_text(standin.token)
        kubeconfig = _kubeconfig(standin, tmp_path / f"kubeconfig-{kind}", user)
        probe = KubernetesProbe(_cluster(cluster, kubeconfig), clock=lambda: NOW)
        try:
            assert (await probe.collect()).status == "ok"
            standin.token = f"rotated-{kind}"
            token_file.write_text(standin.token)
            facts = await probe.collect()
            assert (facts.status, facts.detail) == ("ok", None), (kind, facts.detail)
            assert [job.record.job_id for job in facts.jobs] == ["rl-a"]
            standin.token = f"revoked-{kind}"  # the file still holds the old one
            before = len(standin.requests)
            refused = await probe.collect()
            assert refused.status == "unreachable" and "HTTP 401" in str(refused.detail)
            assert len(standin.requests) - before == 2, kind  # asked once more, no more
        finally:
            await probe.aclose()
