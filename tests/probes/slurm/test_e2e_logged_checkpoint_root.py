"""End to end on the real SLURM 22.05 cluster: save folders the launcher names outside the job's
workdir and configured roots bank their steps, in ``jobtables sweep`` and ``jobtables job``.

Replayed as jtuser (found live, ckptlog jobs 28-32: ``banked_step`` null for all five), each
checkpoint tree on a scratch directory beside the workdirs, named only by the job:

- verl 0.9.1, ``trainer.default_local_dir`` in its config dump and its
  ``local_global_step_folder:`` lines: ``global_step_{10,20}`` -> 20;
- SkyRL, ``trainer.ckpt_path`` named only in its YAML dump (its saves print no path), with a
  later HF export under ``trainer.export_path`` that banks nothing: -> 30;
- OpenRLHF, ``--ckpt_path`` given to the batch script (SLURM's ``Command=``), DeepSpeed's
  ``_actor/global_step{20,40}`` -> 40;
- a verl run resumed from its earlier attempt's folder into a new, still empty one: both
  attempts bank 20 (the earlier one COMPLETED, the resumed one RUNNING).

The cold sweep stays within three remote commands and ``jobtables job`` within two: the named
folders are listed by the collector in the same run that reads the log.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.slurm.probe import SlurmProbe
from tests.probes.remote.test_logged_checkpoint_root import OPENRLHF, _skyrl_log, _verl_log
from tests.probes.slurm.conftest import SlurmEnv, cli_json

RUNS = ("verl", "skyrl", "orl", "res1", "res2")
BANKED = {"verl": 20, "skyrl": 30, "orl": 40, "res1": 20, "res2": 20}


def _as_user(env: SlurmEnv, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], check=True,
                          input=stdin, capture_output=True, text=True, timeout=60).stdout


def _trees(env: SlurmEnv, scratch: Path) -> None:
    """The save folders on 'scratch', made by jtuser (its own steps)."""
    dirs = [f"{scratch}/verl/exp/global_step_{s}/actor" for s in (10, 20)]
    dirs += [f"{scratch}/sky/ckpts/global_step_{s}/policy" for s in (10, 20, 30)]
    dirs += [f"{scratch}/sky/hf/global_step_{s}/policy" for s in (30, 40)]
    dirs += [f"{scratch}/orl/checkpoints_ppo_ray/_actor/global_step{s}/zero" for s in (20, 40)]
    dirs += [f"{scratch}/run1/global_step_{s}/actor" for s in (10, 20)] + [f"{scratch}/run2"]
    _as_user(env, "mkdir", "-p", *dirs)
    for path, text in ((scratch / "verl/exp/latest_checkpointed_iteration.txt", "20"),
                       (scratch / "sky/ckpts/latest_ckpt_global_step.txt", "30"),
                       (scratch / "orl/checkpoints_ppo_ray/_actor/latest", "global_step40")):
        _as_user(env, "tee", str(path), stdin=text)


def _logs(scratch: Path) -> dict[str, str]:
    return {"verl": _verl_log(f"{scratch}/verl/exp", 10, 20),
            "skyrl": _skyrl_log(f"{scratch}/sky/ckpts", f"{scratch}/sky/hf"),
            "orl": OPENRLHF,
            "res1": _verl_log(f"{scratch}/run1", 10, 20),
            "res2": _verl_log(f"{scratch}/run2", resumed_from=f"{scratch}/run1/global_step_20")}


def _submit(env: SlurmEnv, run: Path, scratch: Path, key: str, tag: str) -> str:
    workdir = run / ("res" if key.startswith("res") else key)
    _as_user(env, "mkdir", "-p", str(workdir))
    _as_user(env, "tee", str(workdir / f"{key}.log"), stdin=_logs(scratch)[key])
    end = "exit 0" if key == "res1" else "sleep 300"
    script = f"#!/bin/bash\ncat {key}.log\ntouch {key}.mark\n{end}\n"
    _as_user(env, "tee", str(workdir / f"{key}.sbatch"), stdin=script)
    args: list[str] = []
    if key == "orl":
        args = ["--pretrain", "Qwen/Qwen2.5-7B-Instruct", "--save_path", f"{scratch}/orl/final",
                "--ckpt_path", f"{scratch}/orl/checkpoints_ppo_ray", "--save_steps", "20"]
    name = f"rl-grpo-res-{tag}" if key.startswith("res") else f"rl-{key}-{tag}"
    return _as_user(env, "sbatch", "--parsable", f"--chdir={workdir}", "-t", "10",
                    f"--job-name={name}", "-o", "slurm-%j.out", str(workdir / f"{key}.sbatch"),
                    *args).strip()


@pytest.fixture(scope="module")
def answers(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[dict[str, Any]]:
    """Each job read by ``jobtables job ID`` and by one ``jobtables sweep`` (``swept-<key>``),
    and the probe's remote commands for a cold sweep and a one-job read."""
    env = slurm_env
    tag = secrets.token_hex(3)
    run = Path(env.other_scratch) / f"ckroot-{tag}"
    scratch = run / "scratch"  # outside every workdir and the default roots
    ids: dict[str, str] = {}
    try:
        _trees(env, scratch)
        for key in RUNS:
            ids[key] = _submit(env, run, scratch, key, tag)
            if key == "res1":  # the resumed attempt starts after the earlier one ended
                _wait_marked(run / "res" / "res1.mark")
                time.sleep(2)
        for key in RUNS:
            _wait_marked(run / ("res" if key.startswith("res") else key) / f"{key}.mark")
        time.sleep(1)
        config = env.config_toml(tmp_path_factory.mktemp("ckroot"), users=[env.other_user],
                                 recent_hours=1, timeout_s=200, command_timeout_s=180)
        out: dict[str, Any] = {key: cli_json(config, "job", job_id) for key, job_id in ids.items()}
        swept = {job["job_id"]: job for job in cli_json(config, "sweep")["jobs"]}
        out.update({f"swept-{key}": swept.get(job_id) for key, job_id in ids.items()})
        cluster = env.cluster(users=(env.other_user,))
        out["sweep-trips"] = asyncio.run(SlurmProbe(cluster).collect()).round_trips
        out["job-trips"] = asyncio.run(SlurmProbe(cluster).collect_one(ids["orl"])).round_trips
        yield out
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        subprocess.run(["rm", "-rf", "--", str(run)], check=False, timeout=60)


def _wait_marked(mark: Path) -> None:
    deadline = time.monotonic() + 90
    while not mark.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the job did not start: {mark}")
        time.sleep(0.5)


def _row(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["jobs"][0] if "jobs" in doc else doc


@pytest.mark.parametrize("key", RUNS)
@pytest.mark.parametrize("read", ["job", "sweep"])
def test_a_save_folder_named_only_by_the_job_banks(answers: dict[str, Any], key: str,
                                                   read: str) -> None:
    """The same banked step from ``jobtables job`` and ``jobtables sweep``."""
    row = _row(answers[key]) if read == "job" else answers[f"swept-{key}"]
    assert row is not None
    assert row["banked_step"] == BANKED[key], (row["state"], row["trend"])


def test_the_remote_commands_stay_bounded(answers: dict[str, Any]) -> None:
    """A cold sweep within three remote commands, ``jobtables job`` within two."""
    assert answers["sweep-trips"] <= 3
    assert answers["job-trips"] <= 2
