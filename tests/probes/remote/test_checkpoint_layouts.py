"""Banked steps in the layouts trainers really write, searched by the shipped collector.

Every tree here is RECONSTRUCTED FROM THE LIBRARIES' SOURCE (none of these trainers installs
on this machine), by their naming rules:

* verl ``trainer.default_local_dir = checkpoints/${project_name}/${experiment_name}``, step
  dirs ``global_step_{N}``, tracker ``latest_checkpointed_iteration.txt`` holding ``N``; the
  trainer prints ``local_global_step_folder: <dir>`` when it saves.
* Hugging Face ``Trainer``: ``<output_dir>/checkpoint-{N}`` (``PREFIX_CHECKPOINT_DIR``), no
  tracker; logs ``Saving model checkpoint to <output_dir>/checkpoint-N``.
* DeepSpeed ``save_checkpoint``: tag ``global_step{N}`` (no underscore) and a ``latest`` file
  holding the tag; logs ``[Torch] Saving <dir>/global_stepN/mp_rank_00_model_states.pt...``.
* Megatron-LM: ``iter_{:07d}`` and ``latest_checkpointed_iteration.txt`` holding ``N`` (or
  ``release``); logs ``saving checkpoint at iteration     N to <dir> in torch_dist format``.

Each case runs the production path: default roots expanded for the job, the collector's
``collect`` (guard, depth bound, logged dirs), then ``build_listing``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probes.config import DEFAULT_CHECKPOINT_ROOTS
from probes.remote import collector
from probes.remote.script import build_collector_script
from probes.remote.tree import CKPT_VISITS
from probes.slurm.checkpoints import build_listing, expand_roots

NAME = "grpo-qwen3-8b"
Layout = Callable[[Path], None]


def _dirs(base: Path, *names: str) -> None:
    for name in names:
        (base / name).mkdir(parents=True, exist_ok=True)


def _verl(w: Path) -> None:
    exp = w / "checkpoints" / "my_project" / NAME
    _dirs(exp, "global_step_10/actor", "global_step_20/actor", "global_step_30/actor")
    (exp / "latest_checkpointed_iteration.txt").write_text("20")  # 30 is still being saved


def _verl_v01(w: Path) -> None:
    # verl 0.1 (ray_trainer.py, 2024-11): <default_local_dir>/actor/global_step_{N} (and
    # critic/), N the 0-based step of the save, no tracker and no save line
    exp = w / "checkpoints" / "my_project" / NAME
    _dirs(exp, "actor/global_step_49", "actor/global_step_99", "critic/global_step_49")


def _hf(w: Path) -> None:
    _dirs(w / "output", "checkpoint-500", "checkpoint-1000", "checkpoint-1500-tmp", "runs")


def _hf_named(w: Path) -> None:
    _dirs(w / "outputs" / NAME, "checkpoint-250")


def _deepspeed(w: Path) -> None:
    ckpt = w / "checkpoints"
    _dirs(ckpt, "global_step100", "global_step200")
    (ckpt / "latest").write_text("global_step100")  # 200 is still being saved


def _megatron(w: Path) -> None:
    ckpt = w / "checkpoints" / NAME
    _dirs(ckpt, "iter_0000100/mp_rank_00", "iter_0000200/mp_rank_00")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("200")


def _megatron_release(w: Path) -> None:
    ckpt = w / "ckpts"
    _dirs(ckpt, "iter_0000300", "release")
    (ckpt / "latest_checkpointed_iteration.txt").write_text("release")


def _nemo_rl(w: Path) -> None:
    # NeMo-RL's example configs: checkpoint_dir "results/grpo"; a save in progress is
    # tmp_step_N until it is renamed step_N (nemo_rl/utils/checkpoint.py).
    _dirs(w / "results" / "grpo", "step_10/policy", "step_20/policy", "tmp_step_30/policy")


def _openrlhf(w: Path) -> None:
    # OpenRLHF's defaults: --ckpt_path ./ckpt/checkpoints_ppo_ray (train_ppo_ray; SFT
    # ./ckpt/checkpoints_sft), the actor's DeepSpeed saves under _actor, tag global_step{N},
    # 'latest' holding the tag; it prints none of these paths.
    ckpt = w / "ckpt" / "checkpoints_ppo_ray" / "_actor"
    _dirs(ckpt, "global_step5", "global_step10", "global_step15")
    (ckpt / "latest").write_text("global_step10")  # 15 is still being saved


def _too_deep(w: Path) -> None:
    _dirs(w / "checkpoints" / "a" / "b" / "c", "global_step_5")


def _inside_a_step_dir(w: Path) -> None:
    _dirs(w / "checkpoints" / "global_step_10", "checkpoint-99")  # a step dir is not entered


def _symlinked_out(w: Path) -> None:
    outside = w.parent / "elsewhere"
    _dirs(outside / NAME, "global_step_99")
    (w / "checkpoints").mkdir()
    (w / "checkpoints" / "proj").symlink_to(outside)


def _temp_names_only(w: Path) -> None:
    _dirs(w / "checkpoints", "global_step_12.tmp", "checkpoint-5-tmp", "iter_.partial")


def _collect(workdir: Path, log: str = "") -> dict[str, Any]:
    roots = expand_roots(list(DEFAULT_CHECKPOINT_ROOTS), workdir=str(workdir), name=NAME,
                         job_id="7", user="u")
    stdout = workdir / "slurm-7.out"
    stdout.write_text(log or "step 1\n")
    request = {"tail_bytes": 1 << 16, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(workdir),
                         "offset": 0, "checkpoint_roots": roots, "trial_roots": []}]}
    answer: dict[str, Any] = collector.collect(request)["jobs"]["7"]["checkpoints"]
    return answer


def _banked(raw: dict[str, Any]) -> int | None:
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports"),
                         latest_markers=raw.get("markers"), logged=raw.get("logged")).banked_step


@pytest.mark.parametrize(("layout", "banked"), [
    pytest.param(_verl, 20, id="verl-project-experiment-tracker"),
    pytest.param(_verl_v01, 99, id="verl-0.1-experiment-actor-global_step_N"),
    pytest.param(_hf, 1000, id="hf-checkpoint-N"),
    pytest.param(_hf_named, 250, id="hf-outputs-name"),
    pytest.param(_deepspeed, 100, id="deepspeed-global_stepN-latest"),
    pytest.param(_megatron, 200, id="megatron-iter-tracker"),
    pytest.param(_megatron_release, 300, id="megatron-release-tracker-holds-nothing-back"),
    pytest.param(_nemo_rl, 20, id="nemo-rl-results-algorithm-step_N"),
    pytest.param(_openrlhf, 10, id="openrlhf-ckpt-checkpoints_ppo_ray-_actor-global_stepN"),
    pytest.param(_too_deep, None, id="not-found-past-the-layout-depth"),
    pytest.param(_inside_a_step_dir, 10, id="not-entered-a-step-directory"),
    pytest.param(_symlinked_out, None, id="not-followed-symlink-out-of-the-tree"),
    pytest.param(_temp_names_only, None, id="not-found-temporary-names"),
])
def test_default_roots_find_each_layout(tmp_path: Path, layout: Layout,
                                        banked: int | None) -> None:
    """Each trainer's layout under the default roots banks its tracked step, or nothing."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    layout(workdir)
    raw = _collect(workdir)
    assert _banked(raw) == banked
    assert "elsewhere" not in repr(raw)


