"""Fixtures for the Kubernetes probe tests: a running stand-in, a kubeconfig, a probe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW
from tests.probes.kubernetes.standin import KubeStandIn


@pytest.fixture
async def standin() -> AsyncIterator[KubeStandIn]:
    """A started API stand-in with the JobSet API installed and no objects."""
    server = KubeStandIn(jobsets={})
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def cluster(standin: KubeStandIn, tmp_path: Path) -> KubernetesCluster:
    """A cluster entry pointing at the stand-in through a real kubeconfig file."""
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    return KubernetesCluster(name="beta", kubeconfig=str(kubeconfig), context="standin",
                             namespace="ml", label_selector="team=post-training",
                             request_timeout_s=5.0, min_log_lines=1)


@pytest.fixture
async def probe(cluster: KubernetesCluster) -> AsyncIterator[KubernetesProbe]:
    """The probe under test, with the tests' fixed clock."""
    instance = KubernetesProbe(cluster, clock=lambda: NOW)
    try:
        yield instance
    finally:
        await instance.aclose()
