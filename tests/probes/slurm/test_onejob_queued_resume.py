"""``jobtables job`` on a restart chain's queued resume reads it as the sweep does.

On the real SLURM 22.05 over SSH: a run's attempt running (``sleep``) and its resume queued
``sbatch --dependency=afterany:ATTEMPT`` under the same name, beside a job of another name
queued behind the same attempt. The sweep reads the resume 'Resume queued: starts when ATTEMPT
ends' without ``buffer-filling`` (``report.holds``); ``jobtables job RESUME`` read it
``buffer-filling`` 'Pending (Dependency)': the one-job path listed no other job for a pending
one, so the attempt it waits on was not there to be named. It then listed the user's jobs of
the pending job's name, which missed a resume renamed as the rulebook's chains allow
(``rl-grpo-x`` resumed as ``rl-grpo-x-r2``). Command 2 now asks squeue for the jobs the pending
job waits on (``squeue -j`` of its Dependency's ids), whatever their names: still two commands.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.probes.slurm.conftest import ROOT, SlurmEnv
from tests.probes.slurm.test_onejob import _collect, _ssh

SLEEP = "#!/bin/sh\necho started\nsleep 300\n"


@dataclass
class Chain:
    env: SlurmEnv
    attempt: str
    resume: str
    other: str
    renamed: str


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> tuple[str, str, str, str]:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/run.sh"], stdin=SLEEP)

    async def sbatch(name: str, *extra: str) -> str:
        out = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                               "-o", f"{run_dir}/%x_%j.out", *extra, f"{run_dir}/run.sh"])
        return out.strip().split(";")[0]

    attempt = await sbatch(f"sft-resume-{tag}")
    resume = await sbatch(f"sft-resume-{tag}", f"--dependency=afterany:{attempt}")
    other = await sbatch(f"eval-after-{tag}", f"--dependency=afterany:{attempt}")
    # A resume named as a restart chain's next attempt (the rulebook: a restart's name may
    # gain -r2), queued behind the same attempt.
    renamed = await sbatch(f"sft-resume-{tag}-r2", f"--dependency=afterany:{attempt}")
    return attempt, resume, other, renamed


@pytest.fixture(scope="module")
def chain(slurm_env: SlurmEnv) -> Iterator[Chain]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/resume-{tag}"
    ids: list[str] = []
    try:
        attempt, resume, other, renamed = asyncio.run(_submit(slurm_env, run_dir, tag))
        ids = [attempt, resume, other, renamed]
        yield Chain(slurm_env, attempt, resume, other, renamed)
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def _job(chain: Chain, job_id: str, tmp_path: Path) -> dict[str, object]:
    config = chain.env.config_toml(tmp_path)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "job", job_id, "--format", "json",
                          "--config", str(config)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    row = data.get("job", data)
    assert isinstance(row, dict) and row["job_id"] == job_id
    return row


def test_job_reads_a_queued_resume_as_the_sweep_does(chain: Chain, tmp_path: Path) -> None:
    row = _job(chain, chain.resume, tmp_path)
    assert row["state"] == "PENDING" and row["verdict"] == "buffering"
    assert "buffer-filling" not in row["flags"], row
    assert row["trend"] == f"Resume queued: starts when {chain.attempt} ends"


def test_job_reads_a_renamed_resume_as_the_sweep_does(chain: Chain, tmp_path: Path) -> None:
    """A resume named ``<run>-r2``: the sweep names the attempt it waits on; so does the job."""
    row = _job(chain, chain.renamed, tmp_path)
    assert row["state"] == "PENDING" and row["verdict"] == "buffering"
    assert "buffer-filling" not in row["flags"], row
    assert row["trend"] == f"Resume queued: starts when {chain.attempt} ends"


def test_the_sweep_reads_the_renamed_resume_so(chain: Chain, tmp_path: Path) -> None:
    """What the job is held to: the sweep's row of the same renamed resume."""
    config = chain.env.config_toml(tmp_path)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "sweep", "--format", "json",
                          "--config", str(config)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    rows = {r["job_id"]: r for r in json.loads(run.stdout)["jobs"]}
    row = rows[chain.renamed]
    assert "buffer-filling" not in row["flags"], row
    assert row["trend"] == f"Resume queued: starts when {chain.attempt} ends"


def test_job_reads_another_run_queued_behind_it_as_filling(chain: Chain,
                                                           tmp_path: Path) -> None:
    """Near miss: another run's job queued behind the attempt continues nothing."""
    row = _job(chain, chain.other, tmp_path)
    assert "buffer-filling" in row["flags"], row
    assert str(row["trend"]).startswith("Pending (Dependency)")


@pytest.mark.parametrize("which", ["resume", "renamed"])
def test_a_queued_resume_costs_two_commands(chain: Chain, which: str) -> None:
    job_id = getattr(chain, which)
    facts, runner = _collect(chain.env, job_id)
    assert len(runner.calls) == 2, runner.calls
    assert {j.record.job_id for j in facts.jobs} >= {job_id, chain.attempt}
