"""LitGPT's console: one line per iteration, its optimizer step and loss in pipe-separated parts.

``litgpt/finetune/{lora,adapter,full}.py`` and ``litgpt/pretrain.py`` (Lightning-AI/litgpt,
``fit``) print, every ``train.log_interval`` iterations (micro-batches)::

    Epoch 1 | iter 4 step 1 | loss train: 1.950, val: n/a | iter time: 731.12 ms (step)

``step`` counts optimizer steps (one every gradient-accumulation iterations, the one that
stepped marked `` (step)``), ``loss train`` is the running mean over the accumulation window,
``iter time`` one micro-batch's time; pretraining appends ``remaining time: 1:02:03``. There is
no stamp and no bar: a step takes ``iter / step`` iterations, so its time is the iteration's
time that many times (the report averages it over the window).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def litgpt_log(steps: int, accumulation: int = 4, tail: str = "") -> str:
    out = ["Number of trainable parameters: 3,407,872", "Verifying settings ..."]
    it = 0
    for step in range(1, steps + 1):
        for k in range(accumulation):
            it += 1
            last = k == accumulation - 1
            out.append(f"Epoch 1 | iter {it} step {step if last else step - 1} | loss train: "
                       f"{2.0 - it / 1000:.3f}, val: n/a | iter time: 500.00 ms"
                       f"{' (step)' if last else ''}{tail}")
        if step % 50 == 0:
            out.append(f"Saving LoRA weights to 'out/finetune/lora/step-{step:06d}/"
                       "lit_model.pth.lora'")
    return "\n".join(out) + "\n"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 4, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_litgpt_finetune_lines(read) -> None:
    summary = read(litgpt_log(120))
    last = summary.points[-1]
    assert last.step == 120
    assert last.values["loss"] == pytest.approx(2.0 - 480 / 1000)
    assert last.values["sec_per_step"] == pytest.approx(2.0)  # 4 iterations of 0.5 s
    # every step of the window is its own (step) line: the micro-batch lines printed after
    # it (iter 4k+1..4k+3 "step k") are the next step's, not step k's
    assert [p.values["sec_per_step"] for p in summary.points[-10:]] == [pytest.approx(2.0)] * 10
    assert [p.step for p in summary.points[-10:]] == list(range(111, 121))
    assert summary.total_steps is None  # LitGPT prints no total


@pytest.mark.parametrize("read", READS)
def test_litgpt_pretrain_lines_with_remaining_time(read) -> None:
    summary = read(litgpt_log(30, accumulation=1, tail=" remaining time: 1:02:03"))
    assert summary.points[-1].step == 30
    assert summary.points[-1].values["sec_per_step"] == pytest.approx(0.5)
