"""Trainer metric names mapped onto the contract's canonical names (CONTRACT §4).

Policy: a raw name a trainer prints (SkyRL old and new, verl console, Hugging Face Trainer /
TRL, Megatron iteration lines, OpenRLHF's status dict) maps to at most one canonical name;
names we do not know are dropped, never guessed.
Several raw names can feed one canonical name within a single step (SkyRL <= v0.3 printed
``policy/raw_grad_norm`` beside the clipped ``policy/grad_norm``), so every alias carries a
rank and the best-ranked raw name present wins. User ``[metrics.aliases]`` outrank every
built-in alias.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# rank 0 is the preferred source of a canonical name; higher ranks are fallbacks.
_RANKED_ALIASES: dict[str, tuple[str, int]] = {
    # reward
    "reward/avg_raw_reward": ("reward", 0),
    "critic/score/mean": ("reward", 1),
    "reward": ("reward", 2),
    # policy loss
    "policy/policy_loss": ("policy_loss", 0),
    "actor/pg_loss": ("policy_loss", 0),
    "policy_loss": ("policy_loss", 1),
    "pg_loss": ("policy_loss", 1),
    # entropy
    "policy/policy_entropy": ("entropy", 0),
    "actor/entropy": ("entropy", 0),
    # verl 0.2-0.4.0's name for the mean entropy; EasyR1's, -mean(log p) of the sampled tokens
    "actor/entropy_loss": ("entropy", 1),
    "entropy": ("entropy", 1),
    "policy_entropy": ("entropy", 1),
    "entropy_loss": ("entropy", 2),  # OpenRLHF: the mean entropy (its loss term's value)
    # grad norm: the raw (pre-clipping) value wins when both are printed
    "policy/raw_grad_norm": ("grad_norm", 0),
    "raw_grad_norm": ("grad_norm", 0),
    "policy/grad_norm": ("grad_norm", 1),
    "actor/grad_norm": ("grad_norm", 1),
    "grad_norm": ("grad_norm", 2),
    "grad/norm/total": ("grad_norm", 2),  # Levanter's watch callback: before clipping
    "train/grad_norm": ("grad_norm", 2),  # verl >= 0.6 SFT trainer (sft_trainer.py)
    # NeMo-Aligner's bar postfix (``train_`` + its metrics): clip_gradients' norm before clipping
    "train_grad_norm": ("grad_norm", 0),
    "actor_grad_norm": ("grad_norm", 0),  # OpenRLHF >= 0.9.6: DeepSpeed's, pre-clipping
    # clip ratio: the share of tokens PPO clipped at 1 +- eps (the rulebook's ~0, > 1 % an
    # LR <-> eps_clip mismatch). verl's ``actor/pg_clipfrac`` is gt(pg_losses2, pg_losses1),
    # EasyR1's ``actor/pg_clipfrac_higher`` the same (pg_loss < pg_loss2; "higher": the
    # clipped term won the max). Their ``actor/pg_clipfrac_lower`` is the dual-clip share
    # (A < 0 and the loss capped at clip_ratio_c x A, c = 3): another bound, disjoint from
    # the eps-clipped tokens, so no clip_ratio (left unmapped, as ``*_length/clip_ratio``,
    # the responses cut at max length)
    "policy/ppo_clip_ratio": ("clip_ratio", 0),
    "policy/loss_metrics/clip_ratio": ("clip_ratio", 0),
    "actor/pg_clipfrac": ("clip_ratio", 0),
    "actor/pg_clipfrac_higher": ("clip_ratio", 0),
    "clip_ratio/region_mean": ("clip_ratio", 1),
    # TRL GRPO's loss_type="cispo": the share of tokens whose weight CISPO capped at
    # epsilon_high (its PPO-style losses print clip_ratio/* instead)
    "cispo_clip_ratio": ("clip_ratio", 1),
    "ppo_clip_ratio": ("clip_ratio", 1),
    "clip_ratio": ("clip_ratio", 2),
    # generation length
    "generate/avg_num_tokens": ("avg_num_tokens", 0),
    "response_length/mean": ("avg_num_tokens", 0),
    "completions/mean_length": ("avg_num_tokens", 1),
    "avg_response_length": ("avg_num_tokens", 2),
    "completion_length": ("avg_num_tokens", 2),  # TRL GRPO <= 0.17 (completions/mean_length since)
    "policy/response_length": ("avg_num_tokens", 1),  # SkyRL >= v0.4
    "response_length": ("avg_num_tokens", 2),  # OpenRLHF: the mean response length
    # step time (standard-RL substitute check: timing/*, verl timing_s/*)
    "timing_s/step": ("sec_per_step", 1),
    "timing/step": ("sec_per_step", 1),
    "step_time": ("sec_per_step", 2),  # TRL
    "train/time(s)": ("sec_per_step", 2),  # verl's FSDP SFT trainer: training_step's time
    # spike-mitigation ablations: how often z-clip fired
    "policy/z_clip/triggered": ("z_clip_triggered", 0),
    "z_clip/triggered": ("z_clip_triggered", 1),
    # rollout/train logprob disagreement: reported, never a signal
    "policy/rollout_train_prob_diff_mean": ("rollout_train_prob_diff_mean", 0),
    "rollout_train_prob_diff_mean": ("rollout_train_prob_diff_mean", 1),
    "training/rollout_probs_diff_mean": ("rollout_train_prob_diff_mean", 1),
    # SFT / optimiser bookkeeping
    "loss": ("loss", 0),
    "train/loss": ("loss", 1),
    "lm loss": ("loss", 1),  # Megatron-LM / Megatron-DeepSpeed iteration lines
    "lm_loss": ("loss", 1),  # GPT-NeoX
    "reduced_train_loss": ("loss", 1),  # NeMo 2 (lightning progress printer, NeMo 1 bars)
    "reduced_llm_loss": ("loss", 1),  # XTuner v1: the all-reduced LM loss (local_loss: a rank's)
    "grad norm": ("grad_norm", 2),
    "learning rate": ("learning_rate", 1),
    "learning_rate": ("learning_rate", 0),
    "policy/policy_lr": ("learning_rate", 1),
    "actor/lr": ("learning_rate", 1),
    "lr": ("learning_rate", 2),
    "train/lr": ("learning_rate", 1),  # verl >= 0.6 SFT trainer
    "optim/learning_rate": ("learning_rate", 1),  # Levanter (tracker/helpers.py)
    "train_lr": ("learning_rate", 1),  # NeMo-Aligner's bar postfix
    "actor_lr": ("learning_rate", 2),  # OpenRLHF
    "epoch": ("epoch", 0),
    "trainer/epoch": ("epoch", 0),
    # NeMo-RL's ``📊 Training Results:`` bullets (GRPO/SFT/DPO print these to the console;
    # its per-step metrics otherwise go to wandb/tensorboard only)
    "Loss": ("loss", 0),  # NeMo-RL and prime-rl: the step's (policy) loss
    "Avg Reward": ("reward", 0),
    "Avg Total Reward": ("reward", 1),  # NeMo-RL with dynamic sampling (beside the filtered)
    "Mean Generation Length": ("avg_num_tokens", 0),
    "Total step time": ("sec_per_step", 1),  # its ``⏱️  Timing:`` bullet (``120.50s``)
    # prime-rl's ``Step N | ... | Label value | ...`` lines (trainer and orchestrator)
    "Entropy": ("entropy", 0),
    "Grad. Norm": ("grad_norm", 0),  # clip_grad_norm_'s return: the norm before clipping
    "LR": ("learning_rate", 0),
    "Reward": ("reward", 0),
    "training/epoch": ("epoch", 0),
    # AReaL's stats table (its PPO actor's stats_tracker keys)
    "ppo_actor/task_reward/avg": ("reward", 0),
    "ppo_actor/update/actor_loss/avg": ("policy_loss", 0),
    "ppo_actor/update/entropy/avg": ("entropy", 0),
    "ppo_actor/update/clip_ratio/avg": ("clip_ratio", 0),
    "ppo_actor/update/grad_norm": ("grad_norm", 1),
    "ppo_actor/update/behave_imp_weight/avg": ("imp_ratio_mean", 1),  # pi_prox / pi_behave
    "ppo_actor/update/lr": ("learning_rate", 1),
    # slime's ``step N: {...}`` (train/) and ``rollout R: {...}`` (rollout/) lines
    "train/pg_loss": ("policy_loss", 0),
    "train/entropy_loss": ("entropy", 1),  # the mean entropy (its loss term's value)
    "train/pg_clipfrac": ("clip_ratio", 0),
    "train/train_rollout_logprob_abs_diff": ("log_ratio_abs_mean", 1),  # |train - rollout|
    # (its ``train/tis`` is the unclamped exp(train - rollout) mean, outlier-dominated as
    # rollout_train_prob_diff_mean: no imp_ratio_mean; the clamped share is the capped one)
    "train/tis_clipfrac": ("imp_ratio_capped_fraction", 1),
    "train/lr-pg_0": ("learning_rate", 2),
    "rollout/raw_reward": ("reward", 0),
    "rollout/response_lengths": ("avg_num_tokens", 1),
    # ROLL (roll/pipeline/rlvr/actor_pg_worker.py, roll/utils/metrics/metrics_manager.py):
    # "@sum"/"@max" name the reduce op across workers; grad norm is the training worker's
    # (``actor_train/grad_norm``, Megatron's optimizer.step() before clipping)
    "actor/pg_loss@sum": ("policy_loss", 0),
    "actor_train/grad_norm": ("grad_norm", 1),
    "critic/entropy/mean": ("entropy", 1),
    "actor/ppo_ratio_clipfrac@sum": ("clip_ratio", 0),
    "token/response_length/mean": ("avg_num_tokens", 1),
    # Composer / llm-foundry (its trainer's loss, OptimizerMonitor's global grad norm) and
    # AI2's OLMo console blocks (probes.logs.bracket_lines); ``sec_per_step`` is the block
    # reader's 1 / Composer's ``throughput/batches_per_sec``
    "loss/train/total": ("loss", 0),
    "l2_norm/grad/global": ("grad_norm", 1),
    "train/CrossEntropyLoss": ("loss", 1),
    "optim/total_grad_norm": ("grad_norm", 1),
    "optim/learning_rate_group0": ("learning_rate", 1),
    "sec_per_step": ("sec_per_step", 2),
    # open-instruct's GRPO panel (open_instruct/grpo_fast.py, data_loader.py): ``scores`` is
    # the mean reward of the step's responses; its entropy, policy loss and clip fraction are
    # token-weighted means over the learners; ``val/sequence_lengths`` the mean response length
    "scores": ("reward", 1),
    "policy/entropy_avg": ("entropy", 0),
    "loss/policy_avg": ("policy_loss", 0),
    "optim/grad_norm": ("grad_norm", 1),
    "policy/clipfrac_avg": ("clip_ratio", 0),
    "val/sequence_lengths": ("avg_num_tokens", 1),
    # TRL's PPO family (experimental PPO, Online DPO, XPO, Nash-MD): ``objective/scores`` is
    # the mean score before the KL penalty (``objective/rlhf_reward`` adds it: not the raw
    # reward); ``objective/entropy`` is -logprobs.sum(1).mean(), a completion's summed token
    # entropy, the only entropy Online DPO prints (PPO's per-token policy/entropy_avg wins)
    "objective/scores": ("reward", 1),
    "objective/entropy": ("entropy", 2),
}

# Families printed under varying prefixes (fork-specific ``tis/``, ``policy/tis/``, ...).
_SUFFIX_PATTERNS: tuple[tuple[re.Pattern[str], str, int], ...] = (
    (re.compile(r"^reward/avg_pass_at_\d+$"), "pass_at_n", 0),
    (re.compile(r"^(?:.*/)?log_ratio_abs_mean$"), "log_ratio_abs_mean", 0),
    (re.compile(r"^(?:.*/)?log_ratio_abs_p99$"), "log_ratio_abs_p99", 0),
    (re.compile(r"^(?:.*/)?log_ratio_abs_max$"), "log_ratio_abs_max", 0),
    (re.compile(r"^(?:.*/)?n_tokens_dp_gt_50pct$"), "n_tokens_dp_gt_50pct", 0),
    (re.compile(r"^(?:.*/)?imp_ratio_mean$"), "imp_ratio_mean", 0),
    (re.compile(r"^(?:.*/)?imp_ratio_capped_fraction$"), "imp_ratio_capped_fraction", 0),
    # SkyRL's ``is_ratio_mean`` and verl's ``rollout_is_mean`` are means of the raw per-token
    # ratio, taken before any TIS cap (exp(+-20) bounds it): one outlier token sets them, as it
    # sets ``rollout_train_prob_diff_mean``, so they are not the capped ``imp_ratio_mean``
    # (SkyRL off_policy_correction_utils.py; verl rollout_corr_helper.py: "metrics (BEFORE
    # truncation ...)")
    (re.compile(r"^policy/loss_metrics/is_ratio_mean$"), "imp_ratio_uncapped_mean", 1),
    # SkyRL's TIS: the share of tokens (sequences, under sequence-level TIS) whose weight hit
    # its cap, in the Step dict (policy/loss_metrics/) and the status line (loss_metrics/)
    (re.compile(r"^(?:policy/)?loss_metrics/tis_token_clip_high_ratio$"),
     "imp_ratio_capped_fraction", 1),
    (re.compile(r"^(?:policy/)?loss_metrics/tis_seq_clip_high_ratio$"),
     "imp_ratio_capped_fraction", 2),
    # TRL GRPO >= 0.23 with vLLM: |trainer - rollout| per-token logprob, and exp of it (the
    # importance-sampling correction's ratio, clamped in its truncate modes). Its max (and
    # SkyRL's below) is one token's over the whole batch: a single outlier token, not the
    # bounded per-token max the health range (< 0.5) reads, so it is ``log_ratio_batch_max``,
    # which only the log-ratio signal's "max stays bounded" clause reads, against its window
    (re.compile(r"^sampling/sampling_logp_difference/mean$"), "log_ratio_abs_mean", 1),
    (re.compile(r"^sampling/sampling_logp_difference/max$"), "log_ratio_batch_max", 1),
    (re.compile(r"^policy/rollout_train_logprobs_abs_diff_max(?::max)?$"),
     "log_ratio_batch_max", 1),
    (re.compile(r"^sampling/importance_sampling_ratio/mean$"), "imp_ratio_mean", 1),
    # SkyRL: |rollout - train| logprob over the response tokens (its Tinker backend adds
    # ``:mean``/``:max``); not the exp'd ``rollout_train_prob_diff_mean``
    (re.compile(r"^policy/rollout_train_logprobs_abs_diff_mean(?::mean)?$"),
     "log_ratio_abs_mean", 1),
    # ... and its workers' per-mini-batch gap, the only one logged when the loss skips the
    # policy forward pass (policy_loss_type rollout_is / dppo): the same per-token |log ratio|
    (re.compile(r"^policy/minibatch_rollout_logprobs_abs_diff_mean$"), "log_ratio_abs_mean", 2),
    # verl's rollout correction (TIS): the mean pi_train/pi_rollout weight before truncation,
    # ``rollout_corr/`` since 2025-11, ``mismatch/`` before, ``actor/rollout_corr/`` when the
    # actor computes it (bypass mode); its _seq_/_std/_max siblings are not the mean
    (re.compile(r"^(?:actor/)?(?:rollout_corr|mismatch)/rollout_is_mean$"),
     "imp_ratio_uncapped_mean", 1),
    # ... and the fraction of those weights above the upper threshold, i.e. truncated (capped):
    # verl's docs, "rollout_is_ratio_fraction_high: fraction of weights exceeding upper threshold"
    (re.compile(r"^(?:actor/)?(?:rollout_corr|mismatch)/rollout_is_ratio_fraction_high$"),
     "imp_ratio_capped_fraction", 1),
    (re.compile(r"^(?:.*/)?z_?clip/triggered$"), "z_clip_triggered", 2),
    # per-token log-ratio positional buckets (the rulebook: "position buckets even")
    *((re.compile(rf"^(?:.*/)?log_ratio_abs_mean[_/](?:pos|position)(?:_bucket)?[_/]?{i}$"),
       f"log_ratio_pos_{i}", 0) for i in range(8)),
    # Composer's LRMonitor: ``lr-<optimizer class>/group<i>``, the first param group's
    (re.compile(r"^lr-[A-Za-z]\w{0,60}/group0$"), "learning_rate", 1),
    # TRL per-reward-function means: only used when the trainer printed no plain ``reward``
    (re.compile(r"^rewards/[^/]+/mean$"), "reward", 3),
)

BUILTIN_ALIASES: dict[str, str] = {raw: canon for raw, (canon, _) in _RANKED_ALIASES.items()}
"""Raw trainer name -> canonical name (exact names; prefixed families are matched by pattern)."""

CONTRACT_NAMES = frozenset({
    "reward", "pass_at_n", "policy_loss", "entropy", "grad_norm", "clip_ratio", "imp_ratio_mean",
    "imp_ratio_capped_fraction", "log_ratio_abs_mean", "log_ratio_abs_p99", "log_ratio_abs_max",
    "n_tokens_dp_gt_50pct", "avg_num_tokens", "rollout_train_prob_diff_mean",
    "loss", "learning_rate", "epoch", "sec_per_step",
    "chunks_done", "chunks_total", "trials", "avg_turns", "mean_reward", "exc_pct",
    "trials_total", "pass_rate", "top_exception",
})
"""CONTRACT section 4's canonical metric names."""
CANONICAL_NAMES = CONTRACT_NAMES | frozenset(
    {canon for canon, _ in _RANKED_ALIASES.values()}
    | {canon for _, canon, _ in _SUFFIX_PATTERNS})
