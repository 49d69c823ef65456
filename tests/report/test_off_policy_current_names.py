"""Off-policy and clip metrics under the names current trainers print (CONTRACT §4, §6).

SkyRL (NovaSky-AI/SkyRL ``skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py``,
2026-08) logs the share of tokens whose TIS weight hit its cap as
``tis_token_clip_high_ratio`` (``tis_seq_clip_high_ratio`` under sequence-level TIS), under
``loss_metrics/`` in the worker's status and ``policy/loss_metrics/`` in the ``Step N:`` dict:
the rulebook's ``tis/imp_ratio_capped_fraction`` (~0 healthy). TRL's GRPOTrainer with
``loss_type="cispo"`` (trl/trainer/grpo_trainer.py, 2026-07) logs the share of tokens whose
importance weight CISPO capped at ``epsilon_high`` as ``cispo_clip_ratio``, in place of the
``clip_ratio/*`` of its PPO-style losses. Replayed as real SLURM jobs, a SkyRL run with 4.4 %
of its tokens capped and a TRL CISPO run clipping 2.9 % read no capped fraction and no clip
ratio: neither ``imp-ratio-out-of-range`` nor ``clip-ratio-high`` could fire.
"""

from __future__ import annotations

import pprint

import pytest

from probes.logs.metric_names import canonical_values
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

RAY = "(skyrl_entrypoint pid=48213) "


@pytest.mark.parametrize("prefix", ["policy/loss_metrics/", "loss_metrics/"])
def test_skyrl_token_tis_cap_share_is_the_capped_fraction(prefix: str) -> None:
    """SkyRL's share of TIS-capped tokens, in the ``Step N:`` dict or the status line."""
    got = canonical_values({f"{prefix}tis_token_clip_high_ratio": 0.03,
                            f"{prefix}is_ratio_std": 0.2}, {})
    assert got == {"imp_ratio_capped_fraction": 0.03}


def test_the_token_share_wins_over_the_sequence_share() -> None:
    """Sequence-level TIS's capped share is read only when no token share is printed."""
    both = {"policy/loss_metrics/tis_seq_clip_high_ratio": 0.5,
            "policy/loss_metrics/tis_token_clip_high_ratio": 0.01}
    assert canonical_values(both, {}) == {"imp_ratio_capped_fraction": 0.01}
    seq = {"policy/loss_metrics/tis_seq_clip_high_ratio": 0.25}
    assert canonical_values(seq, {}) == {"imp_ratio_capped_fraction": 0.25}


@pytest.mark.parametrize("raw", ["policy/loss_metrics/outlier_seq_masked_ratio",
                                 "policy/loss_metrics/tis_token_clip_low_ratio"])
def test_other_off_policy_shares_are_not_the_capped_fraction(raw: str) -> None:
    """Masked outlier sequences are rejection, not truncation: no capped fraction."""
    assert canonical_values({raw: 0.5}, {}) == {}


def test_trl_cispo_clip_share_is_the_clip_ratio() -> None:
    assert canonical_values({"cispo_clip_ratio": 0.004, "entropy": 0.7}, {}) == {
        "clip_ratio": 0.004, "entropy": 0.7}


def _skyrl_log(capped: list[float]) -> str:
    """SkyRL >= v0.4's console: the status line and the ``Step N:`` pprint dict (floats as
    ``ConsoleLogger.stringify_floats`` writes them) for each step."""
    lines = [RAY + "INFO | skyrl.train.entrypoints.main_base:run:301 - Total training steps: 100"]
    for step, cap in enumerate(capped, start=1):
        metrics = {"policy/grad_norm": 0.21, "policy/policy_entropy": 0.58,
                   "policy/policy_loss": -0.01, "policy/loss_metrics/clip_ratio": 0.0015,
                   "policy/loss_metrics/is_ratio_mean": 1.002,
                   "policy/loss_metrics/tis_token_clip_high_ratio": cap,
                   "reward/avg_raw_reward": 0.3, "trainer/global_step": step}
        status = {k.removeprefix("policy/"): v for k, v in metrics.items()
                  if k.startswith("policy/")}
        lines.append(RAY + f"INFO | skyrl.train.trainer:train:497 - {status}")
        lines.append(RAY + f"INFO | skyrl.train.utils.tracking:log:189 - Step {step}: ")
        body = pprint.pformat({k: f"{v:.4f}" if isinstance(v, float) else v
                               for k, v in metrics.items()})
        lines.extend(RAY + line for line in body.split("\n"))
    return "\n".join(lines) + "\n"


def test_a_skyrl_run_capping_many_tis_weights_is_out_of_range() -> None:
    report = judge(_from_log(_skyrl_log([0.001] * 8 + [0.044]), name="rl-skyrl")).report
    assert report.metrics["imp_ratio_capped_fraction"] == pytest.approx(0.044)
    assert "imp-ratio-out-of-range" in report.flags


def test_a_skyrl_run_capping_almost_none_stays_healthy() -> None:
    report = judge(_from_log(_skyrl_log([0.001] * 9), name="rl-skyrl")).report
    assert report.metrics["imp_ratio_capped_fraction"] == pytest.approx(0.001)
    assert "imp-ratio-out-of-range" not in report.flags
    assert report.verdict == "healthy"


def _trl_log(clips: list[str]) -> str:
    """TRL GRPO's per-step dicts (values as ``Trainer.log`` formats them) with CISPO's share."""
    lines = ["  Total optimization steps = 200"]
    for step, clip in enumerate(clips, start=1):
        lines.append(str({"loss": "0.002", "grad_norm": "0.31", "learning_rate": "1e-06",
                          "completions/mean_length": "402", "reward": "0.4",
                          "entropy": "0.71", "cispo_clip_ratio": clip,
                          "epoch": f"{step / 1168:.4g}"}))
    return "\n".join(lines) + "\n"


def test_a_trl_cispo_run_clipping_three_percent_is_clip_ratio_high() -> None:
    report = judge(_from_log(_trl_log(["0.0008"] * 8 + ["0.031"]), name="grpo-cispo")).report
    assert report.metrics["clip_ratio"] == pytest.approx(0.031)
    assert "clip-ratio-high" in report.flags


def test_a_trl_cispo_run_clipping_little_is_not() -> None:
    report = judge(_from_log(_trl_log(["0.0008"] * 9), name="grpo-cispo")).report
    assert report.metrics["clip_ratio"] == pytest.approx(0.0008)
    assert "clip-ratio-high" not in report.flags
