"""Trainer formats the earlier fixtures had not seen, replayed by real sbatch jobs and read
through ``jobtables sweep --format json`` on the real SLURM over SSH.

A resumed OpenRLHF SFT run (its bars count only what is left), verl's two SFT trainers (the
FSDP one's rank-0 steps line, the engine one's ``Epoch E/M`` bar, glued to its step lines under
torchrun or apart under ``srun --label``), an eval over a tree of
``sandboxes`` (Harbor's predecessor) trials and a COMPLETED LLaMA-Factory v1 run that stopped
short (its ``trainer_log.jsonl`` in v1's shape, its console on a separate ``-e`` file). Before:
the OpenRLHF row read 29 of 24 with no ETA, the verl rows no total and no ETA, the eval no
pass-rate, the LLaMA-Factory run ``Completed`` with its cleanup. The module cancels only its
own jobs and removes its directories.
"""

from __future__ import annotations

import asyncio
import base64
import io
import secrets
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_onejob import _ssh

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SANDBOXES_JOB = FIXTURES / "sandboxes-ac17d9e" / "jobs" / "2025-10-06__12-00-00"
LF_V1 = FIXTURES / "llamafactory-v1-rebuilt"
RUNNING: dict[str, str | None] = {
    "sft-openrlhf-resumed":
        (FIXTURES / "openrlhf-rebuilt" / "sft_resumed_step_bar.out").read_bytes().decode(),
    "sft-verl-fsdp-resumed":
        (FIXTURES / "verl-sft-rebuilt" / "fsdp_sft_resumed.out").read_bytes().decode(),
    "sft-verl-engine": (FIXTURES / "verl-sft-rebuilt" / "engine_sft.out").read_bytes().decode(),
    "sft-verl-engine-srun":
        (FIXTURES / "slurm-22.05.8" / "srun_label_verl_engine_sft.out").read_bytes().decode(),
    "eval-qwen3-8b-x-terminal-bench": None,
}
LF_CONSOLE = (LF_V1 / "console_stopped.out").read_text()
LF_RECORDS = (LF_V1 / "trainer_log_stopped.jsonl").read_text()


def _tree_b64(root: Path, arcname: str) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(root, arcname=arcname)
    return base64.b64encode(buffer.getvalue()).decode()


async def _submit(env: SlurmEnv, run_dir: str, name: str, text: str | None,
                  tree: str) -> str:
    await _ssh(env, ["mkdir", "-p", f"{run_dir}/stage"])
    write = ""
    if text is None:  # the eval: its job writes a sandboxes job tree under {workdir}/jobs
        await _ssh(env, ["sh", "-c", f"base64 -d | tar -xz -C {run_dir}/stage"], stdin=tree)
        text, write = "sb jobs start\n", f"cp -r {run_dir}/stage/jobs {run_dir}/jobs\n"
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=text)
    await _ssh(env, ["tee", f"{run_dir}/run.sh"],
               stdin=f"#!/bin/sh\n{write}cat {run_dir}/console.log\nsleep 600\n")
    out = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                           "-o", f"{run_dir}/%x-%j.out", f"{run_dir}/run.sh"])
    return out.strip().split(";")[0]


async def _submit_lf_v1(env: SlurmEnv, run_dir: str, name: str) -> str:
    """A LLaMA-Factory v1 run that stopped at 600 of 916 and exited 0: its console on the
    ``-e`` file, its output dir named on stdout."""
    await _ssh(env, ["mkdir", "-p", f"{run_dir}/out"])
    await _ssh(env, ["tee", f"{run_dir}/console.log"], stdin=LF_CONSOLE)
    await _ssh(env, ["tee", f"{run_dir}/records.jsonl"], stdin=LF_RECORDS)
    await _ssh(env, ["tee", f"{run_dir}/run.sh"], stdin=(
        f"#!/bin/sh\necho 'output_dir: {run_dir}/out'\ncat {run_dir}/console.log >&2\n"
        f"cp {run_dir}/records.jsonl {run_dir}/out/trainer_log.jsonl\n"))
    out = await _ssh(env, ["sbatch", "--parsable", "-J", name, "--chdir", run_dir,
                           "-o", f"{run_dir}/%x-%j.out", "-e", f"{run_dir}/%x-%j.err",
                           f"{run_dir}/run.sh"])
    return out.strip().split(";")[0]


