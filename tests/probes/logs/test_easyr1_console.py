"""EasyR1's console logger (``trainer.logger`` with ``console``): ``Step N`` and a YAML block.

EasyR1 (hiyouga/EasyR1, ``verl/utils/logger/logger.py`` ``ConsoleLogger``) prints its config
once as ``Config`` + ``yaml.dump``, then each step as ``Step N`` + ``yaml.dump(unflatten_dict(
metrics), indent=2)`` (``verl/utils/py_functional.py``: keys sorted, nested at ``/``, floats
as their ``repr``, ``1.0e-06`` when scientific), and at the end ``Final validation metrics: `` + the
flat validation dict. Every line goes through Ray's ``(Runner pid=N)`` prefix.
"""

from __future__ import annotations

from math import isnan

import pytest

from probes.logs.easyr1_lines import YamlStep, yaml_number
from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

RAY = "(Runner pid=4242) "
CONFIG = """Config
algorithm:
  adv_estimator: grpo
  kl_coef: 0.01
trainer:
  max_steps: null
  total_epochs: 15
worker:
  actor:
    global_batch_size: 128
    optim:
      lr: 1.0e-06
      weight_decay: 0.01
"""


def step_block(step: int) -> str:
    """Step ``step``'s block as ConsoleLogger prints it (the numbers a function of the step)."""
    return f"""Step {step}
actor:
  entropy_loss: {0.9 - step / 100:.3f}
  grad_norm: {0.2 + step / 1000:.3f}
  kl_loss: 0.001
  lr: 1.0e-06
  pg_clipfrac_higher: 0.0
  pg_loss: -0.012
  ppo_kl: 0.0
critic:
  advantages:
    max: 1.789
    mean: 0.0
  score:
    max: 1.0
    mean: {0.3 + step / 100:.3f}
    min: 0.0
perf:
  throughput: 1234.567
  total_num_tokens: 1234567
prompt_length:
  mean: 210.5
response_length:
  clip_ratio: 0.0
  mean: {300 + step}.5
reward:
  accuracy: 0.4
  overall: {0.3 + step / 100:.3f}
timing_s:
  step: {90 + step}.25

"""


def easyr1_log(steps: int, total: int = 100, *, ray: bool = True) -> str:
    """The run's log to step ``steps``: the config, the total, the validation before training
    (``Step 0``), then each step's block followed by the ``Running step`` bar's redraw."""
    text = CONFIG + f"Total training steps: {total}\n"
    text += "Step 0\nval:\n  accuracy_reward: 0.25\n  reward_score: 0.25\n\n"
    text += f"Running step:   0%|          | 0/{total} [00:00<?, ?it/s]\n"
    for step in range(1, steps + 1):
        text += step_block(step)
        text += (f"Running step:   {step}%|          | {step}/{total} "
                 f"[01:00<2:26:40, 90.00s/it]\n")
    if not ray:
        return text
    return "".join(RAY + line + "\n" for line in text.splitlines())


@pytest.mark.parametrize("ray", [True, False])
@pytest.mark.parametrize("read", ["cold", "folded"])
def test_each_step_block_is_a_metric_point(read: str, ray: bool) -> None:
    """Steps 1-12 read with reward, entropy, grad norm, length, step time; the config and
    Step 0's val block (no training metric) add none."""
    text = easyr1_log(12, ray=ray)
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 7)
    steps = [point.step for point in summary.points]
    assert steps == list(range(1, 13))
    last = summary.points[-1].values
    assert last["reward"] == pytest.approx(0.42)
    assert last["entropy"] == pytest.approx(0.78)
    assert last["grad_norm"] == pytest.approx(0.212)
    assert last["policy_loss"] == pytest.approx(-0.012)
    assert last["avg_num_tokens"] == pytest.approx(312.5)
    assert last["sec_per_step"] == pytest.approx(102.25)
    assert last["learning_rate"] == pytest.approx(1e-6)
    assert summary.total_steps == 100


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_a_block_still_open_where_the_log_ends_waits(read: str) -> None:
    """Step 12's block with no line after it yet (neither its blank line nor the bar's
    redraw) is no point yet: the trainer may still be printing it."""
    text = easyr1_log(12)
    text = text[:text.rindex(RAY + "\n")]
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 5)
    assert summary.points[-1].step == 11


def test_a_tail_cut_inside_a_block_reads_nothing_of_it() -> None:
    """A tail starting mid-block (no ``Step N`` above it) reads no point from its lines."""
    text = easyr1_log(5)
    cut = text.index("critic:", text.index("Step 3"))
    summary = parse_log(text[cut:])
    assert [point.step for point in summary.points] == [4, 5]
    assert [point.step for point in parse_log(text).points] == [1, 2, 3, 4, 5]


def test_a_block_cut_by_a_missing_line_keeps_what_it_read() -> None:
    """A line the block cannot hold ends it: the keys read before it stay, none after."""
    block = YamlStep(7, 10)
    lines = ["actor:", "  grad_norm: 0.5", "  - !!python/object", "critic:", "  score:"]
    read = [block.read(line, 11 + at) for at, line in enumerate(lines)]
    assert read == [True, True, False, False, False]
    assert block.values == {"actor/grad_norm": 0.5}


@pytest.mark.parametrize(("text", "value"), [
    ("0.523", 0.523), ("-3", -3.0), ("1.0e-06", 1e-6), ("!!float 'inf'", float("inf")),
    ("-.inf", float("-inf")), ("grpo", None), ("null", None), ("true", None),
])
def test_yaml_numbers(text: str, value: float | None) -> None:
    """PyYAML's dumped numbers read as numbers; strings, null and bools as none."""
    assert yaml_number(text) == value


def test_a_nan_reads_as_nan() -> None:
    """EasyR1's representer prints a NaN as ``!!float 'nan'``."""
    number = yaml_number("!!float 'nan'")
    assert number is not None and isnan(number)
