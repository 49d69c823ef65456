"""A resampling tail whose anchor lies past the read-back it sends still reads its lead.

A SkyRL DAPO run (``Resample batch K, continue sampling...``; the wandb logger, so no ``Step
N:`` dict on stdout) whose last ``saved checkpoint for global_step_N`` line lies further from
the end than ``DEEPEN_MAX`` (8 MiB) was read back 8 MiB and no further: the batches bar's lead
was counted from there, so the row read a step above the real one (live: 56 for 45), and a
save behind that inflated step read as "banking nothing". And the read-backs of one request
share a quarter of its answer budget (``collector.deepen_share``), so every such run after
the first had none. The read-back now scans on, per job (``DEEPEN_SCAN``), and sends from
past its whole read-back only the anchor and the resample and bar lines the lead is counted
from.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log
from probes.remote.collector import read_tail
from probes.remote.logread import DEEPEN_MAX
from tests.probes.remote.test_tail_batches_lead import _generator, _trained


def _far_save_run() -> str:
    """12000 batches of a 20000-step run, saves every 5000 steps: its last save (global step
    5000) some 12 MiB before the end."""
    lines = _generator().run(False, batches=12000, total=20000, ckpt=5000)
    return "\n".join(lines) + "\n"


def _step(tail: dict) -> int | None:  # type: ignore[type-arg]
    summary = parse_log(tail["text"], log_start=tail["offset"] == 0)
    return summary.progress.current if summary.progress else None


def test_an_anchor_past_the_read_back_gives_the_step(tmp_path: Path) -> None:
    text = _far_save_run()
    saved = text.rfind("saved checkpoint for global_step_5000")
    assert len(text) - saved > DEEPEN_MAX + (2 << 20)
    log = tmp_path / "dapo.log"
    log.write_text(text)
    tail = read_tail(str(log), 1 << 20, 0)
    assert _step(tail) == _trained(text) == 9000
    assert len(tail["text"]) < DEEPEN_MAX + (2 << 20)  # the far lines are few


def test_a_run_with_no_read_back_share_left_still_finds_its_anchor(tmp_path: Path) -> None:
    """Near miss of budget: a later job of the request (``deepen_max=0``) sends its tail and
    the few lines its lead is counted from, and reads the same step."""
    text = _far_save_run()
    log = tmp_path / "dapo.log"
    log.write_text(text)
    tail = read_tail(str(log), 1 << 20, 0, deepen_max=0)
    assert _step(tail) == 9000
    assert len(tail["text"]) < 2 << 20
