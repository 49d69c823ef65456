"""End to end on the real SLURM 22.05 cluster: an HF Trainer run its EarlyStoppingCallback
stopped is complete, not ``incomplete-run``.

A run with ``EarlyStoppingCallback(early_stopping_patience=3)`` (and ``load_best_model_at_end``:
an eval and a save every 20 steps) stops itself at step 60 of its 95 when the eval loss has not
improved for 3 evals: the callback sets ``control.should_training_stop``, the checkpoint saved at
that step stores both states in ``stateful_callbacks`` (``Trainer._save_checkpoint``: each
``ExportableState``'s ``state()``: ``TrainerControl`` args, ``EarlyStoppingCallback`` args
``early_stopping_patience``/``early_stopping_threshold`` and attribute
``early_stopping_patience_counter``), the Trainer prints its ``train_runtime`` dict and
``save_state`` writes ``out/trainer_state.json`` (60 of 95). Read through the contract
(``jobtables job ID --format json``), CONTRACT §6's ``incomplete-run`` is for a run that did
not get where it was going; this one finished by its own rule: cleanup, not ``diagnose``.
Near miss: the same files with the patience not exhausted (counter 1 of 3, no stop asked): the
run stopped short for another reason and is ``incomplete-run``.

The states are rebuilt from ``hf-trainer-state-rebuilt/trainer_state_stopped.json`` (transformers
5.x ``save_to_json``: ``indent=2, sort_keys=True``) with the callback's state added.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from probes.slurm.transport import SshRunner
from tests.probes.slurm.completed_jobs import completed_jobs, sbatch_in
from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_e2e_stale_completion import HF_LOG, STATES, STOPPED_LOG

FINISHED_LINE = (b"                                               {'train_runtime': '5.112', "
                 b"'train_samples_per_second': '94.94', 'train_steps_per_second': '11.74', "
                 b"'train_loss': '3.612', 'epoch': '0.6316'}\n")
"""The Trainer's last dict, as the 5.24 console prints it (``sft_healthy.out``'s last line)."""


def _state(counter: int) -> bytes:
    """trainer_state.json at step 60 of 95 with EarlyStoppingCallback's state (patience 3)."""
    state: dict[str, Any] = json.loads((STATES / "trainer_state_stopped.json").read_text())
    stopped = counter >= 3
    for step, loss in ((20, 3.9012), (40, 3.8876), (60, 3.8903)):
        state["log_history"].append({"epoch": round(step / 95, 5), "eval_loss": loss,
                                     "eval_runtime": 0.2, "eval_samples_per_second": 150.0,
                                     "eval_steps_per_second": 15.0, "step": step})
    state.update(best_global_step=40, best_metric=3.8876,
                 best_model_checkpoint="out/checkpoint-40", eval_steps=20, save_steps=20)
    state["stateful_callbacks"] = {
        "EarlyStoppingCallback": {
            "args": {"early_stopping_patience": 3, "early_stopping_threshold": 0.0},
            "attributes": {"early_stopping_patience_counter": counter}},
        "TrainerControl": {
            "args": {"should_epoch_stop": False, "should_evaluate": False, "should_log": False,
                     "should_save": True, "should_training_stop": stopped},
            "attributes": {}},
    }
    return (json.dumps(state, indent=2, sort_keys=True) + "\n").encode()


def _script(counter: int) -> str:
    state = base64.b64encode(_state(counter)).decode()
    log = base64.b64encode(STOPPED_LOG + FINISHED_LINE).decode()
    return (
        "#!/bin/bash\n"
        f"echo '{log}' | base64 -d\n"
        "echo '[INFO|trainer.py:3984] 2026-11-30 15:00:00,000 >> Saving model checkpoint to "
        "out/checkpoint-60'\n"
        "mkdir -p out/checkpoint-60\n"
        f"echo '{state}' | base64 -d > out/checkpoint-60/trainer_state.json\n"
        f"echo '{state}' | base64 -d > out/trainer_state.json\n"
    )


async def _submit(runner: SshRunner, tag: str, run_dir: str) -> dict[str, str]:
    return {key: await sbatch_in(runner, f"{run_dir}/{key}", _script(counter),
                                 f"sft-qwen-{key}-{tag}")
            for key, counter in (("early", 3), ("short", 1))}


@pytest.fixture(scope="module")
def answers(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[dict[str, dict[str, Any]]]:
    """Both runs COMPLETED, each read by ``jobtables job ID --format json``."""
    assert HF_LOG  # the full console the stopped one is cut from
    config = slurm_env.config_toml(tmp_path_factory.mktemp("early"), recent_hours=1,
                                   timeout_s=120, command_timeout_s=60)
    with completed_jobs(slurm_env, _submit) as ids:
        yield {key: cli_json(config, "job", job_id) for key, job_id in ids.items()}


def test_an_early_stopped_run_is_complete(answers: dict[str, dict[str, Any]]) -> None:
    early = answers["early"]
    assert (early["state"], early["step"], early["total_steps"]) == ("COMPLETED", 60, 95)
    assert "incomplete-run" not in early["flags"], (early["trend"], early["recommendation"])
    assert early["recommendation"] == {"action": "cleanup", "why": "sft-job-cleanup"}
    assert "early" in early["trend"].lower(), early["trend"]


def test_patience_not_exhausted_is_still_incomplete(answers: dict[str, dict[str, Any]]) -> None:
    """Near miss: the callback was there but asked for no stop: short of its total."""
    short = answers["short"]
    assert "incomplete-run" in short["flags"], short["trend"]
    assert short["recommendation"]["action"] == "diagnose"
