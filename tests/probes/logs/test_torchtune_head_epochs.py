"""A torchtune run read from the end of a long log keeps its total from the head's config.

torchtune prints its resolved config once, at start (``config.log_config``: ``epochs: 3``,
``max_steps_per_epoch: null``); its bar counts one epoch's steps, so the run's total is the
config's epochs x the bar's total. A tail cut from a longer log holds no config: the head the
collector sends beside it has it, but ``MetricScan.seed_head`` did not read it (nor the
``max_steps_per_epoch`` cap), and the row had a step with no total.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from tests.report.test_sft_dryrun_torchtune import _CONFIG, _bars


def _cut(epochs: int, cap: str, per_epoch: int, done: int, at: str) -> tuple[int, int | None]:
    text = _CONFIG.format(epochs=epochs, cap=cap) + _bars(per_epoch, done)
    cut = text.rfind("\n", 0, text.index(at)) + 1
    summary = parse_log(text[cut:], log_start=False, head=text[:cut])
    return summary.points[-1].step, summary.total_steps


def test_a_cut_tail_takes_epochs_from_the_head() -> None:
    assert _cut(3, "null", 120, 200, "2|150|") == (200, 360)

