"""NeMo-Aligner's SFT (and DPO, SPIN) trainer reports each step in its ``Training steps`` bar.

nemo_aligner/algorithms/supervised.py (``SupervisedTrainer.fit``, at af2b3bd, 2025-05) prints no
step line: ``tqdm(self.train_dataloader, initial=self.step, total=self.max_steps, leave=True,
desc="Training steps")``, and after each optimizer step ``global_pbar.set_postfix(metrics)``
with the step's metrics prefixed ``train_`` (``train_grad_norm``, ``train_lr``, ``train_loss``,
``train_consumed_samples``, ``train_step_time``, ``train_epoch``); ``max_steps`` is
``num_steps_per_epoch * max_epochs`` capped by ``trainer.sft.max_steps``. Replayed on the real
SLURM (``sft-nemoaligner-8b`` at step 320 of 916): step null, no loss, verdict buffering,
"Filling buffer": the bar's desc was no training bar's.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)
TOTAL = 916


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}" if hours else f"{minutes:02d}:{sec:02d}"


def _redraw(step: int, elapsed: float, desc: str = "Training steps") -> str:
    """tqdm's meter with NeMo-Aligner's postfix (``format_num``: 3 significant digits)."""
    rate = elapsed / step
    bar = ("█" * (10 * step // TOTAL)).ljust(10)
    return (f"{desc}: {100 * step // TOTAL:3d}%|{bar}| {step}/{TOTAL} "
            f"[{_clock(elapsed)}<{_clock((TOTAL - step) * rate)}, {rate:5.2f}s/it, "
            f"train_grad_norm={0.8 + step % 7 / 100:.3g}, train_lr=1e-5, "
            f"train_loss={1.9 - step / 400:.3g}, train_acc={0.5 + step / 2000:.3g}, "
            f"train_consumed_samples={step * 128}, train_step_time=5, train_epoch=1]")


def _log(last: int, *, save_every: int = 100) -> str:
    """Steps 1..last at 5 s each, a 60 s checkpoint save after every ``save_every``-th."""
    parts, elapsed = ["Training steps:   0%|          | 0/916 [00:00<?, ?it/s]"], 0.0
    for step in range(1, last + 1):
        elapsed += 5.0 + (60.0 if step > 1 and (step - 1) % save_every == 0 else 0.0)
        parts.append(_redraw(step, elapsed))
    return "\r".join(parts) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
def test_training_steps_bar_gives_step_total_loss_and_grad_norm(read) -> None:
    summary = read(_log(320))
    assert summary.progress is not None
    assert (summary.progress.current, summary.total_steps) == (320, TOTAL)
    last = summary.points[-1]
    assert last.step == 320
    assert last.values["loss"] == pytest.approx(1.9 - 320 / 400, abs=1e-3)
    assert last.values["grad_norm"] == pytest.approx(0.8 + 320 % 7 / 100, abs=1e-3)
    assert last.values["learning_rate"] == pytest.approx(1e-5)
    # trailing window: the save at step 301 is one of the last ten steps, not their rate
    assert summary.sec_per_step == pytest.approx(5.0, abs=0.8)


def test_validation_steps_bar_is_no_training_bar() -> None:
    """Near miss: its validation pass, ``tqdm(..., desc="Validation steps")``, counts batches."""
    text = "\r".join(_redraw(step, 2.0 * step, desc="Validation steps")
                     for step in range(1, 40)) + "\n"
    summary = parse_log(text, mtime=MTIME)
    assert summary.progress is None
    assert summary.total_steps is None