def _megatron_save(w: Path) -> str:
    _dirs(w / "megatron_save", "iter_0000040", "iter_0000080")
    (w / "megatron_save" / "latest_checkpointed_iteration.txt").write_text("80")
    return (f" saving checkpoint at iteration      80 to {w}/megatron_save in torch_dist"
            " format\n  successfully saved checkpoint from iteration      80 to"
            f" {w}/megatron_save [ t 1/1, p 1/1 ]\n")


def _hf_trainer_out(w: Path) -> str:
    _dirs(w / "trainer_out" / "run1", "checkpoint-40")
    return f"Saving model checkpoint to {w}/trainer_out/run1/checkpoint-40\n"


def _deepspeed_file(w: Path) -> str:
    _dirs(w / "ds_save", "global_step7")
    (w / "ds_save" / "latest").write_text("global_step7")
    return (f"[Torch] Saving {w}/ds_save/global_step7/mp_rank_00_model_states.pt...\n"
            f"[Torch] Saved {w}/ds_save/global_step7/mp_rank_00_model_states.pt.\n")


def _verl_folder(w: Path) -> str:
    _dirs(w / "elsewhere_in_workdir" / "p" / "e", "global_step_15")
    return f"local_global_step_folder: {w}/elsewhere_in_workdir/p/e/global_step_15\n"


