"""XTuner (and any mmengine runner by iterations) reports each step in mmengine's log line.

mmengine/runner/log_processor.py (``LogProcessor.get_log_after_iter``, at 2543429, 2025-10)
with ``by_epoch=False`` (XTuner's configs: ``log_processor = dict(by_epoch=False)``) logs every
``LoggerHook.interval`` iterations, through mmengine's ``MMFormatter`` (``%(asctime)s -
%(name)s - INFO - %(message)s``, the level coloured on a terminal)::

    12/05 14:02:11 - mmengine - INFO - Iter(train) [ 320/2748]  lr: 1.9990e-05  eta: 3:22:20  \
time: 5.0012  data_time: 0.0123  memory: 61234  loss: 1.2100  grad_norm: 0.8400

The total is ``runner.max_iters`` (XTuner's ``TrainLoop`` turns ``max_epochs`` into iterations),
``time`` the smoothed seconds an iteration (``window_size``), every float ``{:.4f}``; its
validation logs ``Iter(val) [17/17]``, a count of batches. Replayed on the real SLURM
(``sft-xtuner-qwen7b`` at iteration 330 of 2748): step null, no loss, verdict buffering,
"Filling buffer".
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.lines import parse_iteration
from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)
INFO = "\x1b[37mINFO\x1b[0m"


def _line(it: int, *, seconds: float = 5.0, grad: float = 0.84, total: int = 2748) -> str:
    eta = (total - it) * 5
    return (f"12/05 14:{it // 10 % 60:02d}:00 - mmengine - {INFO} - Iter(train) "
            f"[{it:{len(str(total))}d}/{total}]  lr: 1.9990e-05  eta: {eta // 3600}:"
            f"{eta // 60 % 60:02d}:{eta % 60:02d}  time: {seconds:.4f}  data_time: 0.0123  "
            f"memory: 61234  loss: {1.3 - it / 2000:.4f}  grad_norm: {grad:.4f}")


def _log(last: int) -> str:
    lines = [f"12/05 14:00:30 - mmengine - {INFO} - Checkpoints will be saved to "
             "/work/xtuner/work_dirs/qwen2_7b_full_alpaca_e3."]
    for it in range(10, last + 1, 10):
        lines.append(_line(it))
        if it % 100 == 0:
            lines.append(f"12/05 14:{it // 10 % 60:02d}:30 - mmengine - {INFO} - Saving "
                         f"checkpoint at {it} iterations")
    return "\n".join(lines) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
def test_iter_train_lines_give_step_total_loss_grad_norm_and_rate(read) -> None:
    summary = read(_log(330))
    assert summary.total_steps == 2748
    last = summary.points[-1]
    assert last.step == 330
    assert last.values["loss"] == pytest.approx(1.3 - 330 / 2000, abs=1e-4)
    assert last.values["grad_norm"] == pytest.approx(0.84)
    assert last.values["learning_rate"] == pytest.approx(1.999e-5)
    assert summary.sec_per_step == pytest.approx(5.0, abs=0.01)


def test_a_long_log_read_from_its_end_keeps_the_total() -> None:
    """The cold read of a long tail reads back a suffix; the total is still the runner's."""
    summary = parse_log(_log(2700), mtime=MTIME)
    assert (summary.points[-1].step, summary.total_steps) == (2700, 2748)


def test_lr_groups_and_compound_loss_names() -> None:
    """Several lr groups print space-separated (``base_lr: ... lr: ...``); other losses keep
    their dotted names."""
    line = ("08/12 15:28:46 - mmengine - INFO - Iter(train) [   10/10000]  base_lr: 9.0918e-06 "
            "lr: 9.0918e-06  eta: 20:09:02  time: 7.2615  data_time: 0.0495  memory: 36388  "
            "loss: 437.3079  loss_flow: 152.9000  decode.loss_ce: 0.0257")
    parsed = parse_iteration(line)
    assert parsed is not None
    assert (parsed.step, parsed.total, parsed.seconds) == (10, 10000, pytest.approx(7.2615))
    assert parsed.values["lr"] == pytest.approx(9.0918e-06)
    assert parsed.values["loss"] == pytest.approx(437.3079)
    assert parsed.values["decode.loss_ce"] == pytest.approx(0.0257)
    assert "eta" not in parsed.values


@pytest.mark.parametrize("line", [
    "06/16 08:23:02 - mmengine - INFO - Iter(val) [17/17]    aAcc: 86.3900  mIoU: 51.1200",
    "01/29 21:35:34 - mmengine - INFO - Epoch(val)  [1][ 20/270]    accuracy/top1: 71.2000",
])
def test_validation_lines_are_no_iteration(line: str) -> None:
    """Near misses: a validation pass counts batches (``by_epoch=True`` training lines are
    the run's steps: test_mmengine_epoch_lines)."""
    assert parse_iteration(line) is None
