"""XTuner v1's saves bank their step once its ``train_state.json`` is written.

XTuner v1 (InternLM/xtuner ``xtuner/v1/train/trainer.py`` at 044afa4, ``Trainer._maybe_save``)
saves to ``{work_dir}/{timestamp}/checkpoints/ckpt-step-{N}`` (``snapshot-step-{N}`` for a
snapshot, one kept): the model and optimizer as DCP under ``model/`` and ``optimizer/``, the
dataloader and scheduler states, then ``train_state.json`` (``cur_step``), then the
``.xtuner`` meta listing it; its resume takes the meta's newest. Neither name was a step
directory: a run whose work dir is a checkpoint root banked nothing.
"""

from __future__ import annotations

from pathlib import Path

from probes.slurm.checkpoints import step_of
from tests.probes.remote.test_checkpoint_titan_step import _banked


def _save(folder: Path, name: str, *, finished: bool) -> None:
    save = folder / name
    for part in ("model", "optimizer"):
        (save / part).mkdir(parents=True)
        (save / part / "__0_0.distcp").write_bytes(b"\0")
    (save / "dataloader").write_bytes(b"\0")
    if finished:
        (save / "train_state.json").write_text('{"cur_step": 1}')


def test_xtuner_v1_names_are_steps() -> None:
    assert step_of("ckpt-step-200") == 200
    assert step_of("snapshot-step-250") == 250
    assert step_of("ckpt-step-") is None


def test_saves_bank_the_newest_finished(tmp_path: Path) -> None:
    work = tmp_path / "work_dirs" / "qwen3_sft"
    folder = work / "20261205160000" / "checkpoints"
    _save(folder, "ckpt-step-100", finished=True)
    _save(folder, "ckpt-step-200", finished=True)
    _save(folder, "snapshot-step-250", finished=True)
    _save(folder, "ckpt-step-300", finished=False)  # being written
    assert _banked(tmp_path, [str(work)]) == 250