def _outside_workdir(w: Path) -> str:
    # A save folder on scratch, outside the workdir and roots: a root of its own (the job
    # user's own steps count there; test_logged_checkpoint_root has another owner's).
    outside = w.parent / "not_the_job"
    _dirs(outside, "checkpoint-77")
    return f"Saving model checkpoint to {outside}/checkpoint-77\n"


def _dotdot_escape(w: Path) -> str:
    _dirs(w.parent / "escape", "checkpoint-66")
    return f"Saving model checkpoint to {w}/../escape/checkpoint-66\n"


def _symlink_component(w: Path) -> str:
    _dirs(w.parent / "target", "global_step55")
    (w / "link").symlink_to(w.parent / "target")
    return f"Saving model checkpoint: {w}/link/global_step55/mp_rank_00_model_states.pt\n"


def _llamafactory_relative(w: Path) -> str:
    # LLaMA-Factory's example configs set a relative output_dir (saves/<model>/<method>/sft);
    # HF prints it as given, relative to the workdir sbatch starts the job in.
    _dirs(w / "saves" / "llama3-8b" / "full" / "sft", "checkpoint-200", "checkpoint-400")
    head = "[INFO|trainer.py:3984] 2026-12-04 09:15:00,118 >> "
    return (f"{head}Saving model checkpoint to saves/llama3-8b/full/sft/checkpoint-200\n"
            f"{head}Saving model checkpoint to saves/llama3-8b/full/sft/checkpoint-400\n"
            f"{head}Model weights saved in saves/llama3-8b/full/sft/checkpoint-400/"
            "model.safetensors\n")


def _relative_dotdot_escape(w: Path) -> str:
    _dirs(w.parent / "escape", "checkpoint-66")
    return "Saving model checkpoint to ../escape/checkpoint-66\n"


@pytest.mark.parametrize(("layout", "banked"), [
    pytest.param(_megatron_save, 80, id="megatron-save-dir-from-log"),
    pytest.param(_llamafactory_relative, 400, id="relative-output-dir-from-log"),
    pytest.param(_relative_dotdot_escape, None, id="not-searched-relative-dotdot-out-of-workdir"),
    pytest.param(_hf_trainer_out, 40, id="hf-output-dir-from-log"),
    pytest.param(_deepspeed_file, 7, id="deepspeed-file-in-step-dir-from-log"),
    pytest.param(_verl_folder, 15, id="verl-step-folder-from-log"),
    pytest.param(_outside_workdir, 77, id="outside-workdir-and-roots-a-root-of-its-own"),
    pytest.param(_dotdot_escape, None, id="not-searched-dotdot-out-of-workdir"),
    pytest.param(_symlink_component, None, id="not-followed-symlink-in-logged-path"),
])
def test_logged_checkpoint_dirs(tmp_path: Path, layout: Callable[[Path], str],
                                banked: int | None) -> None:
    """The checkpoint dir the trainer printed is searched: inside the job's tree without a link
    or a '..', outside it as a root of its own, never by climbing out with '..'."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    log = layout(workdir)
    assert _banked(_collect(workdir, log)) == banked


def test_exports_never_bank_a_step(tmp_path: Path) -> None:
    """``exports/global_step_N`` is reported apart and never raises the banked step."""
    workdir = tmp_path / "run"
    _dirs(workdir / "checkpoints", "global_step_10", "exports/global_step_40")
    raw = _collect(workdir)
    listing = build_listing(raw["listings"], export_listings=raw["exports"],
                            latest_markers=raw["markers"])
    assert (listing.banked_step, listing.export_steps) == (10, (40,))


def test_search_is_bounded_in_directories(tmp_path: Path) -> None:
    """A wide tree (a tensorboard ``runs/`` of many dirs) stops at the visit bound and says so."""
    workdir = tmp_path / "run"
    for i in range(CKPT_VISITS + 20):
        (workdir / "output" / "runs" / f"r{i:04d}").mkdir(parents=True)
    raw = _collect(workdir)
    assert any("search stopped" in str(v) for v in (raw.get("errors") or {}).values())


def test_shipped_script_searches_like_the_module(tmp_path: Path) -> None:
    """The joined ``python3 -`` script finds the nested verl steps and a logged Megatron dir
    exactly as the in-process collector does."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    _verl(workdir)
    log = _megatron_save(workdir)
    in_process = _collect(workdir, log)
    roots = expand_roots(list(DEFAULT_CHECKPOINT_ROOTS), workdir=str(workdir), name=NAME,
                         job_id="7", user="u")
    request = {"tail_bytes": 1 << 16, "min_lines": 1,
               "jobs": [{"id": "7", "stdout": str(workdir / "slurm-7.out"),
                         "workdir": str(workdir), "offset": 0, "checkpoint_roots": roots,
                         "trial_roots": []}]}
    done = subprocess.run([sys.executable, "-"], input=build_collector_script(request),
                          capture_output=True, text=True, check=True, timeout=60)
    shipped = json.loads(done.stdout)["jobs"]["7"]["checkpoints"]
    assert shipped == in_process
    assert sorted(build_listing(shipped["listings"],
                                latest_markers=shipped["markers"]).steps) == [10, 20, 40, 80]


