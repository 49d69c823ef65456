"""``--output`` patterns with ``%%`` and every filename token, read through the CLI on the real
SLURM 22.05 over SSH (``jobtables sweep --format json`` and ``jobtables job ID``).

squeue --json gives the raw pattern; scontrol 22.05 prints ``StdOut`` wrongly for several
tokens (``run_100%%_7.out`` for ``run_100%%_%j.out``, ``%599`` for ``%%j``, ``%3a``, ``%5j``,
``%J``, ``%s``, ``%t``, ``%n``, ``%N`` left raw). Each job's log must be read where slurmstepd
wrote it, with no ``log-missing`` or ``log-path-mismatch``. The jobs print one HF-style dict and
stay RUNNING; the module cancels only its own jobs and removes its directory.
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

SCRIPT = ("#!/bin/sh\n"
          "echo \"{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.1}\"\n"
          "sleep 600\n")
PATTERNS = {
    "pct": "run_100%%_%j.out",
    "all": "p_100%%_%j_%J_%s_%t_%n_%N_%3a_%A_%u_%x_%5j_%2t.out",
    "arr": "rel_%%j_%A_%a_%3a_%J_%j.out",
}
"""Name suffix -> ``--output`` (relative ones land in ``--chdir``); ``arr`` is a 2-task array."""


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/run.sh"], stdin=SCRIPT)
    ids = {}
    for kind, pattern in PATTERNS.items():
        out = pattern if kind == "arr" else f"{run_dir}/{pattern}"
        extra = ["--array=3-4"] if kind == "arr" else []
        got = await _ssh(env, ["sbatch", "--parsable", "-J", f"sft-{kind}-{tag}", *extra,
                               "--chdir", run_dir, f"--output={out}", f"{run_dir}/run.sh"])
        ids[kind] = got.strip().split(";")[0]
    return ids


async def _wait_written(env: SlurmEnv, run_dir: str, bound_s: float) -> list[str]:
    """The four logs' names once each holds its line (bounded)."""
    deadline = time.monotonic() + bound_s
    names: list[str] = []
    while time.monotonic() < deadline:
        listing = await _ssh(env, ["sh", "-c", f"cd {run_dir} && grep -l loss -- *.out || true"])
        names = sorted(listing.split())
        if len(names) == 4:
            return names
        await asyncio.sleep(1)
    pytest.fail(f"the jobs did not write their logs within {bound_s}s: {names!r}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[tuple[dict[str, str], str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/pct-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        asyncio.run(_wait_written(slurm_env, run_dir, bound_s=120))
        yield ids, run_dir
    finally:
        if ids:
            asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))



def test_the_sweep_reads_each_log_where_slurm_wrote_it(
    slurm_env: SlurmEnv, jobs: tuple[dict[str, str], str], tmp_path: Path,
) -> None:
    """Every job (the array's two tasks too) reads its step from the file slurmstepd made."""
    ids, run_dir = jobs
    report = cli_json(slurm_env.config_toml(tmp_path, recent_hours=1), "sweep")
    ours = {j["job_id"]: j for j in report["jobs"] if j["name"].endswith(run_dir[-6:])}
    assert len(ours) == 4, sorted(ours)
    for job_id, row in ours.items():
        assert row["log_path"] is not None and row["log_path"].startswith(run_dir + "/"), job_id
        assert not {"log-missing", "log-path-mismatch"} & set(row["flags"]), (job_id, row)
        assert row["metrics"].get("loss") == pytest.approx(1.5), job_id
    pct = ours[ids["pct"]]["log_path"]
    assert pct == f"{run_dir}/run_100%_{ids['pct']}.out"


def test_job_reads_each_log_where_slurm_wrote_it(
    slurm_env: SlurmEnv, jobs: tuple[dict[str, str], str], tmp_path: Path,
) -> None:
    """``jobtables job`` reads the file slurmstepd made, an array task's (``%%j`` and
    ``%3a``, which scontrol prints as ``%<id>`` and raw) too."""
    ids, run_dir = jobs
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    for job in (ids["pct"], ids["all"], f"{ids['arr']}_3", f"{ids['arr']}_4"):
        row = cli_json(config, "job", job)
        assert not {"log-missing", "log-path-mismatch"} & set(row["flags"]), (job, row)
        assert row["metrics"].get("loss") == pytest.approx(1.5), job
        assert row["log_path"].startswith(f"{run_dir}/"), job
    task = cli_json(config, "job", f"{ids['arr']}_3")["log_path"]
    assert task.startswith(f"{run_dir}/rel_%j_{ids['arr']}_3_003_")
