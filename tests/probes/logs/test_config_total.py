"""With no banner or bar total, the run's total steps come from its printed config.

The rulebook: "Total steps come from the rendered config or the trainer banner". ROLL prints
its whole pipeline config as a dataclass repr at start (``pipeline_config: RLVRConfig(...,
max_steps=500, ...)``) and no banner or bar; its loop runs ``range(max_steps)``. A config's
``max_steps`` of -1 or 0 (HF's "not set": the epochs decide) is no total, and a banner's total
wins over the config's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
PREFIX = ("[2026-12-05 03:{m:02d}:{s:02d}] [rlvr_pipeline.py (838)] [INFO] "
          "[DRIVER 0 / 1][PID 52211] ")


def _log(config: str, steps: int = 12) -> str:
    head = PREFIX.format(m=10, s=0) + f"pipeline_config: RLVRConfig({config})\n"
    rows = "".join(
        PREFIX.format(m=11 + step, s=5) + json.dumps(
            {"critic/score/mean": 0.4, "actor/pg_loss@sum": -0.003, "system/step": step}) + "\n"
        for step in range(steps))
    return head + rows


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 3, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_roll_total_from_its_printed_config(read) -> None:
    summary = read(_log("exp_name='qwen-rlvr', seed=42, max_steps=500, save_steps=50"))
    assert summary.points[-1].step == 11
    assert summary.total_steps == 500
    assert summary.sec_per_step == pytest.approx(60.0)


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("unset", ["-1", "0"])
def test_an_unset_max_steps_is_no_total(read, unset: str) -> None:
    summary = read(_log(f"exp_name='qwen-rlvr', seed=42, max_steps={unset}, save_steps=50"))
    assert summary.points[-1].step == 11
    assert summary.total_steps is None


@pytest.mark.parametrize("read", READS)
def test_a_banner_total_wins_over_the_config(read) -> None:
    text = _log("exp_name='x', max_steps=500") + "Total training steps: 320\n"
    assert read(text).total_steps == 320


def test_a_cut_tails_total_from_the_configs_in_its_head() -> None:
    """A tail cut from a longer log (``log_start`` False) reads its head's config lines too:
    ROLL's config repr, llm-foundry's ``max_duration``, MaxText's ``Config param steps``."""
    from tests.probes.logs.test_bracket_blocks import composer_log
    from tests.probes.logs.test_step_pairs import maxtext_log

    for text, total in ((_log("exp_name='qwen-rlvr', seed=42, max_steps=500", 60), 500),
                        (composer_log(210, per_epoch=160, duration="2ep"), 320),
                        (maxtext_log(60), 200)):
        lines = text.splitlines(keepends=True)
        head, tail = "".join(lines[:12]), "".join(lines[-40:])
        summary = parse_log(tail, mtime=MTIME, log_start=False, head=head)
        assert summary.points and summary.total_steps == total, text[:60]
