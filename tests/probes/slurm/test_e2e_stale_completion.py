"""End to end on the real SLURM 22.05 cluster: a completion file an earlier run left behind is
not this run's completion check.

A rerun into the same output dir (the usual habit: fix the data, sbatch the same script) finds
the earlier run's ``out/trainer_state.json`` (HF ``save_state`` at its end, 95 of 95) still
there. The rerun stops at step 60 and its wrapper exits 0 (COMPLETED): it saved
``out/checkpoint-60/trainer_state.json`` (60 of 95) and never reached ``save_state``. Read
through the contract (``jobtables job ID --format json``), it must be ``incomplete-run`` with
``diagnose``, not "Completed" with ``sft-job-cleanup`` off a file written hours before it
started. Near miss: a rerun that finishes writes its own ``out/trainer_state.json`` over the
old one, and is cleanup.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.slurm.transport import SshRunner
from tests.probes.slurm.completed_jobs import completed_jobs, sbatch_in
from tests.probes.slurm.conftest import SlurmEnv, cli_json

FIX = Path(__file__).resolve().parents[2] / "fixtures"
HF_LOG = (FIX / "hf-transformers-5.24.0" / "sft_healthy.out").read_bytes()
STOPPED_LOG = b"\n".join(HF_LOG.split(b"\n")[:75]) + b"\n"
"""The HF Trainer's console as printed by a run that stopped at step 60 of 95 (its first 75
newline-ended lines: its bar's carriage-return redraws are no line ends)."""
STATES = FIX / "hf-trainer-state-rebuilt"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _script(finished: bool) -> str:
    """The rerun: its console, its save, exit 0."""
    if finished:
        save = (f"echo '{_b64((STATES / 'trainer_state_finished.json').read_bytes())}' | "
                "base64 -d > out/trainer_state.json\n")
        log, step = HF_LOG, 95
    else:
        save = (f"echo '{_b64((STATES / 'trainer_state_stopped.json').read_bytes())}' | "
                "base64 -d > out/checkpoint-60/trainer_state.json\n")
        log, step = STOPPED_LOG, 60
    return (
        "#!/bin/bash\n"
        f"echo '{_b64(log)}' | base64 -d\n"
        f"echo '[INFO|trainer.py:3984] 2026-11-30 15:00:00,000 >> Saving model checkpoint to "
        f"out/checkpoint-{step}'\n"
        f"mkdir -p out/checkpoint-{step}\n"
        f"{save}"
        "echo 'wrapper: done'\n"
    )


async def _submit(runner: SshRunner, tag: str, run_dir: str) -> dict[str, str]:
    old = _b64((STATES / "trainer_state_finished.json").read_bytes())
    ids = {}
    for key in ("stopped", "finished"):
        workdir = f"{run_dir}/{key}"
        # The earlier run's end-of-training state, written two hours before the rerun.
        await runner.run(["sh", "-c", f"mkdir -p {workdir}/out && echo '{old}' | base64 -d "
                          f"> {workdir}/out/trainer_state.json && touch -d '2 hours ago' "
                          f"{workdir}/out/trainer_state.json"])
        ids[key] = await sbatch_in(runner, workdir, _script(key == "finished"),
                                   f"sft-qwen-rerun-{key}-{tag}")
    return ids


@pytest.fixture(scope="module")
def answers(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[dict[str, dict[str, Any]]]:
    """Both reruns COMPLETED, each read by ``jobtables job ID --format json``."""
    config = slurm_env.config_toml(tmp_path_factory.mktemp("stale"), recent_hours=1,
                                   timeout_s=120, command_timeout_s=60)
    with completed_jobs(slurm_env, _submit) as ids:
        yield {key: cli_json(config, "job", job_id) for key, job_id in ids.items()}


def test_an_earlier_runs_finished_state_does_not_complete_a_rerun(
        answers: dict[str, dict[str, Any]]) -> None:
    """The rerun that stopped at 60 of 95 is incomplete-run, diagnose, whatever the earlier
    run's out/trainer_state.json (95 of 95, two hours old) says."""
    stopped = answers["stopped"]
    assert (stopped["state"], stopped["step"], stopped["total_steps"]) == ("COMPLETED", 60, 95)
    assert "incomplete-run" in stopped["flags"], (stopped["trend"], stopped["recommendation"])
    assert stopped["recommendation"]["action"] == "diagnose"
    assert "60 of 95" in stopped["recommendation"]["why"]


def test_a_rerun_that_finished_is_cleanup(answers: dict[str, dict[str, Any]]) -> None:
    """Near miss: the rerun's own save_state (95 of 95) over the old file: cleanup."""
    finished = answers["finished"]
    assert finished["state"] == "COMPLETED" and "incomplete-run" not in finished["flags"]
    assert finished["recommendation"] == {"action": "cleanup", "why": "sft-job-cleanup"}
