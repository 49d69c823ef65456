"""A model the run starts from is not a folder the run saves to.

A verl GRPO run initialised from an SFT checkpoint in its workdir prints that path in its
config dump (``'path': '<w>/checkpoints/sft-base/global_step_500/huggingface'``); the
collector took every path on a line naming ``global_step`` as a save folder, and with ed02e34
("the folders the log names alone bank") the run at step 5 read banked_step 500, its TIMEOUT
"resume from banked step 500". A path given as the model to load (verl/SkyRL ``model.path``,
HF/TRL ``model_name_or_path``, OpenRLHF ``--pretrain``) is left out; the run's save and
resume lines (``local_global_step_folder:``, ``ckpt_path:``, ``Load from checkpoint folder:``)
still count.
"""

from __future__ import annotations

import pytest

from probes.remote.logged_paths import logged_checkpoint_dirs

W = "/w"
SAVE = "local_global_step_folder: /w/checkpoints/gsm8k/grpo/global_step_5\n"


@pytest.mark.parametrize("source", [
    "  'model': {'path': '/w/checkpoints/sft-base/global_step_500/huggingface',",
    "   'path': '/w/checkpoints/sft-base/global_step_500/huggingface',",
    "+ python3 -m verl.trainer.main_ppo "
    "actor_rollout_ref.model.path=/w/checkpoints/sft-base/global_step_500/huggingface",
    "      path: /w/checkpoints/sft-base/global_step_500",
    "model_name_or_path=/w/checkpoints/sft-base/checkpoint-500,",
    "+ deepspeed --module openrlhf.cli.train_ppo_ray --pretrain "
    "/w/checkpoints/sft-base/global_step_500 --save_path /w/checkpoints/gsm8k/grpo",
])
def test_the_model_loaded_is_no_save_folder(source: str) -> None:
    """Only the run's own save folder is named."""
    found = logged_checkpoint_dirs(source + "\n" + SAVE, [W], W)
    assert ("/w", ["checkpoints", "sft-base"]) not in found
    assert ("/w", ["checkpoints", "gsm8k", "grpo"]) in found


@pytest.mark.parametrize("line", [
    "  ckpt_path: /w/checkpoints/sft-base/global_step_500",
    "Load from checkpoint folder: /w/checkpoints/sft-base/global_step_500",
    "'resume_from_path': '/w/checkpoints/sft-base/global_step_500',",
])
def test_save_and_resume_lines_still_count(line: str) -> None:
    """A checkpoint or resume key names the run's own lineage."""
    assert ("/w", ["checkpoints", "sft-base"]) in logged_checkpoint_dirs(line, [W], W)


def test_a_save_line_naming_the_model_counts() -> None:
    """'Saved model: <dir>' is a save, whatever its key."""
    line = "Saved model: /w/checkpoints/gsm8k/grpo/global_step_5/actor"
    assert logged_checkpoint_dirs(line, [W], W) == [("/w", ["checkpoints", "gsm8k", "grpo"])]
