"""A pod log read is bounded by the client, not only by the API server: one that ignores
``limitBytes`` (an older or hostile server, a proxy in front of it) and sends a body without
end is cut at ``tail_bytes``, where a compliant server would have stopped.

Found by the hostile-cluster review: ``KubeClient._read_log_window`` read the whole body
(``response.read()``) and only then looked at its size, so such a server filled the bot's
memory until the request timeout, and the job's read then failed with a timeout instead of
its log. The stand-in's ``endless`` fault streams 64 KiB lines for ever.
"""

from __future__ import annotations

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn


async def test_an_endless_log_body_is_cut_at_tail_bytes(standin: KubeStandIn,
                                                         probe: KubernetesProbe) -> None:
    """The job's log is the body's first ``tail_bytes`` (1 MiB by default), read; the
    cluster is ok. Before: the read timed out ('no answer ...'), status failed."""
    standin.jobs["sft-a"] = make_job("sft-a", active=1)
    standin.pods["sft-a-0"] = make_pod("sft-a-0", "sft-a")
    standin.faults["log"] = "endless"
    facts = await probe.collect()
    assert facts.status == "ok", facts.detail
    (job,) = facts.jobs
    assert job.log is not None and job.log.status == "ok", job.log
    assert job.log.size == 1 << 20 and job.log.text is not None and "x" * 100 in job.log.text
