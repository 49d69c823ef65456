"""A relative save folder DeepSpeed prints right after its verb is the run's save folder.

Replayed on the real SLURM (sbatch, read through ``jobtables job ID --format json``):
``sft-ds-z3``, an HF Trainer run under the ``deepspeed`` launcher with ``--output_dir out``
(relative, as most recipes pass it), printed only DeepSpeed's own save lines
(``[Torch] Saving out/checkpoint-100/global_step100/mp_rank_00_model_states.pt...``,
deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py; HF's own "Saving model
checkpoint to" is INFO, not shown at transformers' default WARNING level). Its
``out/checkpoint-100`` (``global_step100``, ``latest``, ``trainer_state.json``) is under no
default root, and the relative path was read only after ``to``/``in``/``at``/``:``:
``banked_step`` null on a run that had banked step 100 when it failed.
"""

from __future__ import annotations

from pathlib import Path

from probes.remote.logged_paths import logged_checkpoint_dirs
from tests.probes.remote.collected import banked_step

SAVE = ("[2026-12-04 16:10:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Saving "
        "{p}/checkpoint-100/global_step100/mp_rank_00_model_states.pt...\n")
SAVED = ("[2026-12-04 16:10:05,000] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Saved "
         "{p}/checkpoint-100/global_step100/zero_pp_rank_0_mp_rank_00_optim_states.pt.\n")


def test_a_relative_path_right_after_the_save_verb_is_taken_from_the_workdir() -> None:
    found = logged_checkpoint_dirs(SAVE.format(p="out"), ["/w"], "/w")
    assert ("/w", ["out", "checkpoint-100"]) in found, found
    found = logged_checkpoint_dirs(SAVED.format(p="./out"), ["/w"], "/w")
    assert ("/w", ["out", "checkpoint-100"]) in found, found


def test_words_after_the_verb_are_no_path() -> None:
    """``Saving model checkpoint to x/y``: the path after ``to``, not ``model``."""
    text = "Saving model checkpoint to saves/qwen/checkpoint-40\n"
    assert logged_checkpoint_dirs(text, ["/w"], "/w") == [("/w", ["saves", "qwen"])]


def test_the_banked_step_reads_the_printed_folder(tmp_path: Path) -> None:
    ckpt = tmp_path / "out" / "checkpoint-100"
    (ckpt / "global_step100").mkdir(parents=True)
    (ckpt / "latest").write_text("global_step100")
    (ckpt / "trainer_state.json").write_text('{"global_step": 100}')
    stdout = tmp_path / "slurm-7.out"
    stdout.write_text(SAVE.format(p="out") + "Traceback (most recent call last):\n")
    assert banked_step(stdout, tmp_path) == 100
