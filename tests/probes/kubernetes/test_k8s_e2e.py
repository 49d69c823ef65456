"""Opt-in end-to-end test (tier 4): the probe against the real cluster in ``$KUBECONFIG``.

Read-only: it sweeps the namespace named by ``JOBTABLES_E2E_NAMESPACE`` (default
``default``; ``JOBTABLES_E2E_CONTEXT`` and ``JOBTABLES_E2E_SELECTOR`` narrow it) and
cancels nothing.
"""

from __future__ import annotations

import os

import pytest

from probes.config import KubernetesCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState

pytestmark = pytest.mark.e2e


async def test_sweep_real_cluster() -> None:
    """One sweep of a real namespace returns ok, and every job carries a contract state."""
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        pytest.skip("KUBECONFIG not set: opt-in end-to-end test against a real cluster")
    cluster = KubernetesCluster(
        name="e2e",
        kubeconfig=kubeconfig.split(os.pathsep)[0],
        context=os.environ.get("JOBTABLES_E2E_CONTEXT") or None,
        namespace=os.environ.get("JOBTABLES_E2E_NAMESPACE", "default"),
        label_selector=os.environ.get("JOBTABLES_E2E_SELECTOR") or None,
    )
    probe = KubernetesProbe(cluster)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "ok", facts.detail
    assert facts.round_trips >= 2
    for job in facts.jobs:
        assert job.record.state in set(JobState)
        assert job.log is None or job.log.status in {"ok", "failed"}
