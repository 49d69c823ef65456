"""A newer torchtitan run's total steps, from the line its ``Trainer.__init__`` ends with.

torchtitan (pytorch/torchtitan ``torchtitan/train.py``) moved the run's total off its start
line: ``Trainer.__init__`` ends with ``logger.info("Trainer is initialized with local batch
size {..}, global batch size {..}, gradient accumulation steps {..}, sequence length {..},
total steps {training.steps} (warmup {lr_scheduler.warmup_steps})")`` and ``train()`` logs
``Training starts at step 1`` alone. Forks print tokens per step there instead of the batch
sizes. Before, such a run read no total (its step had no "of N").
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces
from tests.probes.logs.test_torchtitan_lines import MTIME, START, _line, _metrics

INIT = ("Trainer is initialized with local batch size 1, global batch size 8, gradient "
        "accumulation steps 1, sequence length 8192, total steps {total} (warmup 20)")
FORK = ("Trainer is initialized with 8192 tokens per DP rank, 65536 tokens per train step, "
        "gradient accumulation steps 1, maximum context length 8192, total steps {total} "
        "(warmup 20)")


def _run(steps: int, init: str, total: int = 300) -> str:
    at = START
    out = [_line(at, "Building 1-D device mesh with ['dp_shard'], [8]"),
           _line(at, init.format(total=total)), _line(at, "Training starts at step 1")]
    for step in range(1, steps + 1):
        at += timedelta(seconds=4)
        if step % 10 == 0:
            out.append(_line(at, _metrics(step, 3.0 - step / 1000, 0.8)))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("init", [INIT, FORK])
@pytest.mark.parametrize("read", ["cold", "folded"])
def test_the_init_line_gives_the_total(read: str, init: str) -> None:
    """Step 120 of 300."""
    text = _run(120, init)
    summary = (parse_log(text, mtime=MTIME) if read == "cold"
               else fold_in_pieces(text, 6, mtime=MTIME))
    assert summary.points[-1].step == 120
    assert summary.total_steps == 300


def test_a_tail_cut_below_the_init_line_takes_it_from_the_head() -> None:
    """A long log's tail holds no init line: the head the collector sends has it."""
    text = _run(400, INIT, total=1000)
    cut = text.index("step: 300")
    tail = text[text.rindex("\n", 0, cut) + 1:]
    summary = parse_log(tail, mtime=MTIME, log_start=False, head=text[:cut])
    assert summary.points[-1].step == 400
    assert summary.total_steps == 1000


def test_a_zero_total_is_none() -> None:
    """``training.steps`` of 0 names no total."""
    assert parse_log(_run(20, INIT, total=0), mtime=MTIME).total_steps is None
