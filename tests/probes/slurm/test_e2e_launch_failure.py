"""A job SLURM could not launch, its StdOut's directory never made, says why through the CLI on
the real SLURM 22.05 over SSH.

Found so (job 35): ``sbatch -o W/nosuch/dir/%j.out`` ended FAILED at once with
``Reason=JobLaunchFailure ExitCode=0:53`` (slurmd: "Could not open stdout file ...: No such
file or directory"), and ``jobtables job 35`` read 'FAILED by signal 53 (JobLaunchFailure)',
'Log: not found', diagnose quoting the same: no cause, and a signal the job never got.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh


async def _submit_and_wait(env: SlurmEnv, run_dir: str, tag: str, bound_s: float) -> str:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/run.sh"], stdin="#!/bin/sh\necho never\n")
    got = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-nodir-{tag}", "--chdir", run_dir,
                           f"--output={run_dir}/nosuch/dir/%j.out", f"{run_dir}/run.sh"])
    job = got.strip().split(";")[0]
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if "JobState=FAILED" in await _ssh(env, ["scontrol", "show", "job", job]):
            return job
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not fail to launch within {bound_s}s")


@pytest.fixture(scope="module")
def failed(slurm_env: SlurmEnv) -> Iterator[tuple[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/nodir-{tag}"
    try:
        yield asyncio.run(_submit_and_wait(slurm_env, run_dir, tag, bound_s=120)), run_dir
    finally:
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def test_job_and_sweep_name_the_absent_stdout_dir(
    slurm_env: SlurmEnv, failed: tuple[str, str], tmp_path: Path,
) -> None:
    """Both say it failed at launch because StdOut's directory does not exist; diagnose."""
    job, run_dir = failed
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    swept = next(j for j in cli_json(config, "sweep")["jobs"] if j["job_id"] == job)
    for row in (swept, cli_json(config, "job", job)):
        assert row["state"] == "FAILED" and row["verdict"] == "failed", row
        assert row["trend"].startswith("FAILED at launch (JobLaunchFailure): StdOut dir"), row
        assert row["recommendation"]["action"] == "diagnose", row
        assert f"StdOut dir {run_dir}/nosuch/dir does not exist" in \
            row["recommendation"]["why"], row
