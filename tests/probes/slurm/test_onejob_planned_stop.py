"""``jobtables job`` of a COMPLETED run that stopped itself ahead of its walltime names its
successor, on the real SLURM 22.05.

A replay of NeMo-RL's console ending 'Timeout has been reached, stopping training early' exits
0 (COMPLETED at step 12 of 100) with an ``afterany`` successor pending. The sweep read it a
chain restart, but the one-job read listed the user's live jobs for a TIMEOUT only, so 'jobtables
job' of the same job read 'Stopped at time budget; no successor queued' beside the sweep's
'normal chain restart'. The module cancels only its own ids and removes its directory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.models import JobState
from probes.slurm.probe import SlurmProbe
from report.judge import judge_job
from report.settings import ReportSettings
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_onejob import _ssh

NEMO = Path(__file__).parents[2] / "fixtures" / "nemo-rl-rebuilt" / "grpo_timeout.log"


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> tuple[str, str]:
    await _ssh(env, ["mkdir", "-p", f"{run_dir}/checkpoints/step_12"])
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=NEMO.read_text())
    await _ssh(env, ["tee", f"{run_dir}/run.sh"], stdin=f"#!/bin/sh\ncat {run_dir}/console.log\n")
    name = f"rl-nemo-ps-{tag}"
    first = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                             "-o", f"{run_dir}/%x-%j.out", f"{run_dir}/run.sh"])
    first_id = first.strip().split(";")[0]
    second = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                              f"--dependency=afterany:{first_id}", "-o", f"{run_dir}/%x-%j.out",
                              "--wrap", "sleep 300"])
    return first_id, second.strip().split(";")[0]


async def _wait_completed(env: SlurmEnv, job: str, bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state == "COMPLETED":
            return
        await asyncio.sleep(2)
    pytest.fail(f"job {job} did not complete within {bound_s}s: {state!r}")


@pytest.fixture(scope="module")
def chain(slurm_env: SlurmEnv) -> Iterator[tuple[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/planned-stop-{tag}"
    ids: list[str] = []
    try:
        first, second = asyncio.run(_submit(slurm_env, run_dir, tag))
        ids = [first, second]
        asyncio.run(_wait_completed(slurm_env, first, bound_s=240))
        yield first, second
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def test_one_job_read_names_the_planned_stops_successor(
    slurm_env: SlurmEnv, chain: tuple[str, str],
) -> None:
    """The one-job read of the COMPLETED run lists its user's live jobs: a chain restart."""
    first, second = chain
    cluster = slurm_env.cluster(checkpoint_roots=["{workdir}/checkpoints"])
    facts = asyncio.run(SlurmProbe(cluster).collect_one(first))
    job = next(j for j in facts.jobs if j.record.job_id == first)
    assert job.record.state is JobState.COMPLETED
    assert second in {j.record.job_id for j in facts.jobs}
    report = judge_job(job, cluster_records=[j.record for j in facts.jobs],
                       settings=ReportSettings(), now=facts.collected_at).report
    assert report.verdict == "restarting" and report.successor == second
    assert report.banked_step == 12
