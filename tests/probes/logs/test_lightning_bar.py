"""A plain PyTorch Lightning run reports its steps in its training bar's postfix.

Lightning's ``TQDMProgressBar`` draws one bar a epoch (``set_description(f"Epoch {epoch}")``,
``BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
{rate_noinv_fmt}{postfix}]"``, the postfix the metrics logged with ``prog_bar=True`` and
``v_num``), redrawn with ``\\r`` in a SLURM ``.out``::

    Epoch 1:  30%|███       | 300/1000 [05:00<11:40,  1.00it/s, v_num=0, train_loss=1.230]

Replayed on the real SLURM (an SFT LightningModule logging ``train_loss``, 1300 batches in):
no step, no loss, verdict buffering, "Filling buffer" for the whole run, and a NaN loss never
seen. Only NeMo's bars, which carry ``global_step``, were read. Now each redraw with a logged
metric is a point at batch ``epoch x batches a epoch + n`` (the bar counts batches; Lightning
1.x's also counts the epoch's validation batches), ``train_loss`` / ``train_loss_step`` as the
loss and ``v_num`` left out.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
PER_EPOCH = 1000


def _bar(epoch: int, n: int, loss: float, key: str = "train_loss") -> str:
    return (f"Epoch {epoch}: {n * 100 // PER_EPOCH:3d}%|{'█' * (n * 10 // PER_EPOCH):<10}| "
            f"{n}/{PER_EPOCH} [{n // 60:02d}:{n % 60:02d}<11:40,  1.00it/s, v_num=0, "
            f"{key}={loss:.3f}]")


def _loss(step: int) -> float:
    return 2.3 - step / 1000


def _run(last: int) -> str:
    """Lightning's console from the first batch to global batch ``last``, redrawn with ``\\r``
    within a epoch and a line break at each epoch's end."""
    text = "GPU available: True (cuda), used: True\n"
    for epoch in range(last // PER_EPOCH + 1):
        ns = range(1, min(PER_EPOCH, last - epoch * PER_EPOCH) + 1)
        text += "".join("\r" + _bar(epoch, n, _loss(epoch * PER_EPOCH + n)) for n in ns) + "\n"
    return text


def _folded(text: str, pieces: int = 5) -> LogSummary:
    return fold_in_pieces(text, pieces, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_lightning_bar_gives_the_step_and_loss(read) -> None:
    summary = read(_run(1300))
    last = summary.points[-1]
    assert last.step == 1300
    assert last.values == {"loss": pytest.approx(_loss(1300), abs=1e-3)}


@pytest.mark.parametrize("key", ["train_loss_step", "loss", "train/loss"])
def test_the_step_loss_under_its_other_names(key: str) -> None:
    summary = parse_log("\r".join(_bar(0, n, 1.5 + n / 100, key) for n in range(1, 40)))
    assert summary.points[-1].step == 39
    assert summary.points[-1].values["loss"] == pytest.approx(1.89)


def test_a_nan_loss_in_the_bar_is_seen() -> None:
    text = "\r".join(_bar(0, n, 1.0) for n in range(1, 30)) + "\r" + _bar(0, 30, math.nan)
    assert math.isnan(parse_log(text).points[-1].values["loss"])


def test_a_bar_with_no_logged_metric_claims_nothing() -> None:
    """``v_num`` alone (nothing logged with ``prog_bar=True``) is no point."""
    text = "\r".join(f"Epoch 0:  {n}%|          | {n}/100 [00:0{n % 10}<01:00,  1.00it/s, v_num=3]"
                     for n in range(1, 20))
    assert parse_log(text).points == ()


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(last=st.integers(1, 2600), data=st.data())
def test_lightning_steps_fold_as_the_cold_parse_reads_them(last: int,
                                                           data: st.DataObject) -> None:
    """Any cut of such a log, folded with the carry through JSON, is ``parse_log`` of it, and
    ``parse_log`` is the per-line pass."""
    from probes.logs.parse import _parse_reference
    from tests.probes.logs.test_incremental import assert_same, cut, cut_points, fold

    text = _run(last).encode()
    cold = parse_log(text, mtime=MTIME)
    assert_same(fold(cut(text, data.draw(cut_points(text))), mtime=MTIME)[0], cold)
    assert_same(cold, _parse_reference(text, mtime=MTIME))


_STOPS = ["`Trainer.fit` stopped: `max_epochs=2` reached.",
          "`Trainer.fit` stopped: `max_steps=2000` reached."]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("stop", _STOPS)
@pytest.mark.parametrize("glued", [True, False], ids=["on-the-bar-line", "own-line"])
def test_lightning_s_stop_at_its_limit_is_the_run_finished(read, stop: str, glued: bool) -> None:
    """Lightning's fit loop logs ``rank_zero_info(f"`Trainer.fit` stopped: `max_steps=
    {self.max_steps!r}` reached.")`` (or ``max_epochs``) when training ran to its limit; to
    stderr after the bar's last redraw, which ends in no newline, so mostly on the bar's line.
    The run was read as unfinished: a job still RUNNING after it (a final test, a checkpoint
    upload) read as stalled mid-training."""
    text = _run(2 * PER_EPOCH).rstrip("\n") + ("" if glued else "\n") + stop + "\n"
    text += "Testing DataLoader 0: 100%|██████████| 50/50 [00:05<00:00, 10.00it/s]\n" * 80
    assert read(text).finished


def test_a_stop_by_time_or_signal_is_no_finish() -> None:
    text = (_run(300).rstrip("\n") + "Time limit reached. Elapsed time is 0:10:00. Signaling "
            "Trainer to stop.\n")
    assert not parse_log(text, mtime=MTIME).finished


@pytest.mark.parametrize("read", READS)
def test_the_lightning_bar_s_rate_is_the_step_rate(read) -> None:
    """Lightning's bar rate (``rate_noinv_fmt``: tqdm's smoothed batches a second) is the
    run's rate across its epochs' bars; the row had none (no stamp on a bar line), so no
    ETA and no rate to judge a slowdown by."""
    summary = read(_run(1300))
    assert summary.sec_per_step == pytest.approx(1.0)
