"""``jobtables job ID`` of a RUNNING run banks none of a neighbouring run's saves in the
shared workdir, as the sweep does not, on the real SLURM 22.05 over SSH.

Two jobs of one user run from one directory: an EasyR1 replay at step 20 that saved nothing,
and a torchtitan-named job whose ``outputs/checkpoint/step-100`` and ``step-200`` (finished
DCP saves) lie under the workdir's default checkpoint root. The sweep lists both and keeps
the saves to the run that can claim them (``probes.slurm.shared_roots``); the one-job read
listed only the run's own name's jobs, saw one run in the directory, and banked step 200.
The module cancels only its own jobs and removes its directory.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.probes.logs.test_easyr1_console import easyr1_log
from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_e2e_easyr1_console import _wait_logged
from tests.probes.slurm.test_onejob import _ssh


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    saves = f"{run_dir}/outputs/checkpoint"
    await _ssh(env, ["mkdir", "-p", f"{saves}/step-100", f"{saves}/step-200"])
    await _ssh(env, ["touch", f"{saves}/step-100/.metadata", f"{saves}/step-200/.metadata"])
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=easyr1_log(20))
    await _ssh(env, ["tee", f"{run_dir}/run.sh"],
               stdin=f"#!/bin/sh\ncat {run_dir}/console.log\nsleep 600\n")
    ids = {}
    for key, script in (("easyr1", f"{run_dir}/run.sh"), ("titan", None)):
        argv = ["sbatch", "--parsable", "-J", f"rl-{key}-{tag}", "--chdir", run_dir,
                "-o", f"{run_dir}/%x-%j.out"]
        argv += [script] if script else ["--wrap", "echo 'Saving the checkpoint'; sleep 600"]
        ids[key] = (await _ssh(env, argv)).strip().split(";")[0]
    return ids


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/shared-wd-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        log = f"{run_dir}/rl-easyr1-{tag}-{ids['easyr1']}.out"
        asyncio.run(_wait_logged(slurm_env, ids["easyr1"], log, bound_s=120))
        yield ids
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))



def test_the_job_read_banks_none_of_its_neighbours_saves(
    slurm_env: SlurmEnv, jobs: dict[str, str], tmp_path: Path,
) -> None:
    """The EasyR1 run (step 20, no save) banks nothing in ``jobtables job`` as in the sweep."""
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    one = cli_json(config, "job", jobs["easyr1"])
    row = one["jobs"][0] if "jobs" in one else one
    assert row["job_id"] == jobs["easyr1"] and row["step"] == 20
    assert row["metrics"]["reward"] == pytest.approx(0.5)  # its Step blocks, read by job too
    assert row["banked_step"] is None
    swept = next(j for j in cli_json(config, "sweep")["jobs"] if j["job_id"] == jobs["easyr1"])
    assert swept["banked_step"] is None
