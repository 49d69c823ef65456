"""A step line of ``name=number`` pairs (a plain loop's, InternEvo's) is the step's point.

InternEvo (InternLM/InternEvo ``internlm/train/pipeline.py``
``record_current_batch_training_metrics``, at c628a8c) logs one line a step, its ``infos``
joined as ``f"{key}={value} "``, through ``%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s in
%(funcName)s -- %(message)s``::

    2026-12-05 14:05:20,123	INFO pipeline.py:626 in record_current_batch_training_metrics -- \
tflops=177.6 step=320 loss=1.1000 real_tgs=3000 tgs (tokens/gpu/second)=3000 lr=2e-05 \
loss_scale=65536.0 grad_norm={'0_default': 0.84, '1_fp32': 0.0} micro_num=4 ...

and a plain PyTorch loop's ``print(f"step={step} loss={loss:.4f} lr={lr:.2e}
grad_norm={gn:.3f}")`` is the same shape. Neither was read: step null, no loss, "Filling
buffer". Policy as for ``name: number`` pairs (``probes.logs.pair_lines``), narrower: at least
three ``name=number`` pairs, one the step (``step``, ``global_step``, ``iter``, ``iteration``:
``N`` or ``N/T``) and one a loss.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.pair_lines import parse_eq_pairs
from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)


def _internevo(step: int) -> str:
    return (f"2026-12-05 14:{step // 60 % 60:02d}:{step % 60:02d},123\tINFO pipeline.py:626 in "
            f"record_current_batch_training_metrics -- tflops=177.6 step={step} "
            f"loss={1.9 - step / 400:.4f} real_tgs=3000 tgs (tokens/gpu/second)=3000 lr=2e-05 "
            "loss_scale=65536.0 grad_norm={'0_default': 0.84, '1_fp32': 0.0} micro_num=4 "
            f"num_consumed_tokens={step * 65536} inf_nan_skip_batches=0 acc=0.6 perplexity=3.35 ")


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
def test_internevo_lines_give_step_and_loss(read) -> None:
    summary = read("\n".join(_internevo(s) for s in range(1, 321)) + "\n")
    last = summary.points[-1]
    assert last.step == 320
    assert last.values["loss"] == pytest.approx(1.9 - 320 / 400)
    assert last.values["learning_rate"] == pytest.approx(2e-5)
    assert "grad_norm" not in last.values  # a dict of groups, not one number


@pytest.mark.parametrize("read", READS)
def test_a_plain_loops_print_with_its_total(read) -> None:
    text = "".join(f"step={s}/916 loss={1.9 - s / 400:.4f} lr=2.00e-05 grad_norm=0.840\n"
                   for s in range(1, 321))
    summary = read(text)
    assert (summary.points[-1].step, summary.total_steps) == (320, 916)
    assert summary.points[-1].values["grad_norm"] == pytest.approx(0.84)


@pytest.mark.parametrize("line", [
    "step=5 lr=2e-05 tokens=4096",  # no loss: a schedule or data line
    "step=5 loss=1.2",  # two pairs
    "[2026-12-04 12:00:10,123] [INFO] [logging.py:128:log_dist] [Rank 0] step=10, skipped=0, "
    "lr=[9.9e-05], mom=[(0.9, 0.95)]",  # DeepSpeed's engine line: no loss
    "epoch=1 loss=1.2 acc=0.5",  # no step
])
def test_near_misses(line: str) -> None:
    assert parse_eq_pairs(line) is None
