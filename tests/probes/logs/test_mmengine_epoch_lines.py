"""An mmengine runner trained by epochs reports each step in its ``Epoch(train)`` line.

mmengine/runner/log_processor.py (``LogProcessor.get_log_after_iter``, at 2543429, 2025-10)
with ``by_epoch=True`` (its default, and ``EpochBasedTrainLoop``'s) heads each line with the
epoch and the batch of that epoch, right-aligned to the widths of ``max_epochs`` and the
dataloader's length::

    12/05 16:05:10 - mmengine - INFO - Epoch(train) [2][120/500]  lr: 1.0000e-01  eta: \
0:07:20  time: 0.5012  data_time: 0.0123  memory: 6123  loss: 1.6800  grad_norm: 0.8400

The run's step is ``(epoch - 1) * 500 + 120`` (``runner.iter + 1``, which the line does not
print); its total is ``max_epochs`` (``EpochBasedTrainLoop._max_iters = max_epochs *
len(dataloader)``), which only the config the runner logs at start-up names
(``runner.py``: ``Config:\\n{cfg.pretty_text}``, ``train_cfg = dict(by_epoch=True,
max_epochs=3, val_interval=1)``). ``Epoch(val) [2][10/10]`` counts an evaluation's batches.
Replayed on the real SLURM (``sft-mmengine-epoch``, epoch 2 batch 120 of 500, 3 epochs):
step null, no loss, verdict buffering, "Filling buffer".
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)


def _line(epoch: int, batch: int, *, epochs: int, length: int, loss: float) -> str:
    head = f"[{epoch}]".rjust(len(str(epochs)) + 3)
    return (f"12/05 16:{batch // 10 % 60:02d}:00 - mmengine - INFO - Epoch(train){head}"
            f"[{batch:{len(str(length))}d}/{length}]  lr: 1.0000e-01  eta: 0:07:20  "
            f"time: 0.5012  data_time: 0.0123  memory: 6123  loss: {loss:.4f}  "
            "grad_norm: 0.8400")


def _log(epochs: int, length: int, last: tuple[int, int], *, config: bool = True) -> str:
    lines = []
    if config:
        lines += ["12/05 16:00:00 - mmengine - INFO - Config:",
                  "model = dict(type='ImageClassifier', backbone=dict(type='ResNet', depth=50))",
                  f"train_cfg = dict(by_epoch=True, max_epochs={epochs}, val_interval=1)",
                  "val_cfg = dict()", "work_dir = './work_dirs/resnet50_8xb32_in1k'", ""]
    for epoch in range(1, last[0] + 1):
        for batch in range(10, length + 1, 10):
            if (epoch, batch) > last:
                break
            done = (epoch - 1) * length + batch
            lines.append(_line(epoch, batch, epochs=epochs, length=length,
                               loss=2.3 - done / 1000))
        if epoch < last[0]:
            lines.append(f"12/05 16:30:00 - mmengine - INFO - Saving checkpoint at {epoch} epochs")
            lines.append(f"12/05 16:30:05 - mmengine - INFO - Epoch(val) [{epoch}][10/10]    "
                         "accuracy/top1: 71.2000  data_time: 0.0100  time: 0.2000")
    return "\n".join(lines) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize(("epochs", "length", "last"), [(3, 500, (2, 120)), (12, 1251, (11, 40))])
def test_epoch_lines_give_the_run_step_total_and_loss(read, epochs, length, last) -> None:
    """The step counts the epochs before; the total is the config's epochs of batches."""
    summary = read(_log(epochs, length, last))
    step = (last[0] - 1) * length + last[1]
    assert summary.total_steps == epochs * length
    point = summary.points[-1]
    assert point.step == step
    assert point.values["loss"] == pytest.approx(2.3 - step / 1000, abs=1e-4)
    assert point.values["grad_norm"] == pytest.approx(0.84)
    assert summary.sec_per_step == pytest.approx(0.5012, abs=1e-3)


def test_without_the_config_the_batches_of_an_epoch_are_no_total() -> None:
    """An epoch's batch count is never the run's total."""
    summary = parse_log(_log(3, 500, (2, 120), config=False), mtime=MTIME)
    assert (summary.points[-1].step, summary.total_steps) == (620, None)


def test_a_cut_tail_takes_the_epochs_from_the_head() -> None:
    """A long log read from its end keeps the total the head's config gives."""
    text = _log(3, 500, (3, 400))
    at = text.index("Epoch(train) [3][ 10/500]")
    cut = text.rfind("\n", 0, at) + 1
    summary = parse_log(text[cut:], log_start=False, head=text[:cut], mtime=MTIME)
    assert (summary.points[-1].step, summary.total_steps) == (1400, 1500)


def test_validation_lines_are_no_steps() -> None:
    """``Epoch(val)`` counts an evaluation's batches: not a training step."""
    summary = parse_log(_log(3, 500, (2, 0)), mtime=MTIME)
    assert summary.points[-1].step == 500