def test_a_named_save_folder_is_the_runs_own_prefix(tmp_path: Path) -> None:
    """Runs launched from one repo share verl's ``checkpoints/<project>/``: another
    experiment's steps there are not this run's once its log names the folder it saves to."""
    workdir = tmp_path / "run"
    other = workdir / "checkpoints" / "gsm8k" / "llama8b-other"
    _dirs(other, "global_step_50", "global_step_100", "global_step_150")
    (other / "latest_checkpointed_iteration.txt").write_text("150")
    mine = workdir / "checkpoints" / "gsm8k" / "qwen7b-exp"
    _dirs(mine, "global_step_10", "global_step_20")
    (mine / "latest_checkpointed_iteration.txt").write_text("20")
    log = ("(TaskRunner pid=24761) local_global_step_folder: "
           "checkpoints/gsm8k/qwen7b-exp/global_step_20\n")
    assert _banked(_collect(workdir, log)) == 20
    assert _banked(_collect(workdir)) == 150  # nothing named: every root's steps, as before


def test_an_empty_named_save_folder_banks_no_sibling_experiment(tmp_path: Path) -> None:
    """A fresh run whose log names its save folder (verl's config dump prints
    ``default_local_dir``) before its first save banks nothing from another experiment beside
    that folder; found replaying verl on the real SLURM, a run at step 20 read banked 500 from
    ``checkpoints/gsm8k/old-exp``. Elsewhere (another root) the search still reads every
    location until the named folder holds a save."""
    workdir = tmp_path / "run"
    other = workdir / "checkpoints" / "gsm8k" / "old-exp"
    _dirs(other, "global_step_250", "global_step_500")
    (other / "latest_checkpointed_iteration.txt").write_text("500")
    (workdir / "checkpoints" / "gsm8k" / "qwen7b-exp").mkdir(parents=True)
    log = ("(TaskRunnerV1 pid=247607)              'default_local_dir': "
           "'checkpoints/gsm8k/qwen7b-exp',\n")
    assert _banked(_collect(workdir, log)) is None
    _dirs(workdir / "ckpts", "global_step_5")
    assert _banked(_collect(workdir, log)) == 5  # another place the launcher may use
    _dirs(workdir / "checkpoints" / "gsm8k" / "qwen7b-exp", "global_step_10")
    assert _banked(_collect(workdir, log)) == 10  # its first save: that folder alone


def test_a_folder_named_at_the_workdir_s_top_keeps_the_other_roots(tmp_path: Path) -> None:
    """A named folder right under the workdir (a tokenizer saved to ``tokenizer``) is no
    experiment among siblings: the workdir's ``output`` root beside it is still read."""
    workdir = tmp_path / "run"
    _dirs(workdir / "output", "checkpoint-40")
    (workdir / "output" / "checkpoint-40" / "trainer_state.json").write_text("{}")
    (workdir / "tokenizer").mkdir(parents=True)
    log = f"Saved tokenizer files to {workdir}/tokenizer\n"
    assert _banked(_collect(workdir, log)) == 40
