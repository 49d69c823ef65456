"""An mmengine runner's saves (XTuner's, any mmengine ``CheckpointHook``) bank their step.

mmengine/hooks/checkpoint_hook.py (at 2543429): by iterations (XTuner's ``by_epoch=False``)
each save is ``out_dir/iter_{N}.pth``, a file, or with DeepSpeed (XTuner's ``deepspeed_zero2``
and ``zero3`` strategies) a directory of that name ("checkpoints saved by deepspeed are
directories"); after the save it writes the save's path to ``work_dir/last_checkpoint``. The
runner logs the folder at start (``Checkpoints will be saved to {out_dir}.``). By epochs a
save is ``epoch_{E}.pth``: an epoch, no step. Replayed on the real SLURM: an XTuner run past
its iteration-500 save banked nothing (no ``iter_N.pth`` was a step name).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.slurm.checkpoints import marker_step, step_of
from tests.probes.remote.collected import banked_step

WORK = "work_dirs/qwen2_7b_full_alpaca_e3"


def _banked(tmp_path: Path) -> int | None:
    stdout = tmp_path / "slurm-7.out"
    stdout.write_text(
        f"12/05 14:00:30 - mmengine - INFO - Checkpoints will be saved to {tmp_path / WORK}.\n"
        "12/05 14:02:11 - mmengine - INFO - Iter(train) [ 520/2748]  lr: 1.9990e-05  eta: "
        "3:22:20  time: 5.0012  data_time: 0.0123  memory: 61234  loss: 1.2100\n")
    return banked_step(stdout, tmp_path)


def _save(folder: Path, name: str, deepspeed: bool) -> None:
    if deepspeed:
        (folder / name).mkdir()
        (folder / name / "mp_rank_00_model_states.pt").write_bytes(b"\0")
    else:
        (folder / name).write_bytes(b"\0")


def test_mmengine_names_are_steps() -> None:
    assert step_of("iter_500.pth") == 500
    assert step_of("epoch_1.pth") is None  # an epoch, not a step
    assert marker_step("/w/work_dirs/qwen/iter_500.pth") == 500
    assert marker_step("/w/work_dirs/qwen/epoch_1.pth") is None


@pytest.mark.parametrize("deepspeed", [False, True])
def test_iteration_saves_bank_the_newest(tmp_path: Path, deepspeed: bool) -> None:
    folder = tmp_path / WORK
    folder.mkdir(parents=True)
    for step in (500, 1000):
        _save(folder, f"iter_{step}.pth", deepspeed)
    (folder / "last_checkpoint").write_text(str(folder / "iter_1000.pth"))
    assert _banked(tmp_path) == 1000


@pytest.mark.parametrize("deepspeed", [False, True])
def test_a_save_above_last_checkpoint_is_in_flight(tmp_path: Path, deepspeed: bool) -> None:
    """``last_checkpoint`` is written after the save: one above it is still being written
    (its path is longer than the 64 bytes a step tracker needs)."""
    folder = tmp_path / WORK
    folder.mkdir(parents=True)
    for step in (500, 1000):
        _save(folder, f"iter_{step}.pth", deepspeed)
    (folder / "last_checkpoint").write_text(str(folder / "iter_500.pth"))
    assert len(str(folder / "iter_500.pth")) > 64
    assert _banked(tmp_path) == 500


def test_epoch_saves_bank_no_step(tmp_path: Path) -> None:
    folder = tmp_path / WORK
    folder.mkdir(parents=True)
    (folder / "epoch_1.pth").write_bytes(b"\0")
    (folder / "last_checkpoint").write_text(str(folder / "epoch_1.pth"))
    assert _banked(tmp_path) is None
