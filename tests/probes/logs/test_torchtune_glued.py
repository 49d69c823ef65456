"""torchtune's ``StdoutLogger`` line printed right after its bar's redraw is read.

The recipes redraw the bar (``pbar.update(1)``, ``pbar.set_description(f"{epoch + 1}|{step}|
Loss: {loss}")``, to stderr, no newline) and then log the step (``StdoutLogger.log_dict``:
``print(f"Step {step} | ", end="")``, each ``name:value `` and a newline, to stdout). In a SLURM
``.out`` holding both streams the ``Step N | loss:... lr:... grad_norm:...`` line lands on the
bar's line, after its ``]`` (every one with unbuffered stdout, the first of each flush
otherwise). Replayed on the real SLURM (a torchtune full finetune with ``clip_grad_norm`` set):
the row read the loss from the bar's label but Grad Norm ``—`` and no learning rate, so a grad
explosion could not be seen. The glued line is now read as its own line would be, its values
added to the step's point.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
HEAD = ("INFO:torchtune.utils._logging:Running FullFinetuneRecipeDistributed with resolved "
        "config:\n\nclip_grad_norm: 1.0\nepochs: 1\nmax_steps_per_epoch: null\n\n")


def _run(last: int, *, every: int = 1) -> str:
    text = HEAD + "0|0:   0%|          | 0/100 [00:00<?, ?it/s]"
    for s in range(1, last + 1):
        text += (f"\r1|{s}|Loss: {2 - s / 100}: {s:3d}%|          | {s}/100 "
                 f"[00:{s:02d}<01:00,  1.00s/it]")
        if s % every == 0:
            text += (f"Step {s} | loss:{2 - s / 100} lr:2e-05 tokens_per_second_per_gpu:1500.0 "
                     f"grad_norm:{0.5 + s / 1000} \n")
    return text


def _folded(text: str, pieces: int = 4) -> LogSummary:
    return fold_in_pieces(text, pieces, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: _parse_reference(t, mtime=MTIME), id="reference"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_the_glued_step_line_adds_grad_norm_and_lr(read) -> None:
    summary = read(_run(40))
    last = summary.points[-1]
    assert last.step == 40
    assert last.values == {"loss": pytest.approx(1.6), "learning_rate": pytest.approx(2e-5),
                           "grad_norm": pytest.approx(0.54)}


@pytest.mark.parametrize("read", READS)
def test_steps_logged_every_few_keep_the_bar_loss_between(read) -> None:
    """``log_every_n_steps: 5``: the steps between carry the bar's loss alone."""
    points = {p.step: p.values for p in read(_run(20, every=5)).points}
    assert points[20]["grad_norm"] == pytest.approx(0.52)
    assert set(points[19]) == {"loss"}


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(last=st.integers(1, 99), every=st.sampled_from([1, 3]), data=st.data())
def test_glued_steps_fold_as_the_cold_parse_reads_them(last: int, every: int,
                                                       data: st.DataObject) -> None:
    from tests.probes.logs.test_incremental import assert_same, cut, cut_points, fold

    text = _run(last, every=every).encode()
    cold = parse_log(text, mtime=MTIME)
    assert_same(fold(cut(text, data.draw(cut_points(text))), mtime=MTIME)[0], cold)
    assert_same(cold, _parse_reference(text, mtime=MTIME))
