"""Cancelling a heterogeneous job's component on the real SLURM 22.05 over SSH.

SLURM refuses ``scancel N+k`` ("Operation not permitted on individual component of
heterogeneous job"): a collapse alert's cancel on a hetjob component's row failed and the run
kept going. The component's run is the whole job ``N``, which the probe now cancels. (The
one-node test cluster never starts a hetjob, so it is cancelled pending; SLURM refuses a
pending component alike.)
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time

from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.conftest import SlurmEnv


def _states(job_id: str) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", job_id],
                         capture_output=True, text=True, check=False, timeout=60).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_a_hetjob_components_cancel_cancels_its_job(slurm_env: SlurmEnv) -> None:
    name = f"rl-het-cancel-{secrets.token_hex(3)}"
    run = subprocess.run(["sbatch", "--parsable", f"--uid={slurm_env.user}",
                          f"--gid={slurm_env.user}", "--chdir=/tmp", "-J", name, "-o", "/dev/null",
                          "--wrap", "sleep 300", ":", "--wrap", "sleep 300"],
                         capture_output=True, text=True, check=True, timeout=60)
    job_id = run.stdout.strip().split(";")[0]
    try:
        assert set(_states(job_id)) == {f"{job_id}+0", f"{job_id}+1"}
        asyncio.run(SlurmProbe(slurm_env.cluster()).cancel(f"{job_id}+1"))
        deadline = time.monotonic() + 30
        while set(_states(job_id).values()) != {"CANCELLED"}:
            assert time.monotonic() < deadline, _states(job_id)
            time.sleep(0.2)
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=60)
