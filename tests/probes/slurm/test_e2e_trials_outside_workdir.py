"""An agentic RL run whose Harbor trials dir is outside its workdir is counted and deep-probed,
through the guard, on the real SLURM 22.05 over SSH.

Found so (job 756, as jtuser): a SkyRL + Harbor run launched from its code checkout, its config
dump naming ``trials_dir: /home/jtuser/.../trials-out/756`` (SkyRL's own default is
``~/trials``, outside any run's workdir), every trial dead in ``EnvironmentStartTimeoutError``:
the row counted no trial tree and ``jobtables probe`` read NO-KILL 'nothing to judge: no
rollouts were found', a silently dead run passed. A logged trials dir was kept only inside the
workdir or a configured root; it is now its own root when outside them, opened as the guard
opens a root (a directory the job's user could list, nothing on /proc, /sys or /dev) and only
that user's own files read there. Near miss: a trials dir the log names whose trials are
another user's (root's) is counted as nothing.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from pathlib import Path

from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh

DEAD = (Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "zero-complete"
        / "jobs" / "2026-11-30__18-00-00")
TRIALS = sorted(p.parent for p in DEAD.glob("*/result.json"))[:8]


async def _write_trials(env: SlurmEnv, root: str) -> None:
    for trial in TRIALS:
        await _ssh(env, ["mkdir", "-p", f"{root}/{trial.name}"])
        await _ssh(env, ["tee", f"{root}/{trial.name}/result.json"],
                   stdin=(trial / "result.json").read_text())


async def _submit(env: SlurmEnv, run: str, foreign: str) -> str:
    trials = f"{run}/scratch/trials"
    await _ssh(env, ["mkdir", "-p", f"{run}/code"])
    log = ("(skyrl_entrypoint pid=48213) harbor_trial_config:\n"
           f"(skyrl_entrypoint pid=48213)   trials_dir: {foreign}\n"
           f"(skyrl_entrypoint pid=48213)   trials_dir: {trials}\n"
           "(skyrl_entrypoint pid=48213) reward/avg_pass_at_8: 0.0, reward/avg_raw_reward: 0.0\n")
    await _ssh(env, ["tee", f"{run}/code/train.log"], stdin=log)
    await _ssh(env, ["tee", f"{run}/code/job.sbatch"],
               stdin=f"#!/bin/sh\ncat {run}/code/train.log\nsleep 300\n")
    got = await _ssh(env, ["sbatch", "--parsable", "-J", f"rl-agentic-{run[-6:]}",
                           "--chdir", f"{run}/code", f"{run}/code/job.sbatch"])
    job = got.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while "trials_dir" not in await _ssh(env, ["sh", "-c", f"cat {run}/code/slurm-{job}.out"
                                                           " 2>/dev/null || true"]):
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} wrote no log within 120 s")
        await asyncio.sleep(1)
    await _write_trials(env, trials)  # as the run does, once it started
    return job


def test_a_logged_trials_dir_outside_the_workdir_is_counted_and_probed(
    slurm_env: SlurmEnv, tmp_path: Path,
) -> None:
    """All 8 trials dead on scratch: the probe samples that tree (the one the row counted) and
    says KILL; the root-owned trials dir the log also names adds nothing."""
    tag = secrets.token_hex(3)
    run = f"{slurm_env.scratch}/outtrials-{tag}"
    foreign = Path(f"/tmp/jt-foreign-trials-{tag}")
    for trial in TRIALS[:3]:  # readable by all, owned by root: not the job user's
        shutil.copytree(trial, foreign / trial.name)
    foreign.chmod(0o755)
    job = None
    try:
        job = asyncio.run(_submit(slurm_env, run, str(foreign)))
        config = slurm_env.config_toml(tmp_path, recent_hours=1)
        probe = cli_json(config, "probe", job)["deep_probe"]
        assert probe["verdict"] == "KILL", probe
        assert probe["read"]["trials"]["roots"] == [f"{run}/scratch/trials"], probe["read"]
        assert probe["read"]["trials"]["listed"] == len(TRIALS), probe["read"]
        assert any(r.startswith(f"zero trials completing: all {len(TRIALS)} sampled trials")
                   for r in probe["reasons"]), probe
        assert str(foreign) not in json.dumps(probe["read"]["trials"]), probe["read"]
    finally:
        if job:
            asyncio.run(_ssh(slurm_env, ["scancel", job]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run]))
        shutil.rmtree(foreign, ignore_errors=True)
