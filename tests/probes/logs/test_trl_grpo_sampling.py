"""TRL GRPO's vLLM sampling-correction metrics are the row's TIS and log-ratio columns.

Since TRL 0.23 (huggingface/trl ``grpo_trainer.py``, ``_compute_loss``/``_generate_and_score``)
a GRPO run generating with vLLM logs, each step, ``sampling/sampling_logp_difference/mean`` and
``/max`` (``torch.abs(old_per_token_logps - sampling_per_token_logps)`` over the completion
tokens: the per-token |log ratio| between the trainer and the rollout engine) and
``sampling/importance_sampling_ratio/{min,mean,max}`` (``exp`` of that difference, clamped to
the correction's cap in the truncate modes: the TIS importance ratio). Neither was read: every
TRL GRPO row showed no TIS log-ratio, which the rulebook makes mandatory for RL rows.
"""

from __future__ import annotations

from probes.logs.parse import parse_log

_DICT = ("{'loss': 0.0123, 'grad_norm': 0.5312, 'learning_rate': 1e-06, 'num_tokens': 123456.0, "
         "'completions/mean_length': 312.5, 'completions/min_length': 40.0, "
         "'completions/max_length': 1024.0, 'completions/clipped_ratio': 0.0625, "
         "'rewards/accuracy_reward/mean': 0.4375, 'rewards/accuracy_reward/std': 0.4961, "
         "'reward': 0.4375, 'reward_std': 0.3012, 'frac_reward_zero_std': 0.25, "
         "'sampling/sampling_logp_difference/mean': 0.0123, "
         "'sampling/sampling_logp_difference/max': 0.4567, "
         "'sampling/importance_sampling_ratio/min': 0.61, "
         "'sampling/importance_sampling_ratio/mean': 1.0021, "
         "'sampling/importance_sampling_ratio/max': 2.0, 'kl': 0.0011, 'entropy': 0.5521, "
         "'clip_ratio/low_mean': 0.0, 'clip_ratio/low_min': 0.0, 'clip_ratio/high_mean': 0.0, "
         "'clip_ratio/high_max': 0.0, 'clip_ratio/region_mean': 0.0, 'epoch': 0.05}\n")


def test_trl_sampling_metrics_are_the_tis_and_log_ratio() -> None:
    text = "".join(f" {k}%|          | {k}/200 [01:40<31:40, 10.00s/it]\n{_DICT}" for k in (1, 2))
    values = parse_log(text).points[-1].values
    assert values["log_ratio_abs_mean"] == 0.0123
    assert "log_ratio_abs_max" not in values  # one outlier token's, not the health range's
    assert values["imp_ratio_mean"] == 1.0021
    assert values["entropy"] == 0.5521 and values["reward"] == 0.4375
