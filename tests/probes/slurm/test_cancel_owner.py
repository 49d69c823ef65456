"""A cancel names the job's owner, and SLURM cancels the id only while it is that user's job.

A press checks the job's submit time against its alert's, then salvages the evidence, then
cancels: an id SLURM gave meanwhile to another user's job (a controller whose ids were reset or
wrapped: this test cluster's restarted from 1 within a day) must not be cancelled. ``scancel
<id>`` alone cancels whatever holds the id; ``scancel --verbose --user=<owner> <id>`` cancels it
only while it is ``owner``'s live job, and says on stderr when none matches (exit 0 either way).
Checked on the real SLURM 22.05 over SSH.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time

import pytest

from probes.errors import ProbeError
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.conftest import SlurmEnv


def _state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%T", "-j", job_id],
                         capture_output=True, text=True, check=False, timeout=60).stdout
    return out.strip()


def test_a_cancel_for_another_owner_cancels_nothing(slurm_env: SlurmEnv) -> None:
    run = subprocess.run(["sbatch", "--parsable", f"--uid={slurm_env.user}",
                          f"--gid={slurm_env.user}", "--chdir=/tmp", "-o", "/dev/null",
                          "-J", f"rl-owner-{secrets.token_hex(3)}", "--wrap", "sleep 300"],
                         capture_output=True, text=True, check=True, timeout=60)
    job_id = run.stdout.strip().split(";")[0]
    probe = SlurmProbe(slurm_env.cluster())
    try:
        with pytest.raises(ProbeError, match=f"job {job_id} is no longer a live job of user "
                                             "root: nothing cancelled"):
            asyncio.run(probe.cancel(job_id, owner="root"))
        assert _state(job_id) in {"PENDING", "RUNNING"}
        # an owner that is no plain user name (a list, an option) is never a filter
        for owner in (f"{slurm_env.user},root", "--me", f"{slurm_env.user} root"):
            with pytest.raises(ProbeError, match="no user name scancel can filter by"):
                asyncio.run(probe.cancel(job_id, owner=owner))
        assert _state(job_id) in {"PENDING", "RUNNING"}
        asyncio.run(probe.cancel(job_id, owner=slurm_env.user))
        deadline = time.monotonic() + 30
        while _state(job_id) != "CANCELLED":
            assert time.monotonic() < deadline, _state(job_id)
            time.sleep(0.2)
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=60)
