"""Seven trainers' consoles outside the recorded fixtures, replayed by real sbatch jobs and read
through ``jobtables sweep --format json`` on the real SLURM over SSH.

Each job prints its trainer's log and stays RUNNING: ROLL (JSON metric dicts behind its
logger's prefix), llm-foundry/Composer (``[batch=N/T]:`` blocks), LitGPT (``Epoch 1 | iter I
step S | loss train: ...``), MaxText (``completed step: N, seconds: ..., loss: ...``) and
open-instruct's GRPO (a rich ``Metrics`` panel, wrapped at 80 columns), OpenRLHF's SFT and DPO
trainers (their ``Train step of epoch N`` bar's postfix, in micro-batches). Before
they were read each row had no step and no metric (buffering). The module cancels only its own
jobs and removes its directories.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.probes.logs.test_bracket_blocks import composer_log
from tests.probes.logs.test_litgpt_lines import litgpt_log
from tests.probes.logs.test_openrlhf_step_bar import FIXTURES as OPENRLHF
from tests.probes.logs.test_prefixed_dicts import roll_log
from tests.probes.logs.test_rich_panel import open_instruct_log
from tests.probes.logs.test_step_pairs import maxtext_log
from tests.probes.slurm.conftest import ROOT, SlurmEnv
from tests.probes.slurm.test_onejob import _ssh

LOGS = {"rl-roll-rlvr": roll_log(40), "sft-foundry-mpt": composer_log(140),
        "sft-litgpt-lora": litgpt_log(60), "sft-maxtext-llama": maxtext_log(60),
        "rl-open-instruct-grpo": open_instruct_log(30),
        "sft-openrlhf-sft": (OPENRLHF / "sft_step_bar.out").read_bytes().decode(),
        "sft-openrlhf-dpo": (OPENRLHF / "dpo_step_bar.out").read_bytes().decode()}


async def _submit(env: SlurmEnv, run_dir: str, name: str, text: str) -> str:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=text)
    await _ssh(env, ["tee", f"{run_dir}/run.sh"],
               stdin=f"#!/bin/sh\ncat {run_dir}/console.log\nsleep 600\n")
    out = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                           "-o", f"{run_dir}/%x-%j.out", f"{run_dir}/run.sh"])
    return out.strip().split(";")[0]


async def _wait_logged(env: SlurmEnv, job: str, log: str, size: int, bound_s: float) -> None:
    """Until the job runs and its log holds the whole replay (bounded)."""
    deadline = time.monotonic() + bound_s
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state == "RUNNING":
            got = await _ssh(env, ["sh", "-c", f"cat {log} 2>/dev/null | wc -c"])
            if int(got.strip() or 0) == size:
                return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not log its replay within {bound_s}s: {state!r}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    ids: dict[str, str] = {}
    dirs: list[str] = []
    try:
        for name, text in LOGS.items():
            run_dir = f"{slurm_env.scratch}/consoles-{tag}/{name}"
            dirs.append(run_dir)
            ids[name] = asyncio.run(_submit(slurm_env, run_dir, f"{name}-{tag}", text))
        for (name, text), run_dir in zip(LOGS.items(), dirs, strict=True):
            log = f"{run_dir}/{name}-{tag}-{ids[name]}.out"
            asyncio.run(_wait_logged(slurm_env, ids[name], log, len(text.encode()), 120))
        yield ids
    finally:
        if ids:
            asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", f"{slurm_env.scratch}/consoles-{tag}"]))


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, jobs: dict[str, str],
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    config = slurm_env.config_toml(tmp_path_factory.mktemp("consoles"), recent_hours=1)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "sweep", "--format", "json",
                          "--config", str(config)], capture_output=True, text=True,
                         cwd=ROOT, timeout=240, check=False)
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    by_id = {row["job_id"]: row for row in report["jobs"]}
    return {name: by_id[job] for name, job in jobs.items()}


def test_roll_row(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["rl-roll-rlvr"]
    assert (row["bucket"], row["state"]) == ("rl", "RUNNING")
    assert (row["step"], row["total_steps"]) == (39, 500)
    metrics = row["metrics"]
    assert metrics["reward"] == pytest.approx(0.3 + 39 / 200)
    assert metrics["entropy"] == pytest.approx(0.52 - 39 / 1000)
    assert metrics["grad_norm"] == pytest.approx(0.2 + 39 / 1000)
    assert metrics["policy_loss"] == pytest.approx(-0.004 - 39 / 10000)
    assert metrics["sec_per_step"] == pytest.approx(65.0)
    assert row["verdict"] != "buffering" and "buffer-filling" not in row["flags"]


def test_composer_row(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["sft-foundry-mpt"]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", 139, 1000)
    assert row["metrics"]["loss"] == pytest.approx(3.0 - 139 / 100)
    assert row["metrics"]["grad_norm"] == pytest.approx(0.312)
    assert row["metrics"]["sec_per_step"] == pytest.approx(4.0)
    assert "learning_rate" not in row["metrics"]  # Composer printed 0.0000
    assert row["verdict"] == "healthy"


def test_litgpt_row(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["sft-litgpt-lora"]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", 60, None)
    assert row["metrics"]["loss"] == pytest.approx(2.0 - 240 / 1000)
    assert row["metrics"]["sec_per_step"] == pytest.approx(2.0)


def test_maxtext_row(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["sft-maxtext-llama"]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", 59, 200)
    assert row["metrics"]["loss"] == pytest.approx(8.0 - 59 / 50)
    assert row["metrics"]["sec_per_step"] == pytest.approx(1.15)


def test_open_instruct_row(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["rl-open-instruct-grpo"]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("rl", 30, None)
    metrics = row["metrics"]
    assert metrics["reward"] == pytest.approx(0.44)
    assert metrics["entropy"] == pytest.approx(0.48)
    assert metrics["grad_norm"] == pytest.approx(0.18)
    assert metrics["policy_loss"] == pytest.approx(-0.01)
    assert metrics["sec_per_step"] == pytest.approx(265.3)
    assert row["verdict"] != "buffering"


@pytest.mark.parametrize(("name", "loss", "grad_norm"), [("sft-openrlhf-sft", 0.785, 0.652),
                                                         ("sft-openrlhf-dpo", 0.201, 1.51)])
def test_openrlhf_rows(rows: dict[str, dict[str, Any]], name: str, loss: float,
                       grad_norm: float) -> None:
    """2 epochs of 48 micro-batches at accumulation 4 (DeepSpeed's dump): 24 optimizer steps."""
    row = rows[name]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", 24, 24)
    assert row["metrics"]["loss"] == pytest.approx(loss)
    assert row["metrics"]["grad_norm"] == pytest.approx(grad_norm)
    assert row["metrics"]["learning_rate"] == pytest.approx(5e-6)
    assert row["verdict"] != "buffering" and "buffer-filling" not in row["flags"]
