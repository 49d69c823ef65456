"""``jobtables probe`` reads the verl rollout dumps the log names outside the job's workdir,
through the guard, on the real SLURM 22.05 over SSH.

Found so (job 750, as jtuser): a verl GRPO run launched from its code checkout with
``trainer.rollout_data_dir`` on scratch (``Dumped generations to /home/jtuser/.../
scratch-rollouts/750/9.jsonl``, outside ``--chdir``), its rollouts weight-sync garbage scoring
0, read NO-KILL 'nothing to judge: no rollouts were found': log-named dump dirs were kept only
inside the workdir, a rule older than the reader's guard. Every read now goes through the guard
(the job user's own regular files, under a root that user could list), as the configured dump
dirs' do, so the named dir is read. Near miss: a dir the log names whose files are another
user's is not read (nothing of it quoted).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import time
from pathlib import Path

from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh

GARBAGE = "inton年年ĠĠapis-ms(CC_AdjustorThunk)RTLU.scalablytyped\ufffd\ufffd"
SECRET = "NOT-THE-JOBS-OWN-FILE"


def _dump(step: int, text: str) -> str:
    """verl's ``_dump_generations`` lines: 2 prompts x 4 samples, all scoring 0."""
    rows = [{"input": f"prompt {i // 4}", "output": f"{text} {step}.{i}", "gts": "7",
             "score": 0.0, "step": step} for i in range(8)]
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"


async def _submit(env: SlurmEnv, run: str, foreign: str) -> str:
    dumps = f"{run}/scratch/rollouts"
    await _ssh(env, ["mkdir", "-p", f"{run}/code", dumps])
    log = []
    for step in (1, 2, 3):
        await _ssh(env, ["tee", f"{dumps}/{step}.jsonl"], stdin=_dump(step, GARBAGE))
        log.append(f"step:{step} - actor/entropy:0.61 - actor/grad_norm:0.2"
                   f" - critic/score/mean:0.0 - training/global_step:{step}")
        log.append(f"Dumped generations to {dumps}/{step}.jsonl")
    log.append(f"Dumped generations to {foreign}/3.jsonl")
    await _ssh(env, ["tee", f"{run}/code/train.log"], stdin="\n".join(log) + "\n")
    await _ssh(env, ["tee", f"{run}/code/job.sbatch"],
               stdin=f"#!/bin/sh\ncat {run}/code/train.log\nsleep 300\n")
    got = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-scratch-{run[-6:]}",
                           "--chdir", f"{run}/code", f"{run}/code/job.sbatch"])
    job = got.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while "step:3" not in await _ssh(env, ["sh", "-c", f"cat {run}/code/*-{job}.out "
                                                       f"{run}/code/slurm-{job}.out 2>/dev/null"
                                                       " || true"]):
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} wrote no log within 120 s")
        await asyncio.sleep(1)
    return job


def test_probe_reads_a_logged_dump_dir_outside_the_workdir(slurm_env: SlurmEnv,
                                                           tmp_path: Path) -> None:
    """Garbage scoring 0 on scratch: KILL quoting it; another user's dir named: not read."""
    tag = secrets.token_hex(3)
    run = f"{slurm_env.scratch}/outdump-{tag}"
    foreign = Path(f"/tmp/jt-foreign-{tag}")
    foreign.mkdir(mode=0o755)
    (foreign / "3.jsonl").write_text(_dump(3, SECRET))
    os.chmod(foreign / "3.jsonl", 0o644)  # readable by all, owned by root: not the job's
    job = None
    try:
        job = asyncio.run(_submit(slurm_env, run, str(foreign)))
        row = cli_json(slurm_env.config_toml(tmp_path, recent_hours=1), "probe", job)
        probe = row["deep_probe"]
        assert probe["verdict"] == "KILL", probe
        read = {d["path"]: d for d in probe["read"]["dumps"]}
        assert read[f"{run}/scratch/rollouts"]["samples"] > 0, probe["read"]
        assert SECRET not in json.dumps(row), "another user's file was read"
        assert not read.get(str(foreign), {}).get("samples"), probe["read"]
    finally:
        if job:
            asyncio.run(_ssh(slurm_env, ["scancel", job]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run]))
        shutil.rmtree(foreign, ignore_errors=True)
