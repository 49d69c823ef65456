"""A job requeued in held state (``scontrol requeuehold``) reads held in ``jobtables job`` too.

Replayed on the real SLURM 22.05 as jtuser (job 2864, requeue-held while running): squeue
--json gives it ``state_reason`` JobHeldUser and the sweep read it 'Held (JobHeldUser),
requeued: will not start until released', stalled, with ``scontrol release`` to diagnose;
but squeue -o ``%r`` (the one-job read's format, and the sweep's without --json) prints the
description in place of the reason, 'job requeued in held state', and ``jobtables job 2864``
read it buffering, 'Requeued (1x); pending (job requeued in held state), expected start ...':
a job that will never start shown as about to.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

from probes.slurm.parse import state_reason
from tests.probes.slurm.conftest import SlurmEnv, cli_json


def test_the_description_squeue_prints_for_it_is_the_hold() -> None:
    assert state_reason("PENDING", "job requeued in held state") == "JobHeldUser"
    assert state_reason("PENDING", "BeginTime") == "BeginTime"  # near miss: codes as they are


def test_a_requeue_held_job_reads_held_in_job_as_in_sweep(slurm_env: SlurmEnv,
                                                          tmp_path: Path) -> None:
    env = slurm_env
    run = Path(env.other_scratch) / f"rqhold-{secrets.token_hex(3)}"
    subprocess.run(["runuser", "-u", env.other_user, "--", "mkdir", "-p", str(run)], check=True)
    job_id = subprocess.run(
        ["runuser", "-u", env.other_user, "--", "sbatch", "--parsable", f"--chdir={run}",
         "-J", "sft-rqhold", "-o", "%x_%j.out", "--wrap",
         "echo \"{'loss': '1.2', 'grad_norm': '0.3', 'epoch': '0.1'}\"; sleep 300"],
        check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while not (run / f"sft-rqhold_{job_id}.out").exists():
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.5)
        subprocess.run(["scontrol", "requeuehold", job_id], check=True, timeout=30)
        deadline = time.monotonic() + 60
        while "held" not in subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%r"],
                                           capture_output=True, text=True, check=False).stdout:
            assert time.monotonic() < deadline, "the job was not requeued held"
            time.sleep(0.5)
        config = env.config_toml(tmp_path, users=[env.other_user], recent_hours=1,
                                 timeout_s=200, command_timeout_s=180)
        row = cli_json(config, "job", job_id)
        assert (row["state"], row["verdict"]) == ("PENDING", "stalled"), row["trend"]
        assert row["trend"].startswith("Held (JobHeldUser)"), row["trend"]
        assert f"scontrol release {job_id}" in row["recommendation"]["why"]
        assert "expected start" not in row["trend"]
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=30)
        subprocess.run(["rm", "-rf", str(run)], check=False, timeout=30)
