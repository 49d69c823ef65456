"""An RL run that logs no entropy is never read healthy by the collapse rule in silence.

Rulebook: "Entropy + collapse signals are mandatory ... without entropy you cannot apply the
collapse rule." TRL <= 0.17's GRPOTrainer logs loss, grad_norm, completion_length, rewards/*,
reward, reward_std and kl, but no entropy (tests/fixtures/rl-dryrun/trl_0.14_grpo.log).
Replayed as a real SLURM job, jobtables sweep showed it healthy, trend 'Reward falling from
0.438', nothing saying that one of the collapse rule's signals could never fire.
"""

from __future__ import annotations

from pathlib import Path

from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRL = FIXTURES / "rl-dryrun" / "trl_0.14_grpo.log"


def test_a_run_without_entropy_says_the_collapse_rule_is_unread() -> None:
    detail = judge(_from_log(TRL.read_bytes(), name="rl-trl-grpo-old"))
    report = detail.report
    assert report.step == 14 and "entropy" not in report.metrics  # absent, never 0
    assert report.trend.startswith("Reward falling from 0.438")
    assert report.trend.endswith("; no entropy: collapse rule unread")
    assert "no entropy logged: the collapse rule cannot be read" in detail.note  # jobtables job


def test_one_signal_without_entropy_says_so_too() -> None:
    lines = TRL.read_text().splitlines()
    spiked = [line.replace("'grad_norm': 0.35,", "'grad_norm': 4.5,") if i == len(lines) - 2
              else line for i, line in enumerate(lines)]
    report = judge(_from_log("\n".join(spiked) + "\n", name="rl-trl-grpo-old")).report
    assert "signal:grad_norm" in report.flags and "collapse" not in report.flags
    assert report.trend == "1 signal (no entropy logged): grad_norm 4.50 (>1.0)"


def test_a_run_with_entropy_is_unchanged() -> None:
    text = TRL.read_text().replace("'kl':", "'entropy': 0.52, 'kl':")
    report = judge(_from_log(text, name="rl-trl-grpo-old")).report
    assert report.metrics["entropy"] == 0.52
    assert "no entropy" not in report.trend
    assert report.verdict == "healthy"
