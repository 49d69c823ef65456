"""`jobtables probe` end to end on the real SLURM 22.05 cluster over real SSH.

One sbatch job per run: it prints the real corrupted-weights TRL log (log_completions) and a
healthy one; the probe reads each over one SSH connection and says KILL / NO-KILL.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import pytest

from bot.cli import main
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv, slurm_env  # noqa: F401 - the fixture

FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "trl-1.16.0"
WRITE = "import sys;open(sys.argv[1],'w').write(sys.stdin.read())"


async def _submit(env: SlurmEnv, run_dir: str, mode: str) -> str:
    runner = SshRunner(env.cluster())
    try:
        log = (FIX / f"probe_{mode}.out").read_bytes().decode("utf-8", "replace")
        await runner.run(["mkdir", "-p", f"{run_dir}/{mode}"])
        await runner.run(["python3", "-c", WRITE, f"{run_dir}/{mode}/train.log"], stdin=log)
        script = f"#!/bin/bash\ncat {run_dir}/{mode}/train.log\nsleep 300\n"
        await runner.run(["python3", "-c", WRITE, f"{run_dir}/{mode}/job.sbatch"], stdin=script)
        res = await runner.run(["sbatch", "--parsable", "-J", f"rl-grpo-probe-{mode}",
                                "--chdir", f"{run_dir}/{mode}", f"{run_dir}/{mode}/job.sbatch"])
        return res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()


async def _cleanup(env: SlurmEnv, ids: list[str], run_dir: str) -> None:
    runner = SshRunner(env.cluster())
    try:
        if ids:
            await runner.run(["scancel", *ids], check=False)
        await runner.run(["rm", "-rf", "--", run_dir], check=False)
    finally:
        await runner.aclose()


def test_probe_over_ssh(slurm_env: SlurmEnv, tmp_path: Path,  # noqa: F811
                        capsys: pytest.CaptureFixture[str]) -> None:
    """Corrupted weights -> KILL with quoted garbage; the healthy run -> NO-KILL."""
    run_dir = f"{slurm_env.scratch}/probe-{secrets.token_hex(4)}"
    ids: list[str] = []
    config = slurm_env.config_toml(tmp_path, timeout_s=120, command_timeout_s=60)
    try:
        for mode in ("corrupt", "healthy"):
            ids.append(asyncio.run(_submit(slurm_env, run_dir, mode)))
        verdicts = {}
        for job_id in ids:
            for _attempt in range(150):  # bounded: the shared cluster may queue the job
                capsys.readouterr()
                assert main(["probe", job_id, "--config", str(config), "--format", "json"]) == 0
                obj = json.loads(capsys.readouterr().out)
                if obj["deep_probe"]["read"]["log_steps"] >= 20:
                    break
                asyncio.run(asyncio.sleep(2))
            verdicts[obj["name"]] = obj["deep_probe"]
        corrupt = verdicts["rl-grpo-probe-corrupt"]
        assert corrupt["verdict"] == "KILL"
        assert any(r.startswith("weight-sync garbage at step 20") for r in corrupt["reasons"])
        assert verdicts["rl-grpo-probe-healthy"]["verdict"] == "NO-KILL"
        assert corrupt["read"]["log"].endswith(".out")
        assert main(["probe", ids[0], "--config", str(config)]) == 0
        text = capsys.readouterr().out
        assert text.startswith("KILL — deep probe of local22:")
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))
