"""NeMo-RL's SingleController GRPO loop: ``step_metrics={...}`` then ``train step N/M``.

NVIDIA-NeMo/RL ``nemo_rl/algorithms/single_controller.py`` (2026-08) prints neither the
``===== Step N/M =====`` banner nor ``📊 Training Results:``: after each optimizer step its
``⏱️  Timing:`` bullets, ``print(f"step_metrics={step_metrics}", flush=True)`` (the dict of
``single_controller_utils.utils.aggregate_step_metrics`` and ``reduce_advantage_pump_metrics``)
and ``train step {self._train_steps}/{grpo_cfg.max_num_steps}  trainer_v=...  lag=...``.
Replayed as a real sbatch job (1813, as jtuser, 12 steps of 100), jobtables job read
buffer-filling 'Filling buffer', step and total null, no metric: a run 12 steps in.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces


def step_lines(step: int, total: int = 100) -> list[str]:
    metrics = {"loss": 0.013 + step / 10000, "grad_norm": 0.2 + step / 100, "lr": 1e-06,
               "wd": 0.0, "global_valid_seqs": 512.0, "global_valid_toks": 401230.0,
               "token_mult_prob_error": 1.01, "probs_ratio_min": 0.91, "probs_ratio_max": 1.09,
               "reward": 0.3 + step / 100, "advantages/mean": 0.0, "advantages/max": 1.2,
               "advantages/min": -1.1, "total_num_tokens": 401230.0,
               "evicted_stale_prompt_groups": 0, "dropped_prompt_groups": 0}
    return ["", "⏱️  Timing:", "  • Total step time: 45.20s",
            "  • policy_training: 20.10s (44.5%)", f"step_metrics={metrics}",
            f"train step {step}/{total}  trainer_v={step}  lag=1  "]


def sc_log(first: int, last: int, total: int = 100) -> str:
    lines = ["  ✓ Training dataloader loaded with 7473 samples", "▶ Setting up compute cluster..."]
    for step in range(first, last + 1):
        lines += step_lines(step, total)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_each_train_step_line_is_its_step_with_the_metrics_before_it(read: str) -> None:
    text = sc_log(1, 12)
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 5)
    assert [p.step for p in summary.points] == list(range(1, 13))
    last = summary.points[-1].values
    assert last["grad_norm"] == pytest.approx(0.32) and last["reward"] == pytest.approx(0.42)
    assert last["loss"] == pytest.approx(0.0142) and last["learning_rate"] == 1e-06
    assert summary.total_steps == 100


def test_a_resumed_run_numbers_its_steps_from_the_checkpoint() -> None:
    summary = parse_log(sc_log(51, 55, total=200))
    assert [p.step for p in summary.points] == [51, 52, 53, 54, 55]
    assert summary.total_steps == 200


def test_a_step_line_without_its_dict_is_progress_only() -> None:
    """Near miss: a ``train step`` line whose dict was cut off (a tail starting between them)
    gives the total, and no point of made-up values."""
    text = "\n".join(step_lines(7)[-1:]) + "\n"
    summary = parse_log(text)
    assert all(p.values for p in summary.points)
    assert summary.total_steps == 100


@pytest.mark.parametrize("line", ["we train step 3/10 of the curriculum",
                                  "train step 3/10 done", "step_metrics=none"])
def test_other_lines_are_not_read_as_steps(line: str) -> None:
    summary = parse_log(line + "\n")
    assert not summary.points and summary.total_steps is None
