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


def _banked_logged(workdir: Path, folder_line: str) -> int | None:
    from probes.remote import collector
    from probes.slurm.checkpoints import build_listing

    stdout = workdir / "slurm-7.out"
    stdout.write_text(
        "2026-12-05 16:00:00,000\tINFO launch.py:239 in args_sanity_check -- "
        "+++++++++++++++ Ckpt Info +++++++++++++++\n"
        f"2026-12-05 16:00:00,000\tINFO launch.py:241 in args_sanity_check -- {folder_line}\n"
        "2026-12-05 16:02:40,123\tINFO pipeline.py:626 in record_current_batch_training_metrics"
        " -- tflops=177.6 step=160 loss=1.5000 lr=2e-05 loss_scale=65536.0\n")
    request = {"tail_bytes": 1 << 16, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(workdir),
                         "offset": 0, "checkpoint_roots": [str(workdir / "checkpoints")],
                         "trial_roots": []}]}
    raw = collector.collect(request)["jobs"]["7"]["checkpoints"]
    return build_listing(raw.get("listings") or {}, latest_markers=raw.get("markers"),
                         logged=raw.get("logged")).banked_step


def test_the_logged_local_save_folder_is_searched(tmp_path: Path) -> None:
    """``save_ckpt_folder: local:llm_ckpts`` (launch.py's Ckpt Info) names the folder, under
    InternEvo's ``local:`` storage prefix, from the workdir; no root names it."""
    _save(tmp_path / "llm_ckpts", 50, finished=True)
    _save(tmp_path / "llm_ckpts", 100, finished=True)
    assert _banked_logged(tmp_path, "save_ckpt_folder: local:llm_ckpts") == 100


def test_an_object_store_save_folder_is_not_searched(tmp_path: Path) -> None:
    """Near miss: ``boto3:s3://bucket/ckpts`` is no login-node folder (its ``llm_ckpts`` beside
    the workdir is not this run's save folder either)."""
    _save(tmp_path / "llm_ckpts", 50, finished=True)
    assert _banked_logged(tmp_path, "save_ckpt_folder: boto3:s3://bucket/ckpts") is None
