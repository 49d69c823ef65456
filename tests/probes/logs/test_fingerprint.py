"""Run fingerprints read from the config dumps trainers print, one row per trainer format.

Fixtures: verl-0.9.1/config_*.log are verl's REAL generated config resolved by OmegaConf and
pprint'ed as verl's TaskRunner does; the TRL/HF, Megatron, DeepSpeed and SkyRL dumps are rebuilt
from those libraries' printing code (see tests/fixtures/generators/README.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.logs.fingerprint import read_fingerprint
from probes.logs.parse import parse_log
from probes.logs.precision import decimals, precise_merge

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _fingerprint(rel: str) -> Any:
    summary = parse_log((FIXTURES / rel).read_bytes())
    assert summary.fingerprint is not None
    return summary.fingerprint


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("verl-0.9.1/config_a.log",  # real library
         {"trainer": "verl", "model": "Qwen/Qwen2.5-7B-Instruct", "nodes": 2, "gpus_per_node": 8,
          "tp": 2, "prompts_per_step": 32, "samples_per_prompt": 8, "rollouts_per_step": 256}),
        ("verl-0.9.1/config_b.log",  # real library, relaunched with another model
         {"trainer": "verl", "model": "Qwen/Qwen3-8B", "rollouts_per_step": 256}),
        ("skyrl-rebuilt/config_yaml.log",  # rebuilt: SkyRL keys, OmegaConf.to_yaml
         {"trainer": "skyrl", "model": "Qwen/Qwen2.5-1.5B-Instruct", "nodes": 1,
          "gpus_per_node": 8, "tp": 2, "prompts_per_step": 64, "samples_per_prompt": 5,
          "rollouts_per_step": 320}),
        ("trl-1.16.0/grpo_args_rebuilt.out",  # rebuilt args + banner, real TRL steps
         {"trainer": "hf", "samples_per_prompt": 4, "rollouts_per_step": 32,
          "prompts_per_step": 8}),
        ("megatron-rebuilt/args.log",
         {"trainer": "megatron", "model": "meta-llama/Meta-Llama-3-8B", "world_size": 16,
          "tp": 2, "pp": 2, "dp": 4, "rollouts_per_step": None}),
        ("deepspeed-rebuilt/config.log",
         {"trainer": "deepspeed", "world_size": 8, "rollouts_per_step": None}),
        # rebuilt: OpenRLHF >= 0.10 prints its hierarchized args, a nested SimpleNamespace repr
        ("openrlhf-rebuilt/ppo_args_namespace.log",
         {"trainer": "openrlhf", "model": "Qwen/Qwen2.5-7B-Instruct", "nodes": 2,
          "gpus_per_node": 8, "tp": 2, "prompts_per_step": 64, "samples_per_prompt": 8,
          "rollouts_per_step": 512}),
    ],
)
def test_fingerprint_per_trainer(fixture: str, expected: dict[str, Any]) -> None:
    """Model, geometry and rollouts per step come from each trainer's own config dump."""
    fingerprint = _fingerprint(fixture)
    assert {k: getattr(fingerprint, k) for k in expected} == expected


def test_verl_dump_keeps_the_config_and_the_steps() -> None:
    """The pprint'ed Hydra config is read whole, and the step lines after it still parse."""
    summary = parse_log((FIXTURES / "verl-0.9.1/config_a.log").read_bytes())
    assert summary.fingerprint is not None
    config = summary.fingerprint.config
    assert config["data.train_batch_size"] == "32" and config["actor_rollout_ref.rollout.n"] == "8"
    assert config["trainer.experiment_name"] == "grpo-qwen7b-a"
    assert len(config) > 500 and [p.step for p in summary.points] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # keys at any depth, dotted; a value no literal (a PosixPath) is left out
        ("namespace(a=namespace(b=namespace(c=1)), d='x', p=PosixPath('/ckpt'), e=None)",
         {"a.b.c": "1", "d": "x", "e": "null"}),
        # a logger's prefix before it is no part of it
        ("[INFO] args: namespace(rollout=namespace(batch_size=32))", {"rollout.batch_size": "32"}),
        # cut, or followed by other text: no config
        ("namespace(actor=namespace(model_name_or_path='Q'", None),
        ("namespace(a=1) and more", None),
    ],
)
def test_a_namespace_repr_is_a_config(line: str, expected: dict[str, str] | None) -> None:
    """``types.SimpleNamespace``'s repr (OpenRLHF >= 0.10's args) is read as nested keys."""
    fingerprint = read_fingerprint([line])
    got = None if fingerprint is None else {
        k: v for k, v in fingerprint.config.items() if k in (expected or {})}
    assert got == expected


