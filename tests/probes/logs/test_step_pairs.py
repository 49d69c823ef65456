"""A step line of comma-separated ``name: number`` pairs, the step among them.

MaxText (AI-Hypercomputer/maxtext ``MetricLogger.log_metrics``, printed by
``max_logging.log``) ends each training step with::

    completed step: 12, seconds: 1.150, TFLOP/s/device: 470.000, Tokens/s/device: 57000.000,
    total_weights: 65536, loss: 7.890

(one line; older builds print fewer pairs, newer ones ``lm_loss``/``perplexity`` after
``loss``), its step zero-based (``for step in np.arange(start_step, config.steps)``),
``seconds`` the step's time; and its config one ``Config param <key>: <value>`` line a
key, ``steps`` the run's.
The reader is general: any line of at least three such pairs, one of them a step (``step``,
``completed step``, ``train step``), is the step's point; the step as printed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def maxtext_log(steps: int, prefix: str = "") -> str:
    out = ["Config param per_device_batch_size: 4", "Config param steps: 200",
           "Config param learning_rate: 3e-05"]
    for step in range(steps):
        out.append(f"{prefix}completed step: {step}, seconds: 1.150, TFLOP/s/device: 470.000, "
                   f"Tokens/s/device: 57000.000, total_weights: 65536, "
                   f"loss: {8.0 - step / 50:.3f}")
        if step % 25 == 0:
            out.append("To see full metrics 'tensorboard --logdir=gs://b/run/tensorboard/'")
    return "\n".join(out) + "\n"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 4, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("prefix", ["", "I1205 03:10:00.123456 140234 train.py:520] "])
def test_maxtext_completed_step_lines(read, prefix: str) -> None:
    summary = read(maxtext_log(60, prefix))
    last = summary.points[-1]
    assert last.step == 59
    assert last.values["loss"] == pytest.approx(8.0 - 59 / 50)
    assert last.values["sec_per_step"] == pytest.approx(1.15)
    assert summary.total_steps == 200


@pytest.mark.parametrize("read", READS)
def test_maxtext_total_printed_long_before_the_tail(read) -> None:
    """The config is printed once, at the start: a long run's tail is read past it (the cold
    read skims the lines before its suffix) and its total must still come from it."""
    summary = read(maxtext_log(3000).replace("steps: 200", "steps: 5000"))
    assert summary.points[-1].step == 2999
    assert summary.total_steps == 5000


@pytest.mark.parametrize("read", READS)
def test_two_pairs_or_no_step_key_is_no_step_line(read) -> None:
    text = "".join(f"epoch: {i}, loss: 2.5\nmemory: 12.5, tokens: {i}, loss: 1.0\n"
                   for i in range(10))
    assert not read(text).points


def nanotron_log(steps: int) -> str:
    """nanotron's iteration lines (trainer.py train_step_logs, human_format's K/M/G), behind
    its logger's prefix and torchrun's ``[default0]:``."""
    return "".join(
        f"[default0]:12/05/2026 03:{10 + s // 6:02d}:{s % 6 * 10:02d} [INFO|DP=0|PP=0|TP=0|"
        f"nid001]: iteration: {s} / 1000 | consumed_tokens: {s * 0.52:.3g}M | "
        "elapsed_time_per_iteration_ms: 10K | tokens_per_sec: 52.4K | tokens_per_sec_per_gpu: "
        f"6.55K | global_batch_size: 128 | lm_loss: {10.4 - s / 20:.4g} | lr: 0.0003 | "
        "model_tflops_per_gpu: 120 | hardware_tflops_per_gpu: 120 | grad_norm: 1.23 | "
        "cuda_memory_allocated: 21.5G\n" for s in range(1, steps + 1))


@pytest.mark.parametrize("read", READS)
def test_nanotron_iteration_lines(read) -> None:
    summary = read(nanotron_log(60))
    last = summary.points[-1]
    assert last.step == 60
    assert last.values["loss"] == pytest.approx(10.4 - 60 / 20)
    assert last.values["grad_norm"] == pytest.approx(1.23)
    assert last.values["learning_rate"] == pytest.approx(0.0003)
    assert last.values["sec_per_step"] == pytest.approx(10.0)  # 10K ms
    assert summary.total_steps == 1000


@pytest.mark.parametrize("read", READS)
def test_a_piped_step_line(read) -> None:
    text = "".join(f"INFO train.py:88 step: {s} | loss: {3 - s / 100:.4f} | lr: 2e-05 | "
                   f"grad_norm: 0.71\n" for s in range(1, 21))
    last = read(text).points[-1]
    assert (last.step, last.values["loss"]) == (20, pytest.approx(2.8))


def llamafactory_v1_log(steps: int, total: int = 916) -> str:
    """LLaMA-Factory v1's ``LoggingCallback.on_log`` (hiyouga/LLaMA-Factory ff6d4d12,
    ``src/llamafactory/v1/utils/callbacks/logging_callback.py``): the trainer's logs plus
    ``step`` and ``total_steps``, floats ``.4f`` (learning rate ``.4g``), through its logger's
    ``[%(levelname)s|%(asctime)s] %(name)s:%(lineno)s >> `` format."""
    out = ["[INFO|2026-12-05 04:00:00] llamafactory.v1.core.base_trainer:120 >> Model loaded"]
    for step in range(1, steps + 1):
        logs = {"epoch": 0, "step": step, "loss": 1.9 - step / 100, "grad_norm": 0.8,
                "learning_rate": 1e-05, "total_steps": total}
        parts = ", ".join(f"{k}: {v}" if not isinstance(v, float) else
                          f"{k}: {v:.4g}" if k == "learning_rate" else f"{k}: {v:.4f}"
                          for k, v in logs.items())
        out.append(f"[INFO|2026-12-05 04:{step // 6:02d}:{step * 10 % 60:02d}] "
                   f"llamafactory.v1.utils.callbacks.logging_callback:62 >> {parts}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("read", READS)
def test_a_total_steps_pair_is_the_runs_total(read) -> None:
    """A step line's own ``total_steps: T`` pair is the run's total (LLaMA-Factory v1)."""
    summary = read(llamafactory_v1_log(40))
    last = summary.points[-1]
    assert (last.step, summary.total_steps) == (40, 916)
    assert last.values["loss"] == pytest.approx(1.5) and last.values["grad_norm"] == 0.8
    assert last.values["learning_rate"] == 1e-05
