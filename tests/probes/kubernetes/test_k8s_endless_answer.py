"""An API answer read whole (a list page) is bounded by the client: a server (or a proxy in
front of it) that sends a body without end makes the cluster unreachable with the reason, it
is not buffered until the bot's memory runs out.

Found by the hostile-cluster review, after the pod-log read (7c64c6f): the generated client
reads every answer whole (``aiohttp.ClientResponse.read``) before parsing it, so an endless
jobs list grew the process until the request timeout (then 'no answer within 5s'), at
whatever rate the server sent. The stand-in's ``endless`` fault streams 64 KiB lines for ever;
the bound is lowered here so the test reads a few MiB, not the default 64 MiB.
"""

from __future__ import annotations

import pytest

from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.session import BoundedResponse
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn


@pytest.mark.parametrize("route", ["jobs", "pods"])
async def test_an_endless_list_answer_is_unreachable_with_the_reason(
        standin: KubeStandIn, probe: KubernetesProbe, monkeypatch: pytest.MonkeyPatch,
        route: str) -> None:
    """The list whose body never ends: unreachable, naming the list and the bound."""
    monkeypatch.setattr(BoundedResponse, "limit", 2 << 20)
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.faults[route] = "endless"
    facts = await probe.collect()
    assert facts.status == "unreachable", facts
    assert facts.detail is not None and f"list {route}" in facts.detail
    assert "answer larger than 2097152 bytes" in facts.detail, facts.detail


async def test_a_bounded_answer_is_read_as_before(standin: KubeStandIn,
                                                  probe: KubernetesProbe) -> None:
    """Near-miss: the same cluster answering normally is read, its job and log there."""
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.logs["sft-a-0"] = "{'loss': 1.0, 'grad_norm': 0.5, 'learning_rate': 1e-05}\n"
    facts = await probe.collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ["sft-a"]
