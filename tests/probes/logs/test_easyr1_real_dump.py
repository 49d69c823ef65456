"""EasyR1's console blocks as its own formatter prints them: real ``yaml.dump`` of real values.

EasyR1's ``ConsoleLogger.log`` is ``print(f"Step {step}\\n" + convert_dict_to_str(
unflatten_dict(data)))``, ``convert_dict_to_str`` being ``yaml.dump(data, indent=2)``
(hiyouga/EasyR1 ``verl/utils/logger/logger.py``, ``verl/utils/py_functional.py``). The actor's
and the reward function's metrics come through ``reduce_metrics`` (``np.mean`` of each list):
``np.float64``, which the default Dumper writes as a multi-line
``!!python/object/apply:numpy._core.multiarray.scalar`` with the value's bytes in base64. The
critic, length, timing and throughput metrics are Python floats (``.item()``). ``print``'s own
newline after the dump's leaves a blank line after each block.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import yaml

from probes.logs.easyr1_lines import YamlStep
from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

RAY = "(Runner pid=4242) "


def unflatten(data: dict[str, object]) -> dict[str, object]:
    """EasyR1's ``unflatten_dict`` (nested at each ``/``)."""
    out: dict[str, object] = {}
    for key, value in data.items():
        *parents, leaf = key.split("/")
        node = out
        for piece in parents:
            node = node.setdefault(piece, {})  # type: ignore[assignment]
        node[leaf] = value
    return out


def metrics(step: int, clipfrac: float = 0.002) -> dict[str, object]:
    """One step's metrics with EasyR1's keys and its value types (``reduce_metrics`` ->
    ``np.float64``; ``.item()`` -> float), the PPO clip fraction ``clipfrac``."""
    return {
        "actor/entropy_loss": np.float64(0.9 - step / 100),
        "actor/grad_norm": np.float64(0.2 + step / 1000),
        "actor/kl_loss": np.float64(0.001),
        "actor/lr": 1e-06,
        "actor/pg_clipfrac_higher": np.float64(clipfrac),
        "actor/pg_clipfrac_lower": np.float64(0.0),
        "actor/pg_loss": np.float64(-0.012),
        "actor/ppo_kl": np.float64(0.0),
        "critic/score/mean": 0.3 + step / 100,
        "critic/score/max": 1.0,
        "perf/throughput": 1234.567,
        "perf/total_num_tokens": 1234567,
        "response_length/mean": 300.5 + step,
        "reward/overall": np.float64(0.3 + step / 100),
        "reward/accuracy": np.float64(0.4),
        "timing_s/step": 90.25 + step,
    }


def console(step: int, clipfrac: float = 0.002) -> str:
    """``ConsoleLogger.log``'s output for ``step``, printed as it prints it."""
    out = io.StringIO()
    print(f"Step {step}\n" + yaml.dump(unflatten(metrics(step, clipfrac)), indent=2), file=out)
    return out.getvalue()


def easyr1_log(steps: int, total: int = 100, *, bar_after_last: bool = True,
               clipfrac: float = 0.002) -> str:
    """Steps 1..``steps``, each block then the ``Running step`` bar's redraw (not after the
    last one when ``bar_after_last`` is false: the log ends in the block's blank line)."""
    text = f"Total training steps: {total}\n"
    for step in range(1, steps + 1):
        text += console(step, clipfrac)
        if step < steps or bar_after_last:
            text += (f"Running step:   {step}%|          | {step}/{total} "
                     "[01:00<2:26:40, 90.00s/it]\n")
    return "".join(RAY + line + "\n" for line in text.splitlines())


def test_the_real_dump_holds_numpy_scalar_objects() -> None:
    """The premise: ``np.float64`` values print as multi-line objects, not numbers."""
    block = console(3)
    assert "entropy_loss: !!python/object/apply:numpy" in block
    assert "!!binary |" in block
    assert block.endswith("\n\n")


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_every_key_of_a_real_block_is_read(read: str) -> None:
    """The numpy scalars' values (entropy, grad norm, policy loss) and every key after them
    (critic's score, response length, step time) are that step's metrics."""
    text = easyr1_log(12)
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 7)
    assert [point.step for point in summary.points] == list(range(1, 13))
    last = summary.points[-1].values
    assert last["entropy"] == pytest.approx(0.78)
    assert last["grad_norm"] == pytest.approx(0.212)
    assert last["policy_loss"] == pytest.approx(-0.012)
    assert last["reward"] == pytest.approx(0.42)
    assert last["avg_num_tokens"] == pytest.approx(312.5)
    assert last["sec_per_step"] == pytest.approx(102.25)


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_the_last_block_ends_at_its_blank_line(read: str) -> None:
    """A log ending in the last block's blank line (``print``'s newline, written with the
    block) has that step read; it does not wait for the next bar redraw."""
    text = easyr1_log(12, bar_after_last=False)
    assert text.endswith(RAY + "\n")
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 5)
    assert summary.points[-1].step == 12
    assert summary.points[-1].values["grad_norm"] == pytest.approx(0.212)


def test_a_block_cut_before_its_blank_line_waits() -> None:
    """Without its blank line the last block may still be printing: no point yet."""
    text = easyr1_log(12, bar_after_last=False)
    text = text[:text.rindex(RAY + "\n")]
    assert parse_log(text).points[-1].step == 11


def test_a_string_value_does_not_end_its_block() -> None:
    """A value that is no number (a string, null, a bool) is skipped; the keys after it are
    read."""
    block = YamlStep(7, 10)
    lines = ["actor:", "  algo: grpo", "  grad_norm: 0.5", "  note: null", "critic:",
             "  score:", "    mean: 0.25"]
    assert all(block.read(line, 11 + at) for at, line in enumerate(lines))
    assert block.values == {"actor/grad_norm": 0.5, "critic/score/mean": 0.25}


def test_a_string_value_through_the_parser() -> None:
    """The same through the whole parser (its prefilter included)."""
    text = console(4).replace("critic:\n", "algorithm: grpo\ncritic:\n", 1)
    text = "".join(RAY + line + "\n" for line in text.splitlines())
    last = parse_log(text).points[-1]
    assert last.step == 4
    assert last.values["reward"] == pytest.approx(0.34)
