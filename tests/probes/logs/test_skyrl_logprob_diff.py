"""SkyRL's rollout/train logprob gap is the row's per-token log-ratio.

SkyRL (NovaSky-AI/SkyRL ``skyrl/train/trainer.py``, ``fwd_logprobs_values_reward``; in
``skyrl-train`` before 2026-03) logs ``policy/rollout_train_logprobs_abs_diff_{mean,max,min,std}``:
``(rollout_logprobs - action_log_probs).abs()`` over the loss-masked response tokens, the
per-token |log ratio| between the rollout engine and the trainer (its Tinker backend names them
``...:mean`` / ``...:max``). Unmapped, a SkyRL row's LogRatio read ``—`` and the log-ratio
signal could not fire. (Not ``rollout_train_prob_diff_mean``, the exp'd mean the rulebook
calls outlier-dominated: that one stays a report-only name.)
"""

from __future__ import annotations

from probes.logs.parse import parse_log

SK = "(skyrl_entrypoint pid=48213) "


def _step(step: int) -> str:
    head = (f"{SK}2026-12-04 14:31:07.412 | INFO     | skyrl.train.utils.tracking:log:189 - "
            f"Step {step}: \n")
    keys = {"policy/grad_norm": "'0.2143'", "policy/policy_entropy": "'0.5127'",
            "policy/rollout_train_logprobs_abs_diff_max": "'0.4102'",
            "policy/rollout_train_logprobs_abs_diff_mean": "'0.0113'",
            "policy/rollout_train_logprobs_abs_diff_min": "'0.0000'",
            "reward/avg_raw_reward": "'0.4062'", "trainer/global_step": str(step)}
    items = sorted(keys.items())
    lines = [f"{SK}{'{' if i == 0 else ' '}{k!r}: {v}{'}' if i == len(items) - 1 else ','}"
             for i, (k, v) in enumerate(items)]
    return head + "\n".join(lines) + "\n"


def test_skyrl_logprob_abs_diff_is_the_log_ratio() -> None:
    values = parse_log(_step(1) + _step(2)).points[-1].values
    assert values["log_ratio_abs_mean"] == 0.0113
    assert "log_ratio_abs_max" not in values  # one outlier token's, not the health range's
    assert "rollout_train_prob_diff_mean" not in values


def _minibatch_step(step: int, forward: bool) -> str:
    """A step of a SkyRL run whose loss skips the policy forward pass (``policy_loss_type``
    ``rollout_is`` / ``dppo``): only the workers' per-mini-batch gap
    ``policy/minibatch_rollout_logprobs_abs_diff_{mean,max,min,std}`` is logged (SkyRL's
    off_policy_correction docs; ``workers/worker_utils.py``)."""
    text = _step(step)
    if not forward:
        return text.replace("rollout_train_logprobs_abs_diff",
                            "minibatch_rollout_logprobs_abs_diff")
    return text.replace("'policy/grad_norm': '0.2143',",
                        "'policy/grad_norm': '0.2143',\n"
                        f"{SK} 'policy/minibatch_rollout_logprobs_abs_diff_mean': '0.0250',")


def test_skyrl_minibatch_logprob_diff_is_the_log_ratio_when_no_forward_pass_ran() -> None:
    """Review of 74089ca: such a run's row read LogRatio '—'."""
    values = parse_log(_minibatch_step(1, False) + _minibatch_step(2, False)).points[-1].values
    assert values["log_ratio_abs_mean"] == 0.0113
    assert "log_ratio_abs_max" not in values


def test_skyrl_forward_pass_logprob_diff_wins_over_the_minibatch_one() -> None:
    values = parse_log(_minibatch_step(1, True) + _minibatch_step(2, True)).points[-1].values
    assert values["log_ratio_abs_mean"] == 0.0113
