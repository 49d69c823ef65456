"""The cancel button on a RayJob's alert deletes the RayJob, through the bot's own sweeper and
the real Kubernetes probe at the API stand-in, also from a bot restarted since the sweep.

The button calls ``Sweeper.cancel(cluster, job_id, uid=<the episode's uid>)``; the episode's
uid is the one the sweep's row carries (``jobtables/uid``): the RayJob's. A restarted bot's
probe has not seen the job, and tries the kinds in turn, the Job first: the RayJob's
submitter Job has its name (KubeRay names it so) but not its uid, so the API server refuses
that delete (409) and the RayJob is deleted, its RayCluster and submitter with it; the
submitter Job alone is never deleted (that left the RayCluster running).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import Config
from bot.episodes import job_uid
from bot.sweep import Sweeper
from probes.config import KubernetesCluster
from tests.probes.kubernetes.rayjobs import add_rayjob
from tests.probes.kubernetes.standin import KubeStandIn

VERL = "".join(f"(TaskRunnerV1 pid=2476) step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2"
               f" - critic/score/mean:0.4\n" for s in (1, 2, 3))


@pytest.fixture
async def standin() -> AsyncIterator[KubeStandIn]:
    server = KubeStandIn(jobsets={}, rayjobs={})
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def config_for(standin: KubeStandIn, tmp_path: Path) -> Config:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    return Config(clusters=(KubernetesCluster(
        name="beta", kubeconfig=str(kubeconfig), context="standin", namespace="ml",
        request_timeout_s=5.0, recent_hours=24 * 365 * 10),))


async def test_the_cancel_button_deletes_the_rayjob_from_a_restarted_bot(
        standin: KubeStandIn, tmp_path: Path) -> None:
    config = config_for(standin, tmp_path)
    add_rayjob(standin, "rl-grpo-verl", log=VERL)
    swept = Sweeper(lambda: config)
    try:
        result = await swept.sweep()
    finally:
        await swept.aclose()
    uid = job_uid(result.job_facts("beta", "rl-grpo-verl"))
    assert uid == "uid-rl-grpo-verl"
    restarted = Sweeper(lambda: config)
    try:
        await restarted.cancel("beta", "rl-grpo-verl", uid=uid)
    finally:
        await restarted.aclose()
    assert "rl-grpo-verl" not in (standin.rayjobs or {})
    assert "rl-grpo-verl" in standin.jobs  # the submitter Job goes with the RayJob, not alone
    deleted = [(r.path.rsplit("/", 2)[-2], r.body["preconditions"]["uid"])
               for r in standin.requests if r.method == "DELETE"]
    assert deleted[0] == ("jobs", uid) and deleted[-1] == ("rayjobs", uid), deleted
