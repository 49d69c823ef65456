"""Levanter's ``step-N`` saves bank their step once its ``metadata.json`` is written.

Levanter (stanford-crfm/levanter at 9263f81, ``checkpoint.py``) saves to
``checkpoints/<run id>/step-{N}`` (``CheckpointerConfig.base_path`` plus the run id): the
``TrainerState``'s saveable leaves (``step``, ``model``, ``opt_state``, ``training_key``), each a
tensorstore array under its key path (``tensorstore_serialization._fs_paths_from_key_paths``),
then, in the commit callback once every array is written, ``metadata.json``; its resume
(``discover_latest_checkpoint``) takes only a directory holding that file. A save still being
written held no DCP shard, so it was taken for another tool's finished save: replayed under a
real sbatch job (29, sft-levanter: step-100 to step-300 committed), a ``step-400`` holding
its arrays but no ``metadata.json`` yet banked 400.
"""

from __future__ import annotations

from pathlib import Path

from tests.probes.remote.test_checkpoint_titan_step import _banked


def _save(run: Path, step: int, *, committed: bool) -> None:
    save = run / f"step-{step}"
    for leaf in ("step", "model/embeddings", "opt_state/0/mu", "training_key"):
        (save / leaf).mkdir(parents=True)
        (save / leaf / "zarr.json").write_bytes(b"{}")
    if committed:
        (save / "metadata.json").write_text(
            f'{{"step": {step}, "timestamp": "2026-12-05T16:30:00", "is_temporary": false}}')


def test_a_save_without_its_metadata_is_in_flight(tmp_path: Path) -> None:
    run = tmp_path / "checkpoints" / "lev-run1"
    _save(run, 100, committed=True)
    _save(run, 200, committed=True)
    _save(run, 300, committed=False)
    assert _banked(tmp_path, [str(tmp_path / "checkpoints")]) == 200


def test_committed_saves_bank(tmp_path: Path) -> None:
    """Near miss: every save committed."""
    run = tmp_path / "checkpoints" / "lev-run1"
    _save(run, 100, committed=True)
    _save(run, 200, committed=True)
    assert _banked(tmp_path, [str(tmp_path / "checkpoints")]) == 200
