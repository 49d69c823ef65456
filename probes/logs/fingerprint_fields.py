"""Which printed keys give which fingerprint field, and the fingerprint built from them.

Policy (``probes.logs.fingerprint``): a field comes from the first of its keys that the dumps
printed with a value; nothing is guessed, so a value not printed stays ``None``. The rollouts
per step are prompts x samples per prompt; TRL's, the completions of one optimizer step (HF's
``Total train batch size`` banner, else ``per_device_train_batch_size`` x
``gradient_accumulation_steps`` x ``world_size``), with ``num_generations`` samples per prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from probes.models import RunFingerprint

MODEL_KEYS = (
    "actor_rollout_ref.model.path", "trainer.policy.model.path", "actor.model_name_or_path",
    "model_name_or_path",
    "model.path", "pretrain", "model_name", "model", "tokenizer_model", "load",
)
IMAGE_KEYS = ("container_image", "image", "docker_image")
NODE_KEYS = ("trainer.nnodes", "trainer.placement.policy_num_nodes", "actor.num_nodes", "nnodes",
             "num_nodes")
GPU_KEYS = (
    "trainer.n_gpus_per_node", "trainer.placement.policy_num_gpus_per_node",
    "actor.num_gpus_per_node", "n_gpus_per_node",
    "nproc_per_node", "num_gpus_per_node", "gpus_per_node",
)
TP_KEYS = (
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "generator.inference_engine_tensor_parallel_size", "vllm.tensor_parallel_size",
    "tensor_model_parallel_size",
    "tensor_parallel_size",
)
PP_KEYS = (
    "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
    "actor_rollout_ref.rollout.pipeline_model_parallel_size",
    "pipeline_model_parallel_size", "pipeline_parallel_size",
)
DP_KEYS = ("actor_rollout_ref.rollout.data_parallel_size", "data_parallel_size")
WORLD_KEYS = ("world_size",)
PROMPT_KEYS = ("data.train_batch_size", "trainer.train_batch_size", "rollout_batch_size",
               "rollout.batch_size")
SAMPLE_KEYS = (
    "actor_rollout_ref.rollout.n", "generator.n_samples_per_prompt", "n_samples_per_prompt",
    "rollout.n_samples_per_prompt",
    "num_generations",
)


def _image_key(config: Mapping[str, str]) -> str | None:
    """An ``image`` / ``container_image`` entry at any depth of the config."""
    for key, value in config.items():
        if key.rsplit(".", 1)[-1] in IMAGE_KEYS and value not in ("", "null"):
            return value
    return None


def _trainer_of(config: Mapping[str, str]) -> str | None:
    if any(k.startswith("actor_rollout_ref.") for k in config):
        return "verl"
    if "generator.n_samples_per_prompt" in config or "trainer.policy.model.path" in config:
        return "skyrl"
    if "rollout.n_samples_per_prompt" in config and "actor.model_name_or_path" in config:
        return "openrlhf"  # >= 0.10's hierarchized args
    return None


def _first(config: Mapping[str, str], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = config.get(key)
        if value not in (None, "", "null"):
            return value
    return None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    cleaned = text.replace(",", "").strip()
    try:
        number = float(cleaned)
    except ValueError:
        return None
    return int(number) if number.is_integer() and 0 < number < 1e12 else None


def _build(
    config: Mapping[str, str], trainer: str | None, image: str | None, banner: int | None
) -> RunFingerprint:
    def num(keys: Sequence[str]) -> int | None:
        return _int(_first(config, keys))

    prompts, samples = num(PROMPT_KEYS), num(SAMPLE_KEYS)
    world = num(WORLD_KEYS)
    rollouts = prompts * samples if prompts and samples else None
    if rollouts is None and "num_generations" in config:
        # TRL: every sample of an optimizer step is a completion; prompts = that / generations
        per_device = num(("per_device_train_batch_size",))
        accumulation = num(("gradient_accumulation_steps",)) or 1
        rollouts = banner or (per_device * accumulation * world
                              if per_device and world else None)
        prompts = rollouts // samples if rollouts and samples and rollouts % samples == 0 else None
    return RunFingerprint(
        trainer=trainer, model=_first(config, MODEL_KEYS), image=image,
        nodes=num(NODE_KEYS), gpus_per_node=num(GPU_KEYS), world_size=world,
        tp=num(TP_KEYS), pp=num(PP_KEYS), dp=num(DP_KEYS),
        prompts_per_step=prompts, samples_per_prompt=samples, rollouts_per_step=rollouts,
        config=dict(config),
    )