"""What a ``[metrics.aliases]`` entry may map a raw name onto: the contract's names and the
built-in aliases' targets (positional log-ratio buckets, ``z_clip_triggered``)."""

_USER_RANK = -1
_CACHE_CAP = 4096
_builtin_cache: dict[str, tuple[str, int] | None] = {}
"""Built-in answers per raw name: trainers repeat the same few hundred names every step."""


def _builtin(raw: str) -> tuple[str, int] | None:
    if raw in _builtin_cache:
        return _builtin_cache[raw]
    found = _RANKED_ALIASES.get(raw)
    if found is None and len(raw) <= 256:
        found = next(((c, r) for p, c, r in _SUFFIX_PATTERNS if p.match(raw)), None)
    if len(_builtin_cache) >= _CACHE_CAP:
        _builtin_cache.clear()  # a log inventing names without end must not grow memory
    _builtin_cache[raw] = found
    return found


def _ranked(raw: str, extra: Mapping[str, str]) -> tuple[str, int] | None:
    """Return (canonical, rank) for one raw name, or None when it is not a metric we read."""
    user = extra.get(raw) if extra else None
    if user is not None:
        return user, _USER_RANK
    return _builtin(raw)


def canonical_name(raw: str, extra: Mapping[str, str]) -> str | None:
    """Map one raw trainer name to its canonical name; user aliases in ``extra`` win."""
    found = _ranked(raw, extra)
    return found[0] if found is not None else None


def canonical_plan(names: Iterable[str], extra: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """(canonical, raw name) pairs, canonical names in first-seen order, each with its
    best-ranked raw name: which value ``canonical_values`` keeps for a step with these names.

    A trainer prints the same names every step, so a caller may keep the plan per name tuple.
    """
    best: dict[str, tuple[int, str]] = {}
    for name in names:
        found = _ranked(name, extra)
        if found is None:
            continue
        canonical, rank = found
        held = best.get(canonical)
        if held is None or rank < held[0]:
            best[canonical] = (rank, name)
    return tuple((canonical, name) for canonical, (_, name) in best.items())


def canonical_values(raw: Mapping[str, float], extra: Mapping[str, str]) -> dict[str, float]:
    """Turn one step's raw metrics into canonical ones, keeping the best-ranked source of each."""
    return {canonical: raw[name] for canonical, name in canonical_plan(raw, extra)}
