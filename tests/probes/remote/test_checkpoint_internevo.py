"""InternEvo's saves, directories named by their step, bank it once its ``N.step`` is written.

InternEvo (InternLM/InternEvo ``internlm/checkpoint/checkpoint_manager.py`` at c628a8c,
``try_save_checkpoint``/``save_checkpoint``) saves to ``{save_ckpt_folder}/{step_count}/``
(``configs/7B_sft.py``: ``local:llm_ckpts``): the model's and optimizer's shards, the
sampler, scheduler and context, then, last, ``{step}.step``; its own resume takes the newest
directory holding that file. A bare number was no step name: a run whose save folder is a
checkpoint root banked nothing. A numbered directory without it is a save in flight, and any
other numbered directory (a job id's, a seed's) is a plain one, still searched below.
"""

from __future__ import annotations

from pathlib import Path

from tests.probes.remote.test_checkpoint_titan_step import _banked


def _save(folder: Path, step: int, *, finished: bool) -> None:
    save = folder / str(step)
    save.mkdir(parents=True)
    (save / "model_tp0_pp0.pt").write_bytes(b"\0")
    (save / "context.pt").write_bytes(b"\0")
    if finished:
        (save / f"{step}.step").write_bytes(b"\0")


def test_numbered_saves_bank_the_newest_finished(tmp_path: Path) -> None:
    folder = tmp_path / "llm_ckpts"
    _save(folder, 50, finished=True)
    _save(folder, 100, finished=True)
    _save(folder, 150, finished=False)  # being written
    assert _banked(tmp_path, [str(folder)]) == 100


def test_a_numbered_plain_directory_is_still_searched(tmp_path: Path) -> None:
    """Near miss: ``outputs/12345/checkpoint-40`` (a job id's directory) holds no ``.step``."""
    run = tmp_path / "outputs" / "12345" / "checkpoint-40"
    run.mkdir(parents=True)
    (run / "trainer_state.json").write_text("{}")
    assert _banked(tmp_path, [str(tmp_path / "outputs")]) == 40
