"""XTuner v1's trainer reports each step in one loguru line with its step, total and time.

xtuner/v1/train/trainer.py (``Trainer._log_step``, at b934f46, 2026-08) logs after each
optimizer step (``cur_step`` already advanced), through ``log_format``'s ``[XTuner][time][LEVEL]
message``::

    [XTuner][2026-12-05 14:02:11][INFO] Epoch 1 Step 320/916 data_time: 0.0123 lr: 1.990000e-05 \
time: 5.0012 text_tokens: 32768 ... reduced_llm_loss: 1.21000000, local_loss: 1.20000000 ... \
grad_norm: 0.84000000 max_memory: 61.23 GB reserved_memory: 70.00 GB tgs: 6553.6 ... eta: 0:49:40

``total_step`` is ``len(dataloader) * total_epoch`` (or the configured ``total_step``): optimizer
steps; ``time`` the step's seconds; ``reduced_llm_loss`` the all-reduced LM loss
(``BaseModel`` renames ``reduced_loss`` so), ``local_loss`` this rank's. Replayed on the real
SLURM (``sft-xtunerv1-qwen8b`` at step 320 of 916): step null, no loss, "Filling buffer".
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.lines import parse_iteration
from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)


def _line(step: int, *, seconds: float = 5.0, total: int = 916) -> str:
    stamp = f"2026-12-05 {14 + step // 3600:02d}:{step // 60 % 60:02d}:{step % 60:02d}"
    return (f"[XTuner][{stamp}][INFO] Epoch 1 Step {step}/{total} data_time: 0.0123 "
            f"lr: 1.990000e-05 time: {seconds:.4f} text_tokens: 32768 seqlen_tokens: 32768 "
            f"approximate_total_consumed_tokens: {step * 32768} reduced_llm_loss: "
            f"{1.9 - step / 400:.8f}, local_loss: 1.20000000 efficient_attn_ratio: 0.5000, "
            f"img_efficient_attn_ratio: 0.0000 grad_norm: 0.84000000 max_memory: 61.23 GB "
            f"reserved_memory: 70.00 GB tgs: 6553.6 seqlen_tgs: 6553.6 exp_tgs: 6553.6 "
            f"eta: 0:49:40 ")


def _log(last: int) -> str:
    lines = ["[XTuner][2026-12-05 14:00:01][INFO] Start training"]
    lines += [_line(step, seconds=65.0 if step % 100 == 1 and step > 1 else 5.0)
              for step in range(1, last + 1)]
    return "\n".join(lines) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
def test_step_lines_give_step_total_loss_grad_norm_and_rate(read) -> None:
    summary = read(_log(320))
    assert summary.total_steps == 916
    last = summary.points[-1]
    assert last.step == 320
    assert last.values["loss"] == pytest.approx(1.9 - 320 / 400)  # the reduced loss
    assert last.values["grad_norm"] == pytest.approx(0.84)
    assert last.values["learning_rate"] == pytest.approx(1.99e-5)
    # the step times' trailing window: the save that slowed step 301 is behind it
    assert summary.sec_per_step == pytest.approx(5.0, abs=0.01)


def test_a_long_log_read_from_its_end_keeps_the_total() -> None:
    summary = parse_log(_log(900), mtime=MTIME)
    assert (summary.points[-1].step, summary.total_steps) == (900, 916)


@pytest.mark.parametrize("line", [
    "[XTuner][2026-12-05 14:00:01][INFO] Train step 3/50 start",  # its RL trainer's banner
    "Epoch 1 Step 3/50 started",  # no metric pair: not the step line
])
def test_other_step_lines_are_no_xtuner_step(line: str) -> None:
    assert parse_iteration(line) is None
