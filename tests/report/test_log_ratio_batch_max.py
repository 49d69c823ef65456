"""The log-ratio signal's "max stays bounded" clause read from a batch-wide max (CONTRACT §5).

The rulebook fires ``signal:log_ratio`` when ``log_ratio_abs_mean`` doubles its window "while
max stays bounded": a mean lifted by a few runaway tokens is not the broad drift it reads.
SkyRL (``policy/rollout_train_logprobs_abs_diff_max``, NovaSky-AI/SkyRL 2026-08) and TRL's
GRPOTrainer with vLLM (``sampling/sampling_logp_difference/max``, 2026-07) print the largest
|train - rollout| logprob gap of the whole batch: one token's, so never the per-token
``log_ratio_abs_max`` whose health range (< 0.5) the rulebook gives, and left unmapped. But
judged against its own window, as the clause judges the max, it says whether the max stayed
bounded. Replayed as a real SLURM job (SkyRL, its mean 3.8x its window while its batch max
went from ~3 to 140 nats, with an entropy drop), the run read ``collapse`` on
``signal:log_ratio`` + ``signal:entropy``: the unread max counted as bounded.
"""

from __future__ import annotations

import pprint

import pytest

from probes.logs.metric_names import canonical_values
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

RAY = "(skyrl_entrypoint pid=48213) "


@pytest.mark.parametrize("raw", [
    "policy/rollout_train_logprobs_abs_diff_max",  # SkyRL's Step dict
    "policy/rollout_train_logprobs_abs_diff_max:max",  # its Tinker backend
    "sampling/sampling_logp_difference/max",  # TRL GRPO with vLLM
])
def test_a_batch_max_is_no_per_token_max(raw: str) -> None:
    """Read as the batch's max, never as the contract's ``log_ratio_abs_max``."""
    assert canonical_values({raw: 3.2}, {}) == {"log_ratio_batch_max": 3.2}


def _skyrl_log(means: list[float], maxes: list[float], entropies: list[float]) -> str:
    """SkyRL >= v0.4's ``Step N:`` dicts (floats as ``ConsoleLogger.stringify_floats``
    writes them, ``{x:.4f}``)."""
    lines = [RAY + "INFO | skyrl.train.entrypoints.main_base:run:301 - Total training steps: 100"]
    for step, (mean, top, ent) in enumerate(zip(means, maxes, entropies, strict=True), start=1):
        metrics = {"policy/grad_norm": 0.21, "policy/policy_entropy": ent,
                   "policy/policy_loss": -0.01, "reward/avg_raw_reward": 0.3,
                   "policy/rollout_train_logprobs_abs_diff_mean": mean,
                   "policy/rollout_train_logprobs_abs_diff_max": top,
                   "trainer/global_step": step}
        lines.append(RAY + f"INFO | skyrl.train.utils.tracking:log:189 - Step {step}: ")
        body = pprint.pformat({k: f"{v:.4f}" if isinstance(v, float) else v
                               for k, v in metrics.items()})
        lines.extend(RAY + line for line in body.split("\n"))
    return "\n".join(lines) + "\n"


STEADY = [0.0121, 0.0125, 0.0119, 0.0123, 0.0122, 0.0124, 0.0120, 0.0122, 0.0123, 0.0121]
ENTROPY = [0.58] * 10 + [0.38]


def test_a_mean_lifted_by_a_runaway_max_is_no_log_ratio_signal() -> None:
    text = _skyrl_log([*STEADY, 0.047], [3.1] * 10 + [140.0], ENTROPY)
    report = judge(_from_log(text, name="rl-skyrl")).report
    assert "signal:log_ratio" not in report.flags
    assert "collapse" not in report.flags
    assert "signal:entropy" in report.flags
    assert "log_ratio_abs_max" not in report.metrics


def test_a_mean_rising_under_a_bounded_max_still_fires() -> None:
    """Near miss: the same rise with the batch max where it was is the signal, and with the
    entropy drop a collapse."""
    text = _skyrl_log([*STEADY, 0.047], [3.1] * 10 + [3.4], ENTROPY)
    report = judge(_from_log(text, name="rl-skyrl")).report
    assert {"signal:log_ratio", "signal:entropy", "collapse"} <= set(report.flags)


def test_a_healthy_batch_max_is_no_log_ratio_health_warning() -> None:
    """A batch max of ~3 nats is what healthy SkyRL runs print: not the per-token max's
    ``< 0.5`` health range."""
    text = _skyrl_log([*STEADY, 0.0122], [3.1] * 11, [0.58] * 11)
    report = judge(_from_log(text, name="rl-skyrl")).report
    assert report.verdict == "healthy", report.trend
