"""A Hugging Face save cut off before its ``trainer_state.json`` banks no step.

Replayed on the real SLURM (sbatch as jtuser, read through ``jobtables job ID --format json``):
``sft-lora-chain``, a TRL SFTTrainer LoRA run (srun --label, 8 tasks), hit its walltime while
printing ``Saving model checkpoint to .../out/checkpoint-200``; ``checkpoint-50`` to ``-150``
held ``adapter_model.safetensors``, ``adapter_config.json``, the optimizer, scheduler, RNG
state and ``trainer_state.json``, and ``checkpoint-200`` only ``adapter_config.json`` and
``README.md``. The row read ``banked_step`` 200 beside its afterany successor: the step the
successor cannot resume from (transformers' ``Trainer._save_checkpoint`` writes the model, then
optimizer/scheduler/RNG, then ``trainer_state.json``; ``train(resume_from_checkpoint=...)``
restores the global step from that file alone). Where the run's own saves show the layout
(a ``checkpoint-N`` holding ``trainer_state.json``), a newer ``checkpoint-N`` without one is a
save in flight or cut off, as a step above a tracker is for verl, DeepSpeed and Megatron.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.remote import collector
from probes.slurm.checkpoints import build_listing


def _save(out: Path, step: int, *, finished: bool = True, lora: bool = True) -> None:
    ckpt = out / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / ("adapter_config.json" if lora else "config.json")).write_text("{}")
    (ckpt / "README.md").write_text("x")
    if finished:
        (ckpt / ("adapter_model.safetensors" if lora else "model.safetensors")).write_text("x")
        for name in ("optimizer.pt", "scheduler.pt", "rng_state_0.pth"):
            (ckpt / name).write_text("x")
        (ckpt / "trainer_state.json").write_text(f'{{"global_step": {step}}}')


def _banked(workdir: Path, log: str) -> int | None:
    stdout = workdir / "slurm-7.out"
    stdout.write_text(log)
    request = {"tail_bytes": 1 << 16, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(workdir),
                         "offset": 0, "checkpoint_roots": [str(workdir / "checkpoints")],
                         "trial_roots": []}]}
    raw: dict[str, Any] = collector.collect(request)["jobs"]["7"]["checkpoints"]
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports"),
                         latest_markers=raw.get("markers"), logged=raw.get("logged")).banked_step


def _log(out: Path, *steps: int) -> str:
    head = "0: [INFO|trainer.py:4149] 2026-12-04 16:30:00,123 >> "
    return "".join(f"{head}Saving model checkpoint to {out}/checkpoint-{s}\n" for s in steps)


def test_a_save_cut_off_before_its_trainer_state_is_not_banked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for step in (50, 100, 150):
        _save(out, step)
    _save(out, 200, finished=False)
    assert _banked(tmp_path, _log(out, 50, 100, 150, 200)) == 150


def test_full_model_saves_alike(tmp_path: Path) -> None:
    """Not only adapters: a full-weights ``checkpoint-N`` still being written is in flight."""
    out = tmp_path / "checkpoints"
    _save(out, 400, lora=False)
    _save(out, 500, finished=False, lora=False)
    assert _banked(tmp_path, "") == 400


def test_the_finished_newest_save_is_banked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for step in (50, 100, 150, 200):
        _save(out, step)
    assert _banked(tmp_path, _log(out, 200)) == 200


def test_a_layout_with_no_trainer_state_anywhere_keeps_its_steps(tmp_path: Path) -> None:
    """A ``checkpoint-N`` layout whose saves never hold ``trainer_state.json`` (another loop
    naming its folders the HF way) proves nothing in flight: its newest step stays banked."""
    out = tmp_path / "checkpoints"
    for step in (10, 20):
        (out / f"checkpoint-{step}").mkdir(parents=True)
        (out / f"checkpoint-{step}" / "model.pt").write_text("x")
    assert _banked(tmp_path, "") == 20


def test_the_first_save_cut_off_after_its_training_args_is_not_banked(tmp_path: Path) -> None:
    """No finished save yet to show the layout, but the Trainer's own ``training_args.bin``
    (``Trainer._save`` writes it right after the weights, before the optimizer and
    ``trainer_state.json``) says it is one: the run's first save, cut during its optimizer
    state, banks nothing."""
    out = tmp_path / "out"
    _save(out, 50, finished=False)
    (out / "checkpoint-50" / "adapter_model.safetensors").write_text("x")
    (out / "checkpoint-50" / "training_args.bin").write_text("x")
    (out / "checkpoint-50" / "optimizer.pt").write_text("partial")
    assert _banked(tmp_path, _log(out, 50)) is None
