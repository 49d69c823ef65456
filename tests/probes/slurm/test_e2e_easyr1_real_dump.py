"""EasyR1's console blocks as its formatter really prints them (``yaml.dump`` of ``np.float64``
objects), replayed by real sbatch jobs and read through ``jobtables sweep --format json`` and
``jobtables job ID`` on the real SLURM 22.05 over SSH.

Each log ends in its last block's blank line (``print``'s own newline), with no bar redraw
after it. One run's clip fraction (``actor/pg_clipfrac_higher``) is 0.2 %, the other's 5 %:
``clip-ratio-high`` (CONTRACT: above 1 %). Before, the first numpy scalar ended each block (no
entropy, grad norm or reward: "the log prints no metrics"), the last block waited for a line
that never came (step 11 of 12), and ``pg_clipfrac_higher`` was no ``clip_ratio``. The module
cancels only its own jobs and removes its directory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.logs.test_easyr1_real_dump import easyr1_log
from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh

LOGS = {"low": easyr1_log(12, bar_after_last=False, clipfrac=0.002),
        "high": easyr1_log(12, bar_after_last=False, clipfrac=0.05)}
"""12 steps each, ending in the last block's blank line."""


async def _wait_logged(env: SlurmEnv, job: str, log: str, size: int) -> None:
    """Until the job runs and its log holds the whole replay (bounded: 120 s)."""
    deadline = time.monotonic() + 120
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state == "RUNNING":
            got = await _ssh(env, ["sh", "-c", f"cat {log} 2>/dev/null | wc -c"])
            if int(got.strip() or 0) == size:
                return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not log its replay: {state!r}")


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    await _ssh(env, ["mkdir", "-p", run_dir])
    ids = {}
    for key, text in LOGS.items():
        await _ssh(env, ["tee", f"{run_dir}/{key}.log"], stdin=text)
        await _ssh(env, ["tee", f"{run_dir}/{key}.sh"],
                   stdin=f"#!/bin/sh\ncat {run_dir}/{key}.log\nsleep 600\n")
        out = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-easyr1-{key}-{tag}",
                               "--chdir", run_dir, "-o", f"{run_dir}/%x-%j.out",
                               f"{run_dir}/{key}.sh"])
        ids[key] = out.strip().split(";")[0]
    return ids


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/easyr1-dump-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        for key, job in ids.items():
            log = f"{run_dir}/rl-easyr1-{key}-{tag}-{job}.out"
            asyncio.run(_wait_logged(slurm_env, job, log, len(LOGS[key].encode())))
        yield ids
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def _check(row: dict[str, Any], clip: float) -> None:
    assert row["step"] == 12, row
    metrics = row["metrics"]
    assert metrics["entropy"] == pytest.approx(0.78)
    assert metrics["grad_norm"] == pytest.approx(0.212)
    assert metrics["policy_loss"] == pytest.approx(-0.012)
    assert metrics["reward"] == pytest.approx(0.42)
    assert metrics["clip_ratio"] == pytest.approx(clip)
    assert ("clip-ratio-high" in row["flags"]) is (clip > 0.01)


def test_sweep_and_job_read_every_block(
    slurm_env: SlurmEnv, jobs: dict[str, str], tmp_path: Path,
) -> None:
    """Both runs read step 12 with the numpy scalars' values; the 5 % run is flagged."""
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    swept = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
    for key, clip in (("low", 0.002), ("high", 0.05)):
        _check(swept[jobs[key]], clip)
        _check(cli_json(config, "job", jobs[key]), clip)
