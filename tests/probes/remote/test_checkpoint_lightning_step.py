"""NeMo / Lightning checkpoint directories named by ``step=N`` bank that step, unless unfinished.

Reconstructed from NeMo's source (no GPU stack installs here): NeMo 2's ``ModelCheckpoint``
(nemo/lightning/pytorch/callbacks/model_checkpoint.py, a Lightning ``ModelCheckpoint``) names
each save by its filename template, ``{model_name}--{val_loss:.2f}-{step}-{consumed_samples}``
plus a ``-last`` copy, and writes a distributed checkpoint as a directory (``ckpt_to_dir``
strips ``.ckpt``): ``checkpoints/model_name=0--val_loss=0.00-step=49-consumed_samples=6400.0``.
While a save is in flight a marker file beside it, the directory's name plus ``-unfinished``
(``UNFINISHED_CHECKPOINT_SUFFIX``; ``format_checkpoint_unfinished_marker_path``), says it is
not durable; NeMo removes such directories on resume. The log names the folder: ``Scheduled
async checkpoint save for /results/<name>/checkpoints/model_name=0--...-last.ckpt``. A NeMo 2
SFT run (``tests/fixtures/sft-dryrun/nemo2_finetune.log``) banked nothing: no name matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.remote import collector
from probes.slurm.checkpoints import build_listing, step_of

SAVE = "{d}/model_name=0--val_loss={loss}-step={step}-consumed_samples={n}.0{last}"


def _save(ckpts: Path, step: int, *, last: bool = False, unfinished: bool = False) -> str:
    name = SAVE.format(d="", loss="0.00", step=step, n=(step + 1) * 128,
                       last="-last" if last else "").lstrip("/")
    (ckpts / name / "weights").mkdir(parents=True)
    (ckpts / name / "context").mkdir()
    if unfinished:
        (ckpts / f"{name}-unfinished").write_text("")
    return name


def _banked(workdir: Path, log: str, roots: list[str]) -> int | None:
    stdout = workdir / "slurm-7.out"
    stdout.write_text(log)
    request = {"tail_bytes": 1 << 16, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(workdir),
                         "offset": 0, "checkpoint_roots": roots, "trial_roots": []}]}
    raw: dict[str, Any] = collector.collect(request)["jobs"]["7"]["checkpoints"]
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports"),
                         latest_markers=raw.get("markers"), logged=raw.get("logged")).banked_step


def test_step_of_reads_a_lightning_name() -> None:
    assert step_of("model_name=0--val_loss=0.00-step=49-consumed_samples=6400.0-last") == 49
    name = "megatron_gpt_sft--validation_loss=1.234-step=500-consumed_samples=64000.0"
    assert step_of(name) == 500
    assert step_of("epoch=2-step=1500") == 1500
    assert step_of("nostep=5") is None and step_of("step=") is None


def test_a_logged_nemo_folder_banks_its_newest_finished_save(tmp_path: Path) -> None:
    ckpts = tmp_path / "results" / "sft-nemo2" / "checkpoints"
    _save(ckpts, 49)
    _save(ckpts, 99)
    _save(ckpts, 99, last=True)
    _save(ckpts, 149, last=True, unfinished=True)  # the async save still being written
    log = ("[NeMo I 2025-09-20 07:44:02 nemo_model_checkpoint:497] Scheduled async checkpoint "
           f"save for {ckpts}/model_name=0--val_loss=0.00-step=149-consumed_samples=19200.0"
           "-last.ckpt\n")
    assert _banked(tmp_path, log, [str(tmp_path / "checkpoints")]) == 99


def test_a_root_holding_lightning_saves_banks_them(tmp_path: Path) -> None:
    ckpts = tmp_path / "checkpoints"
    _save(ckpts, 200)
    _save(ckpts, 400, last=True)
    assert _banked(tmp_path, "", [str(ckpts)]) == 400
