"""The pod list past its bound says what would narrow it: the namespace only. Pods are listed
namespace-wide (``KubeClient.list_pods``: the cluster's ``label_selector`` picks Jobs, pods
need not carry it), so 'narrow the cluster's namespace or label_selector' sent an operator of
a namespace holding more than 10,000 pods to a setting that changes nothing: the cluster stayed
unreachable every sweep. The Job list's advice still names both (near miss)."""

from __future__ import annotations

import pytest

from probes.config import KubernetesCluster
from probes.errors import UnreachableError
from probes.kubernetes import client as kube
from probes.kubernetes import session


async def _endless(**query: object) -> dict[str, object]:
    token = str(query.get("_continue") or "t0")
    return {"items": [{"n": token}], "metadata": {"continue": token + "x"}}


async def test_a_pod_list_past_its_bound_names_the_namespace_only(
        cluster: KubernetesCluster) -> None:
    api = kube.KubeClient(cluster)
    try:
        with pytest.raises(UnreachableError) as pods:
            await api._list_pages("list pods", _endless, selector=False)
        with pytest.raises(UnreachableError) as jobs:
            await api._list_pages("list jobs", _endless)
    finally:
        await api.close()
    bound = f"more than {session.PAGE_SIZE * session.MAX_PAGES} objects"
    said = str(pods.value)
    assert bound in said and "namespace or label_selector" not in said, said
    assert "narrow the cluster's namespace" in said and "namespace-wide" in said, said
    assert bound in str(jobs.value), jobs.value
    assert "narrow the cluster's namespace or label_selector" in str(jobs.value), jobs.value
