"""Paginated lists through the API stand-in (``limit``/``continue`` as the API server pages,
its 410 ``Expired`` for a token past compaction, its 429 throttling with ``Retry-After``):
the real client and probe, nothing patched."""

from __future__ import annotations

import pytest

from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.session import PAGE_SIZE
from probes.models import JobState
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
OTHERS = 2 * PAGE_SIZE + 100
"""Other teams' pods in the namespace: the sweep's pod list spans three pages."""


def _namespace(standin: KubeStandIn) -> None:
    for i in range(7):
        standin.jobs[f"rl-{i}"] = make_job(f"rl-{i}", active=1)
        standin.pods[f"rl-{i}-0"] = make_pod(f"rl-{i}-0", f"rl-{i}")
        standin.logs[f"rl-{i}-0"] = VERL_LOG
    for i in range(OTHERS):  # listed after ours: a cut list would read our jobs' pods only
        standin.pods[f"zz-{i:04d}"] = make_pod(f"zz-{i:04d}", f"other-{i}")
    # ours last this time: every page must be read for their pods to be found
    standin.pods = dict(sorted(standin.pods.items(), key=lambda kv: not kv[0].startswith("zz")))


@pytest.mark.parametrize("fault", [None, "410-once", "429-once"])
async def test_every_page_is_read(standin: KubeStandIn, probe: KubernetesProbe,
                                  fault: str | None) -> None:
    """Three pages of pods; a continue token that expired lists again, whole, once; a
    throttled list is asked again after its Retry-After: every job found running."""
    _namespace(standin)
    if fault == "410-once":
        standin.faults["pods"] = fault
    elif fault == "429-once":
        standin.faults["jobs"] = fault
    facts = await probe.collect()
    assert facts.status == "ok", facts.detail
    states = {job.record.job_id: (job.record.state, job.record.pods_total) for job in facts.jobs}
    assert states == {f"rl-{i}": (JobState.RUNNING, 1) for i in range(7)}
    pages = standin.calls("GET", "/pods")
    assert len(pages) == (5 if fault == "410-once" else 3)
    assert all(call.query["limit"] == str(PAGE_SIZE) for call in pages)


@pytest.mark.parametrize(("fault", "said"), [
    ("410", "HTTP 410"), ("429", "HTTP 429 Too Many Requests"),
])
async def test_a_list_that_keeps_failing_is_unreachable(standin: KubeStandIn,
                                                        probe: KubernetesProbe, fault: str,
                                                        said: str) -> None:
    """A token that expires again on the fresh list, or a throttle that does not lift: the
    cluster is unreachable with the API's answer, never a cut list (jobs with no pods)."""
    _namespace(standin)
    standin.faults["pods" if fault == "410" else "jobs"] = fault
    facts = await probe.collect()
    assert facts.status == "unreachable" and said in (facts.detail or ""), facts.detail
    assert facts.jobs == ()


async def test_a_throttled_log_read_is_asked_again(standin: KubeStandIn,
                                                   probe: KubernetesProbe) -> None:
    """One 429 on a log read (API priority and fairness, Retry-After: 1) is asked again after
    its Retry-After, as a list is: it stopped every log read of the sweep, each job
    'fetch-failed: log reads stopped: HTTP 429' for one transient answer."""
    for i in range(3):
        standin.jobs[f"rl-{i}"] = make_job(f"rl-{i}", active=1)
        standin.pods[f"rl-{i}-0"] = make_pod(f"rl-{i}-0", f"rl-{i}")
        standin.logs[f"rl-{i}-0"] = VERL_LOG
    standin.faults["log"] = "429-once"
    facts = await probe.collect()
    fetched = {job.record.job_id: job.log.status if job.log else None for job in facts.jobs}
    assert fetched == {"rl-0": "ok", "rl-1": "ok", "rl-2": "ok"}, [
        job.log.error for job in facts.jobs if job.log]
    standin.faults["log"] = "429"  # near miss: throttled again, the reads stop with it
    before = len(standin.calls("GET", "/log"))
    again = await probe.collect()
    errors = [job.log.error or "" for job in again.jobs if job.log]
    assert all("HTTP 429" in error for error in errors), errors
    assert len(standin.calls("GET", "/log")) - before == 2  # asked twice, then stopped
