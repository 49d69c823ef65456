"""A running job whose StdOut is ``/dev/null`` and whose script logs to ``logs/*_<jobid>.out``
under its workdir, read through the CLI on the real SLURM 22.05 over SSH.

Found so (job 36): ``sbatch -o /dev/null --chdir W`` of a verl run writing
``logs/rl-verl-a5_${SLURM_JOB_ID}.out`` read ``log-missing``, 'No log found (/dev/null)',
verdict unknown, in ``jobtables sweep`` and ``jobtables job``: its live log sat in the workdir's
``logs/`` and was never looked at (seed: absence at the scheduler path is a path mismatch, not a
death). Near miss: a ``logs/`` that holds only another job's log stays ``log-missing``. And
(job 774) a StdOut holding only the script's preamble while the program writes
``logs/train_<id>.out`` read 'Filling buffer' nine steps in.
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

STEP = ("step:{n} - actor/entropy:0.61 - actor/pg_loss:-0.01 - actor/grad_norm:0.2"
        " - critic/score/mean:0.3 - training/global_step:{n}")
OWN = ("#!/bin/sh\nmkdir -p logs\n"
       + "".join(f"echo '{STEP.format(n=n)}' >> logs/train_$SLURM_JOB_ID.out\n" for n in (1, 2))
       + "sleep 600\n")
PRE = ("#!/bin/sh\necho \"Job $SLURM_JOB_ID starting on $(hostname)\"\nmkdir -p logs\n"
       + "".join(f"echo '{STEP.format(n=n)}' >> logs/train_$SLURM_JOB_ID.out\n" for n in (1, 2))
       + "sleep 600\n")
OTHER = ("#!/bin/sh\nmkdir -p logs\n"
         "echo 'step:1 - actor/entropy:0.6' > logs/train_1.out\nsleep 600\n")


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    ids = {}
    for kind, script in (("own", OWN), ("other", OTHER), ("pre", PRE)):
        work = f"{run_dir}/{kind}"
        out = "slurm-%j.out" if kind == "pre" else "/dev/null"
        await _ssh(env, ["mkdir", "-p", work])
        await _ssh(env, ["tee", f"{work}/run.sh"], stdin=script)
        got = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-{kind}-{tag}", "--chdir", work,
                               f"--output={out}", f"{work}/run.sh"])
        ids[kind] = got.strip().split(";")[0]
    return ids


async def _wait_written(env: SlurmEnv, run_dir: str, bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        found = await _ssh(env, ["sh", "-c", f"ls {run_dir}/*/logs 2>/dev/null || true"])
        logs = await _ssh(env, ["sh", "-c", f"cat {run_dir}/own/logs/*.out"
                                            f" {run_dir}/pre/logs/*.out 2>/dev/null || true"])
        if found.count(".out") == 3 and logs.count("global_step:2") == 2:
            return
        await asyncio.sleep(1)
    pytest.fail(f"the jobs did not write their logs within {bound_s}s")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[tuple[dict[str, str], str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/wlogs-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        asyncio.run(_wait_written(slurm_env, run_dir, bound_s=120))
        yield ids, run_dir
    finally:
        if ids:
            asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def test_sweep_and_job_read_the_log_under_workdir_logs(
    slurm_env: SlurmEnv, jobs: tuple[dict[str, str], str], tmp_path: Path,
) -> None:
    """Sweep and job both read ``logs/train_<id>.out``: log-path-mismatch, the step and
    metrics taken, never log-missing."""
    ids, run_dir = jobs
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    report = cli_json(config, "sweep")
    rows = {j["job_id"]: j for j in report["jobs"] if j["job_id"] in ids.values()}
    for row in (rows[ids["own"]], cli_json(config, "job", ids["own"])):
        assert row["log_path"] == f"{run_dir}/own/logs/train_{ids['own']}.out", row
        assert "log-path-mismatch" in row["flags"] and "log-missing" not in row["flags"], row
        assert (row["step"], row["metrics"].get("entropy")) == (2, pytest.approx(0.61)), row
        assert row["verdict"] != "unknown", row


def test_another_jobs_log_under_logs_is_not_taken(
    slurm_env: SlurmEnv, jobs: tuple[dict[str, str], str], tmp_path: Path,
) -> None:
    """Near miss: ``logs/`` holds only job 1's log: still log-missing, nothing read."""
    ids, _run_dir = jobs
    row = cli_json(slurm_env.config_toml(tmp_path, recent_hours=1), "job", ids["other"])
    assert (row["log_path"], "log-missing" in row["flags"]) == (None, True), row


def test_a_preamble_stdout_gives_way_to_the_log_under_logs(
    slurm_env: SlurmEnv, jobs: tuple[dict[str, str], str], tmp_path: Path,
) -> None:
    """StdOut holds only 'Job N starting on ...'; the program writes logs/train_<id>.out: that
    is read (job 774 read 'Filling buffer' nine steps in), log-path-mismatch saying why."""
    ids, run_dir = jobs
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    swept = next(j for j in cli_json(config, "sweep")["jobs"] if j["job_id"] == ids["pre"])
    for row in (swept, cli_json(config, "job", ids["pre"])):
        assert row["log_path"] == f"{run_dir}/pre/logs/train_{ids['pre']}.out", row
        assert "log-path-mismatch" in row["flags"], row
        assert (row["step"], row["verdict"]) == (2, "healthy"), row
