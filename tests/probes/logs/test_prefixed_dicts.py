"""A one-line metric dict printed behind a logger's prefix is read as the bare dict would be.

ROLL (alibaba/ROLL ``roll/pipeline/rlvr/rlvr_pipeline.py``) logs each step's metrics with
``logger.info(json.dumps(metrics, ensure_ascii=False))`` through its own formatter
(``roll/utils/logging.py``: ``[%(asctime)s] [%(filename)s (%(lineno)d)] [%(levelname)s]
[%(WORKER_NAME)s %(RANK)s / %(WORLD_SIZE)s][PID N] %(message)s``), so every metric line reads

    [2026-12-05 03:11:05] [rlvr_pipeline.py (838)] [INFO] [DRIVER 0 / 1][PID 52211] {"time/...

Its step is the dict's ``system/step`` (``BasePipeline.do_checkpoint`` sets it, before the
line is logged, to the loop's zero-based ``global_step``, the number its tensorboard and its
``checkpoint-N`` saves use), and its names carry reduce tags (``actor/pg_loss@sum``). Only a
dict with a step key or a training metric (loss, reward, grad norm, policy loss, entropy) is
read so: a logged config dict (``Training args: {'learning_rate': ...}``) is no point.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
PREFIX = ("[2026-12-05 03:{m:02d}:{s:02d}] [rlvr_pipeline.py ({line})] [INFO] "
          "[DRIVER 0 / 1][PID 52211] ")


def _roll_step(step: int) -> str:
    t = 60 + 65 * step
    pre = PREFIX.format(m=10 + t // 60, s=t % 60, line=838)
    metrics = {
        "time/step_total": 64.8, "actor/ratio_mean@sum": 1.0001,
        "actor/pg_loss@sum": -0.004 - step / 10000, "actor/kl_loss@sum": 0.0011,
        "actor/ppo_ratio_clipfrac@sum": 0.0008, "actor_train/grad_norm": 0.2 + step / 1000,
        "actor/lr": 1e-6, "critic/entropy/mean": 0.52 - step / 1000,
        "critic/score/mean": 0.3 + step / 200, "critic/score/max": 1.0,
        "token/response_length/mean": 1480.0 + step, "system/tps_gpu": 1523.4,
        "system/samples": (step + 1) * 512, "system/global_step": step, "system/step": step,
    }
    done = PREFIX.format(m=10 + t // 60, s=t % 60, line=840) + f"pipeline step {step} finished"
    return f"{pre}{json.dumps(metrics, ensure_ascii=False)}\n{done}\n"


def roll_log(steps: int) -> str:
    head = (PREFIX.format(m=10, s=0, line=31) + "pipeline_config: RLVRConfig(exp_name="
            "'qwen2.5-7B-rlvr', seed=42, max_steps=500, save_steps=50, logging_steps=1)\n")
    return head + "".join(_roll_step(step) for step in range(steps))


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 4, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_roll_json_metrics_behind_its_logger_prefix(read) -> None:
    summary = read(roll_log(40))
    last = summary.points[-1]
    assert last.step == 39  # ROLL's own zero-based step (system/step)
    values = last.values
    assert values["reward"] == pytest.approx(0.3 + 39 / 200)
    assert values["policy_loss"] == pytest.approx(-0.004 - 39 / 10000)
    assert values["entropy"] == pytest.approx(0.52 - 39 / 1000)
    assert values["grad_norm"] == pytest.approx(0.2 + 39 / 1000)
    assert values["clip_ratio"] == pytest.approx(0.0008)
    assert values["avg_num_tokens"] == pytest.approx(1519.0)
    steps = [point.step for point in summary.points]
    assert steps == list(range(steps[0], 40))  # one point a step, none skipped


@pytest.mark.parametrize("read", READS)
def test_a_logged_hf_dict_behind_a_prefix(read) -> None:
    lines = "".join(
        f"2026-12-05 03:{10 + s // 6:02d}:{s % 6 * 10:02d},120 - INFO - train - "
        f"{{'loss': {2.0 - s / 100:.4f}, 'grad_norm': 0.8, 'learning_rate': 2e-05, "
        f"'step': {s}}}\n" for s in range(1, 31))
    summary = read(lines)
    assert summary.points[-1].step == 30
    assert summary.points[-1].values["loss"] == pytest.approx(1.7)


@pytest.mark.parametrize("read", READS)
def test_a_logged_config_dict_is_no_point(read) -> None:
    text = ("2026-12-05 03:10:00,120 - INFO - __main__ - Training args: {'learning_rate': "
            "1e-05, 'num_train_epochs': 3, 'warmup_ratio': 0.03}\n"
            "2026-12-05 03:10:01,120 - INFO - ray - resources: {'CPU': 64.0, 'GPU': 8.0}\n")
    assert not read(text).points


@pytest.mark.parametrize("label", ["1: ", "[rank3]:", "[default1]:"])
def test_another_ranks_logged_dict_is_no_point(label: str) -> None:
    """``srun -l`` and torchrun label another rank's lines: its logger's dicts are not the
    run's steps (rank 0's are), stamp and level notwithstanding."""
    text = "".join(f"{label}2026-12-05 03:10:{s:02d},120 - INFO - train - {{'loss': 9.5, "
                   f"'grad_norm': 0.5, 'step': {s}}}\n" for s in range(1, 6))
    assert not parse_log(text, mtime=MTIME).points
