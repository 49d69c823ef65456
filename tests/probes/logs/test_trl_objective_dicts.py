"""TRL's PPO-family trainers log their reward and entropy under ``objective/``.

TRL's experimental PPOTrainer and OnlineDPOTrainer (and XPO, Nash-MD) print, each step, a
dict whose reward is ``objective/scores`` (the reward model's or reward functions' mean score,
before the KL penalty that ``objective/rlhf_reward`` adds) and whose entropy is
``objective/entropy`` (``-logprobs.sum(1).mean()``, a sequence's summed token entropy); PPO
adds the per-token ``policy/entropy_avg``. Neither ``objective/`` name was read: a PPO row
showed no reward, an Online DPO row no reward and "no entropy: collapse rule unread".
Fixtures: ``trl-experimental-rebuilt/`` (generators/trl_experimental_rebuilt.py, TRL f2cd5771).
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trl-experimental-rebuilt"


def test_trl_ppo_reward_is_its_score_and_entropy_the_per_token_one() -> None:
    summary = parse_log((FIXTURES / "ppo_console.out").read_text())
    last = summary.points[-1]
    assert (last.step, summary.total_steps) == (30, 60)
    assert last.values["reward"] == 0.33  # objective/scores, not objective/rlhf_reward (0.3)
    assert last.values["entropy"] == 0.8025  # policy/entropy_avg outranks objective/entropy
    assert last.values["policy_loss"] == -0.01491 and last.values["clip_ratio"] == 0.006565


def test_online_dpo_reads_reward_and_entropy_from_objective() -> None:
    summary = parse_log((FIXTURES / "online_dpo_console.out").read_text())
    last = summary.points[-1]
    assert (last.step, summary.total_steps) == (30, 60)
    assert last.values["reward"] == 0.65
    assert last.values["entropy"] == 119.7
    assert last.values["grad_norm"] == 0.3724 and last.values["loss"] == 0.6331
