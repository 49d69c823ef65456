"""MosaicML Composer's saves (every llm-foundry run) bank their batch.

Composer's ``CheckpointSaver`` writes ``save_folder/ep{epoch}-ba{batch}-rank{rank}.pt``
(``save_filename``'s default: one *file* per save, rank 0's holding the whole state, and the
``latest-rank0.pt`` symlink to the newest), or with FSDP's sharded state dict a directory
``ep{epoch}-ba{batch}/`` of DCP shards (``__0_0.distcp``) and its ``.metadata``; the batch is
the optimizer step its console's ``[batch=N/T]`` counts. Neither was a step name: a run
configured with its save folder banked nothing.
"""

from __future__ import annotations

from pathlib import Path

from probes.slurm.checkpoints import step_of
from tests.probes.remote.collected import banked_step


def _banked(tmp_path: Path) -> int | None:
    stdout = tmp_path / "slurm-7.out"
    stdout.write_text("[batch=160/1000]:\n\t Train loss/train/total: 1.2000\n")
    return banked_step(stdout, tmp_path)


def test_composer_names_are_steps() -> None:
    assert step_of("ep0-ba50-rank0.pt") == 50
    assert step_of("ep2-ba1500") == 1500
    assert step_of("ep0-ba50-rank3.pt") is None  # another rank's part of the save
    assert step_of("latest-rank0.pt") is None


def test_composer_rank0_files_bank_the_newest(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for batch in (50, 100, 150):
        (folder / f"ep0-ba{batch}-rank0.pt").write_bytes(b"\0")
    (folder / "latest-rank0.pt").symlink_to("ep0-ba150-rank0.pt")
    assert _banked(tmp_path) == 150


def test_composer_sharded_dirs_bank_the_finished(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoints"
    for batch in (50, 100):
        save = folder / f"ep0-ba{batch}"
        save.mkdir(parents=True)
        (save / "__0_0.distcp").write_bytes(b"\0")
        (save / ".metadata").write_bytes(b"\0")
    assert _banked(tmp_path) == 100
