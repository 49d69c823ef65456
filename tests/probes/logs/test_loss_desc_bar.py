"""A training bar whose desc carries the step's loss (AnswerDotAI/fsdp_qlora's) is read.

fsdp_qlora's train.py (at 05ed9f2, 2024-06) prints ``Total Training Steps: N`` and draws one
bar over the whole run, ``tqdm(range(num_training_steps))``, advanced once per optimizer step;
after each step ``update_progress_bar`` sets its desc to ``f"Epoch {epoch}, Loss {log_loss:.3f},
LR {log_lr:.2e}"`` (without the LR when no scheduler), and with the default ``--log_to tqdm`` no
other line carries the loss. Replayed: the desc, new every step, is no training bar's, so the
bar was read only at its first, desc-less redraw: step 0 of 916, no loss ("Filling buffer").
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


def _redraw(step: int, desc: str) -> str:
    bar = ("█" * (10 * step // TOTAL)).ljust(10)
    return (f"{desc}: {100 * step // TOTAL:3d}%|{bar}| {step}/{TOTAL} "
            f"[{_clock(5.0 * step)}<{_clock(5.0 * (TOTAL - step))},  5.00s/it]")


def _log(last: int, *, with_lr: bool = True) -> str:
    redraws = [f"  0%|          | 0/{TOTAL} [00:00<?, ?it/s]"]
    for step in range(1, last + 1):
        desc = f"Epoch {3 * step // TOTAL}, Loss {1.9 - step / 400:.3f}"
        redraws.append(_redraw(step, desc + (", LR 2.00e-05" if with_lr else "")))
    return f"Total Training Steps: {TOTAL}\n" + "\r".join(redraws) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("with_lr", [True, False], ids=["lr", "no-lr"])
def test_the_desc_gives_the_loss_at_the_bars_step(read, with_lr: bool) -> None:
    summary = read(_log(320, with_lr=with_lr))
    assert summary.progress is not None
    assert (summary.progress.current, summary.total_steps) == (320, TOTAL)
    last = summary.points[-1]
    assert last.step == 320
    assert last.values["loss"] == pytest.approx(1.9 - 320 / 400, abs=1e-3)
    if with_lr:
        assert last.values["learning_rate"] == pytest.approx(2e-5)
    assert summary.sec_per_step == pytest.approx(5.0)


def test_a_long_run_read_from_its_end() -> None:
    summary = parse_log(_log(900), mtime=MTIME)
    assert (summary.points[-1].step, summary.progress.current if summary.progress else None,
            summary.total_steps) == (900, 900, TOTAL)


def test_an_epoch_desc_with_no_loss_is_no_such_bar() -> None:
    """Near miss: verl SFT's ``Epoch 1/3`` bar and a script's ``Epoch 2`` bar name no loss."""
    text = "\r".join(_redraw(step, "Epoch 2") for step in range(1, 40)) + "\n"
    summary = parse_log(text, mtime=MTIME)
    assert summary.points == ()
