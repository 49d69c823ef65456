"""verl's FSDP SFT trainer: each ``step:N - ...`` line lands on a tqdm redraw's line.

``verl/trainer/fsdp_sft_trainer.py`` runs under torchrun (no Ray forwarding lines): tqdm
redraws its ``Epoch E/M`` bar on stderr with no newline and ``LocalLogger`` prints the step's
``step:N - train/loss:... - train/lr(1e-3):... - train/time(s):...`` to stdout, so in the job's
``.out`` every step line follows a bar's ``]`` (``verl-sft-glued/console.out``, real tqdm 4.70.1,
generators/verl_sft_glued.py). A bar line was read as the bar alone: no step and no loss at all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
LOG = Path(__file__).resolve().parents[2] / "fixtures" / "verl-sft-glued" / "console.out"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 5, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_step_lines_glued_to_the_bar_are_the_steps(read) -> None:
    """Every glued ``step:N`` line is that step's point, its loss read."""
    summary = read(LOG.read_text())
    steps = [point.step for point in summary.points]
    assert steps[-1] == 70 and steps == sorted(steps)
    assert summary.points[-1].values["loss"] == pytest.approx(1.55)
    assert "verl" in summary.formats


def test_a_glued_step_line_in_a_long_tail_is_read() -> None:
    """The suffix a cold read parses after skimming a long head reads the glued steps too."""
    text = LOG.read_text()
    head = "".join(f"noise line {n}\n" for n in range(20000))
    summary = parse_log(head + text, mtime=MTIME)
    assert summary.points and summary.points[-1].step == 70
