"""``jobtables job ID`` of a running RL relaunch in a new setting flags it ``deep-probe``, as
the sweep does, on the real SLURM 22.05 over SSH.

Found by replaying verl consoles: an attempt printed verl's config (``config_a``: Qwen2.5-7B)
and FAILED; the user relaunched the same name with another model (``config_b``: Qwen3-8B)
from another directory, and it ran past its first steps. The sweep read both logs and called
the relaunch ``deep-probe`` ("relaunch of <id> with new model ..."); ``jobtables job`` listed
the earlier attempt (``squeue --name``) but never read its log, so it saw an earlier attempt
with no setting to compare and flagged nothing: the two disagreed on one job. The module
cancels only its own jobs and removes its directory.
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

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "verl-0.9.1"
PREFIX = "(TaskRunnerV1 pid=247607) "


def _console(config: str, steps: int) -> str:
    """verl's printed config, then ``steps`` console metric lines."""
    lines = [
        f"{PREFIX}step:{s} - actor/entropy:np.float64({0.62 + 0.001 * (s % 3)!r}) - "
        f"actor/pg_loss:np.float64(-0.01) - actor/grad_norm:np.float64({0.2 + 0.01 * (s % 2)!r})"
        f" - critic/score/mean:np.float64({0.3 + 0.005 * s!r}) - response_length/mean:480.0"
        for s in range(1, steps + 1)]
    return (FIX / config).read_text() + "\n".join(lines) + "\n"


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    name, ids = f"rl-verl-relaunch-{tag}", {}
    for key, config, steps, tail in (("first", "config_a.log", 12, "exit 1"),
                                     ("second", "config_b.log", 25, "sleep 600")):
        workdir = f"{run_dir}/{key}"
        await _ssh(env, ["mkdir", "-p", workdir])
        await _ssh(env, ["tee", f"{workdir}/console.log"], stdin=_console(config, steps))
        await _ssh(env, ["tee", f"{workdir}/run.sh"],
                   stdin=f"#!/bin/sh\ncat {workdir}/console.log\n{tail}\n")
        out = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", workdir,
                               "-o", f"{workdir}/%x-%j.out", f"{workdir}/run.sh"])
        ids[key] = out.strip().split(";")[0]
        await _until(env, ids[key], "FAILED" if key == "first" else "RUNNING")
    return ids


async def _until(env: SlurmEnv, job: str, state: str, bound_s: float = 120) -> None:
    deadline = time.monotonic() + bound_s
    seen = ""
    while time.monotonic() < deadline:
        seen = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if seen == state:
            await asyncio.sleep(2)  # its log written whole
            return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not reach {state} within {bound_s}s: {seen!r}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/relaunch-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        yield ids
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))



def test_the_job_read_flags_a_relaunch_in_a_new_setting_as_the_sweep_does(
    slurm_env: SlurmEnv, jobs: dict[str, str], tmp_path: Path,
) -> None:
    """The relaunch (step 25, another model than its FAILED attempt) is ``deep-probe`` in
    ``jobtables job`` and in the sweep, naming the attempt it was relaunched from."""
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    swept = next(j for j in cli_json(config, "sweep")["jobs"] if j["job_id"] == jobs["second"])
    one = cli_json(config, "job", jobs["second"])
    for row in (swept, one):
        assert row["step"] == 25
        assert "deep-probe" in row["flags"]
        assert row["recommendation"]["action"] == "deep_probe"
        assert f"relaunch of {jobs['first']} with new model" in row["recommendation"]["why"]
