"""One cluster's API calls stay one at a time when a ``/job`` (or a cancel) comes in while a
sweep is under way (the seed: keep the calls synchronous).

The bot keeps one probe per cluster for its scheduled sweeps, its ``/job`` answers and its
cancels: a ``/job`` during a sweep ran its own lists and log read beside the sweep's, on the
same session, and reset the probe's per-sweep state under it (the call count and the sweep
budget of ``KubeClient.budget``, the log-read outage and silent nodes).
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from probes.config import KubernetesCluster
from probes.deep_read import read_k8s_job
from probes.kubernetes import probe as k8s_probe
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "".join(f"step:{s} - actor/entropy:0.5 - actor/grad_norm:0.2 - "
                   f"critic/score/mean:0.4\n" for s in (1, 2, 3))


def add_jobs(standin: KubeStandIn, count: int) -> None:
    for i in range(count):
        standin.jobs[f"rl-{i}"] = make_job(f"rl-{i}", active=1)
        standin.pods[f"rl-{i}-0"] = make_pod(f"rl-{i}-0", f"rl-{i}")
        standin.logs[f"rl-{i}-0"] = VERL_LOG


async def test_a_job_query_during_a_sweep_waits_for_it(standin: KubeStandIn,
                                                        probe: KubernetesProbe) -> None:
    """A sweep whose log reads are slow, a ``/job`` and a cancel sent while it runs: the API
    never answers two of them at once, and each answer is whole (every job read, the one
    asked for read, its round trips its own)."""
    add_jobs(standin, 3)
    standin.jobs["rl-gone"] = make_job("rl-gone", active=1)
    standin.faults["log"] = "slow"
    standin.slow_s = 0.2
    sweep = asyncio.create_task(probe.collect())
    await standin.log_asked.wait()  # the sweep is at its log reads
    one = await probe.collect_one("rl-1")
    await probe.cancel("rl-gone")
    facts = await sweep
    assert standin.peak_in_flight == 1
    assert facts.status == "ok"
    assert {job.record.job_id: job.log.status for job in facts.jobs if job.log} == {
        "rl-0": "ok", "rl-1": "ok", "rl-2": "ok"}
    # jobs, jobsets, pytorchjobs, rayjobs, tfjobs, mpijobs, pods; 3 log reads
    assert facts.round_trips == 7 + 3
    [job] = one.jobs
    assert job.record.job_id == "rl-1" and job.summary is not None
    assert job.summary.points[-1].step == 3
    assert one.round_trips == 7 + 1  # the same lists, its one log


async def test_a_deep_probe_during_a_sweep_waits_for_it(standin: KubeStandIn,
                                                         probe: KubernetesProbe,
                                                         cluster: KubernetesCluster) -> None:
    """The deep probe reads the job with a probe of its own (its log's tail whole): on the
    same API server, it takes its turn after the sweep's calls."""
    add_jobs(standin, 3)
    standin.faults["log"] = "slow"
    standin.slow_s = 0.2
    sweep = asyncio.create_task(probe.collect())
    await standin.log_asked.wait()
    read = await read_k8s_job(cluster, "rl-2")
    facts = await sweep
    assert standin.peak_in_flight == 1
    assert read is not None and read[0].log is not None and read[0].log.status == "ok"
    assert len([job for job in facts.jobs if job.log and job.log.status == "ok"]) == 3


async def test_closing_does_not_wait_on_a_hung_sweep(standin: KubeStandIn,
                                                     cluster: KubernetesCluster,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A shutdown during a sweep whose log read hangs (a 60 s request bound) closes the
    session after its short wait (``CLOSE_WAIT_S``, 0.05 s here instead of 2 s of real
    time), not the read's minute."""
    monkeypatch.setattr(k8s_probe, "CLOSE_WAIT_S", 0.05)
    add_jobs(standin, 1)
    standin.faults["log"] = "hang"
    probe = KubernetesProbe(cluster.model_copy(update={"request_timeout_s": 60.0,
                                                       "timeout_s": 120.0}))
    sweep = asyncio.create_task(probe.collect())
    await standin.log_asked.wait()
    async with asyncio.timeout(30):  # half the read's bound: a close that waits for it fails
        await probe.aclose()
    sweep.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sweep