def test_trl_rollouts_without_banner_need_world_size() -> None:
    """Without the banner, per-device x accumulation needs a printed world size; never guessed."""
    dump = "GRPOConfig(\ngradient_accumulation_steps=2,\nnum_generations=4,\n" \
           "per_device_train_batch_size=8,\n)\n"
    fingerprint = read_fingerprint(dump.splitlines())
    assert fingerprint is not None and fingerprint.rollouts_per_step is None
    fingerprint = read_fingerprint((dump[:-2] + "world_size=2,\n)\n").splitlines())
    assert fingerprint is not None and fingerprint.rollouts_per_step == 32


@pytest.mark.parametrize(
    ("line", "image"),
    [
        ("pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.05-py3",
         "nvcr.io#nvidia/pytorch:24.05-py3"),
        ("+ srun --container-image=/images/verl-0.9.1.sqsh python3 -m verl.trainer.main_ppo",
         "/images/verl-0.9.1.sqsh"),
        ("+ apptainer exec --nv /scratch/img/skyrl-0.4.sif python -m skyrl_train",
         "/scratch/img/skyrl-0.4.sif"),
        ("+ IMAGE=registry/verl:0.9.1", "registry/verl:0.9.1"),  # set -x echo of the variable
        ("image: nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"),
        ("+ enroot start --image foo/bar:1 train.sh", "foo/bar:1"),
    ],
)
def test_image_from_the_launch_lines(line: str, image: str) -> None:
    """The container image is read from pyxis, --container-image and apptainer lines."""
    fingerprint = read_fingerprint([line])
    assert fingerprint is not None and fingerprint.image == image


@pytest.mark.parametrize(
    "text",
    [
        "{'loss': '0.5', 'grad_norm': '0.3', 'learning_rate': '1e-05', 'epoch': '0.1'}",  # metrics
        "WARNING: disk almost full\nINFO: retrying\nNote: nothing",  # key: value chatter
        "step:1 - actor/entropy:0.5 - critic/score/mean:0.3",  # a verl metric line
        "{'a': {'b': ",  # a dump cut off by the tail
        "Writing image shards: 100%|##########| 1/1\nimage_size: 224",  # not an image name
    ],
)
def test_not_a_config_dump(text: str) -> None:
    """Flat metric dicts, chatter and a truncated dump give no fingerprint."""
    assert read_fingerprint(text.splitlines()) is None


def test_skyrl_full_precision_reward_beats_the_display_value() -> None:
    """SkyRL prints the reward at full precision and again as '0.2664': the full one is kept."""
    summary = parse_log((FIXTURES / "skyrl-rebuilt/console_v03.log").read_bytes())
    assert summary.points[0].values["reward"] == 0.26643798508224387


@pytest.mark.parametrize(
    ("line", "step", "kept"),
    [
        ({"r": 0.26643798508224387}, {"r": 0.2664}, 0.26643798508224387),
        ({"r": 0.5000001}, {"r": 0.5}, 0.5000001),  # '0.5000' display agrees: finer wins
        ({"r": 0.31}, {"r": 0.2664}, 0.2664),  # disagree: the step dict is the record
        ({"r": 0.26}, {"r": 0.2664}, 0.2664),  # the line is coarser
        ({}, {"r": 0.2664}, 0.2664),
    ],
)
def test_precise_merge(
    line: dict[str, float], step: dict[str, float], kept: float
) -> None:
    """The more precise printing of one value wins only when the two agree."""
    assert precise_merge(line, step)["r"] == kept