async def _wait_state(env: SlurmEnv, job: str, states: tuple[str, ...], bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state in states:
            return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} not in {states} within {bound_s}s: {state!r}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    base = f"{slurm_env.scratch}/formats-{tag}"
    ids: dict[str, str] = {}
    tree = _tree_b64(SANDBOXES_JOB, f"jobs/{SANDBOXES_JOB.name}")
    try:
        for name, text in RUNNING.items():
            ids[name] = asyncio.run(
                _submit(slurm_env, f"{base}/{name}", f"{name}-{tag}", text, tree))
        ids["sft-lf-v1-stopped"] = asyncio.run(
            _submit_lf_v1(slurm_env, f"{base}/lf", f"sft-lf-v1-stopped-{tag}"))
        for name, job in ids.items():
            final = ("COMPLETED",) if name == "sft-lf-v1-stopped" else ("RUNNING",)
            asyncio.run(_wait_state(slurm_env, job, final, 120))
        asyncio.run(asyncio.sleep(2))  # the running jobs' cat has written its log
        yield ids
    finally:
        if ids:
            asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", base]))


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, jobs: dict[str, str],
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    config = slurm_env.config_toml(tmp_path_factory.mktemp("formats"), recent_hours=1)
    report = cli_json(config, "sweep")
    by_id = {row["job_id"]: row for row in report["jobs"]}
    return {name: by_id[job] for name, job in jobs.items()}


def test_resumed_openrlhf_sft_row(rows: dict[str, dict[str, Any]]) -> None:
    """Resumed at step 18 of 36: step 29/36, 12 s a step (3 s a micro-batch x 4), an ETA."""
    row = rows["sft-openrlhf-resumed"]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", 29, 36)
    assert row["metrics"]["sec_per_step"] == pytest.approx(12.0)
    assert row["metrics"]["loss"] == pytest.approx(0.647)
    assert row["verdict"] == "healthy" and "ETA 1m" in row["trend"]


@pytest.mark.parametrize(("name", "step", "eta"), [("sft-verl-fsdp-resumed", 95, "ETA 1m"),
                                                    ("sft-verl-engine", 52, "ETA 2m"),
                                                    ("sft-verl-engine-srun", 52, "ETA 2m")])
def test_verl_sft_rows(rows: dict[str, dict[str, Any]], name: str, step: int, eta: str) -> None:
    """3 epochs of 40: the total 120 and the bar's 2.5 s a step."""
    row = rows[name]
    assert (row["bucket"], row["step"], row["total_steps"]) == ("sft", step, 120)
    assert row["metrics"]["sec_per_step"] == pytest.approx(2.5)
    assert row["verdict"] == "healthy" and eta in row["trend"]


def test_sandboxes_eval_row(rows: dict[str, dict[str, Any]]) -> None:
    """12 sandboxes trials, 5 solved: pass-rate 5/12 from their ``verifier_result.reward``."""
    row = rows["eval-qwen3-8b-x-terminal-bench"]
    assert row["bucket"] == "eval"
    assert row["metrics"]["trials"] == 12
    assert row["metrics"]["pass_rate"] == pytest.approx(5 / 12)


def test_llamafactory_v1_stopped_row(rows: dict[str, dict[str, Any]]) -> None:
    """COMPLETED at step 600 of 916 by its v1 ``trainer_log.jsonl``: diagnose, no cleanup."""
    row = rows["sft-lf-v1-stopped"]
    assert row["state"] == "COMPLETED"
    assert "incomplete-run" in row["flags"]
    assert row["recommendation"]["action"] == "diagnose"
    assert "600 of 916" in row["recommendation"]["why"]
