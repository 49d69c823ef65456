"""EasyR1's console logger replayed by a real sbatch job, read through ``jobtables sweep
--format json`` on the real SLURM 22.05 over SSH.

The job prints EasyR1's log (``Config`` + YAML, ``Total training steps``, then each step's
``Step N`` YAML block and the ``Running step`` bar, every line behind Ray's ``(Runner pid=N)``
prefix) and stays RUNNING. Its row must carry the step blocks' metrics: before EasyR1's blocks
were read the RL table showed the bar's step with no reward, entropy or grad norm. The module
cancels only its own job and removes its directory.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.logs.test_easyr1_console import easyr1_log
from tests.probes.slurm.conftest import ROOT, SlurmEnv
from tests.probes.slurm.test_onejob import _ssh


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> str:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=easyr1_log(20))
    await _ssh(env, ["tee", f"{run_dir}/run.sh"],
               stdin=f"#!/bin/sh\ncat {run_dir}/console.log\nsleep 600\n")
    out = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-easyr1-geo3k-{tag}", "--chdir",
                           run_dir, "-o", f"{run_dir}/%x-%j.out", f"{run_dir}/run.sh"])
    return out.strip().split(";")[0]


async def _wait_logged(env: SlurmEnv, job: str, log: str, bound_s: float) -> None:
    """Until the job runs and its log holds the whole replay (bounded)."""
    deadline = time.monotonic() + bound_s
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state == "RUNNING":
            size = await _ssh(env, ["sh", "-c", f"cat {log} 2>/dev/null | wc -c"])
            if int(size.strip() or 0) == len(easyr1_log(20).encode()):
                return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not log its replay within {bound_s}s: {state!r}")


@pytest.fixture(scope="module")
def job(slurm_env: SlurmEnv) -> Iterator[str]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/easyr1-{tag}"
    ids: list[str] = []
    try:
        job_id = asyncio.run(_submit(slurm_env, run_dir, tag))
        ids.append(job_id)
        log = f"{run_dir}/rl-easyr1-geo3k-{tag}-{job_id}.out"
        asyncio.run(_wait_logged(slurm_env, job_id, log, bound_s=120))
        yield job_id
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def test_the_sweep_reads_easyr1_step_blocks(
    slurm_env: SlurmEnv, job: str, tmp_path: Path,
) -> None:
    """Step 20 of 100 with its reward, entropy, grad norm, policy loss and length."""
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "sweep", "--format", "json",
                          "--config", str(config)], capture_output=True, text=True,
                         cwd=ROOT, timeout=240, check=False)
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    row = next(j for j in report["jobs"] if j["job_id"] == job)
    assert row["bucket"] == "rl" and row["state"] == "RUNNING"
    assert (row["step"], row["total_steps"]) == (20, 100)
    metrics = row["metrics"]
    assert metrics["reward"] == pytest.approx(0.5)
    assert metrics["entropy"] == pytest.approx(0.7)
    assert metrics["grad_norm"] == pytest.approx(0.22)
    assert metrics["policy_loss"] == pytest.approx(-0.012)
    assert metrics["avg_num_tokens"] == pytest.approx(320.5)
    assert row["verdict"] != "buffering" and "buffer-filling" not in row["flags"]