@pytest.mark.parametrize(
    ("value", "places"), [(0.2664, 4), (0.5, 1), (3.0, 1), (1e-06, 6), (0.26643798508224387, 17)],
)
def test_decimals(value: float, places: int) -> None:
    """Decimal places of the shortest repr (a lower bound on what was printed)."""
    assert decimals(value) == places


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # TRL's ModelConfig dataclass repr on one line (rebuilt from the dataclass's default repr)
        ("ModelConfig(model_name_or_path='Qwen/Qwen2.5-0.5B', model_revision='main', "
         "torch_dtype=None, lora_target_modules=['q', 'v'], trust_remote_code=False)",
         {"model": "Qwen/Qwen2.5-0.5B"}),
        # OpenRLHF-style argparse Namespace: rollout_batch_size x n_samples_per_prompt
        ("Namespace(pretrain='meta-llama/Llama-3-8B', rollout_batch_size=128, "
         "n_samples_per_prompt=8, micro_train_batch_size=2)",
         {"model": "meta-llama/Llama-3-8B", "rollouts_per_step": 1024}),
        # a batch script's `set -x` echo of verl's Hydra overrides
        ("+ python3 -m verl.trainer.main_ppo data.train_batch_size=64 actor_rollout_ref.rollout.n=4"
         " actor_rollout_ref.model.path=Qwen/Qwen3-4B trainer.nnodes=1 trainer.n_gpus_per_node=4",
         {"trainer": "verl", "model": "Qwen/Qwen3-4B", "nodes": 1, "gpus_per_node": 4,
          "rollouts_per_step": 256}),
        # pprint writes non-finite floats bare; the dump is still read
        ("{'trainer': {'nnodes': 2, 'max_norm': inf}, 'data': {'train_batch_size': 16}}",
         {"nodes": 2}),
    ],
)
def test_one_line_reprs_and_launch_overrides(line: str, expected: dict[str, Any]) -> None:
    """Dataclass/Namespace reprs and echoed Hydra overrides are read like a dump."""
    fingerprint = read_fingerprint([line])
    assert fingerprint is not None
    assert {k: getattr(fingerprint, k) for k in expected} == expected


def test_echoed_key_values_outside_a_launch_line_are_ignored() -> None:
    """Near-miss: ``a.b=c`` on a line that launches nothing is not an override."""
    assert read_fingerprint(["export FOO.bar=1 and data.train_batch_size=64 noted"]) is None


def test_the_same_setting_reads_the_same_from_any_dump() -> None:
    """An echoed override and a pprint'ed dump spell values alike (1e-6 = 1e-06, False = false)."""
    echoed = read_fingerprint(["+ python3 -m verl.trainer.main_ppo actor.optim.lr=1e-6 "
                               "trainer.val_before_train=False data.max_prompt_length=512"])
    dumped = read_fingerprint(["{'actor': {'optim': {'lr': 1e-06}}, 'trainer': "
                               "{'val_before_train': False}, 'data': {'max_prompt_length': 512}}"])
    assert echoed is not None and dumped is not None and echoed.config == dumped.config


def test_pass_at_k_from_the_logged_key() -> None:
    """SkyRL (rebuilt) logs ``reward/avg_pass_at_8``: the N shown with pass@N is 8."""
    summary = parse_log((FIXTURES / "skyrl-rebuilt/console_v03.log").read_bytes())
    assert summary.fingerprint is not None and summary.fingerprint.pass_at_k == 8
    assert summary.fingerprint.model is None  # nothing else was printed: nothing guessed
