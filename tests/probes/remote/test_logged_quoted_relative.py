"""A relative save path a trainer prints quoted (Python's ``!r``) is the run's save folder.

LitGPT (Lightning-AI/litgpt ``litgpt/finetune/lora.py``/``adapter.py``/``full.py``,
``pretrain.py``) prints its saves with ``repr``: ``Saving LoRA weights to
'out/finetune/lora/step-000050/lit_model.pth.lora'``, ``Saving checkpoint to
'out/pretrain/step-00001000'``; its ``out_dir`` defaults to the relative ``out/finetune/lora``,
under no default root. Replayed on the real SLURM (``sft-litgpt-lora-llama31`` as jtuser, read
through ``jobtables job ID --format json``): ``banked_step`` null beside ``step-000050`` and
``step-000100``, since a relative path was read only when no quote led it.
"""

from __future__ import annotations

from pathlib import Path

from probes.remote.logged_paths import logged_checkpoint_dirs
from tests.probes.remote.collected import banked_step

LORA = "Saving LoRA weights to 'out/finetune/lora/step-{s:06d}/lit_model.pth.lora'\n"
FULL = 'Saving checkpoint to "out/pretrain/step-{s:08d}"\n'


def test_a_quoted_relative_save_path_is_taken_from_the_workdir() -> None:
    found = logged_checkpoint_dirs(LORA.format(s=50), ["/w"], "/w")
    assert found == [("/w", ["out", "finetune", "lora"])]
    found = logged_checkpoint_dirs(FULL.format(s=1000), ["/w"], "/w")
    assert found == [("/w", ["out", "pretrain"])]


def test_the_banked_step_reads_the_quoted_folder(tmp_path: Path) -> None:
    for step in (50, 100):
        save = tmp_path / "out" / "finetune" / "lora" / f"step-{step:06d}"
        save.mkdir(parents=True)
        (save / "lit_model.pth.lora").write_bytes(b"\0")
    stdout = tmp_path / "slurm-7.out"
    stdout.write_text(LORA.format(s=50) + LORA.format(s=100))
    assert banked_step(stdout, tmp_path) == 100
