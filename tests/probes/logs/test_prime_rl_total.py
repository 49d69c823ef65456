"""prime-rl prints its run's total steps once, as its loops start: the Step column's max.

Both loops log it (PrimeIntellect-ai/prime-rl at 559b4477): the trainer
``logger.info(f"Starting training loop (max_steps={config.max_steps or 'infinite'})")``
(``trainer/rl/train.py``, ``trainer/sft/train.py``) and the orchestrator ``Starting
orchestrator loop (max_steps=...)``; earlier commits printed ``({config.max_steps=})``,
``(max_steps=N, steps_per_epoch=M)`` or the SFT trainer's ``Starting training loop with N steps
(...)``. Every prime-rl row read ``step/—``: none of these was read. ``infinite`` (no
``max_steps``) is no total.
"""

from __future__ import annotations

import pytest

from probes.logs.incremental import parse_increment
from probes.logs.parse import parse_log

NO_BOLD, RESET = "\033[22m", "\033[0m"
GREEN, CYAN, DIM = "\033[32m\033[1m", "\033[36m\033[1m", "\033[2m"


def _line(clock: int, level: str, message: str) -> str:
    """utils/logger.py's loguru format, colours forced (the sbatch template tees both)."""
    colour = GREEN if level == "SUCCESS" else CYAN
    return (f"{DIM}10:{clock // 60 % 60:02d}:{clock % 60:02d}{RESET} {colour}{level: >7}{RESET} "
            f"{colour}{NO_BOLD}{message}{RESET}{colour}{RESET}\n")


def _log(start: str, steps: int = 6) -> str:
    out = _line(0, "INFO", "Starting orchestrator") + _line(0, "INFO", "Starting trainer")
    out += _line(1, "INFO", start.replace("training", "orchestrator"))
    out += _line(2, "INFO", start)
    for step in range(1, steps + 1):
        out += _line(60 * step, "SUCCESS", (
            f"Step {step} |   58.1s | Loss 0.0014 | Entropy {0.61 - step * 0.001:.4f} | "
            "Mismatch KL 0.0011 | Grad. Norm 0.2138 | LR 1.00e-06 | Throughput 9748 tokens/s | "
            "MFU 39.8% | Peak Mem. 60.8 GiB"))
    return out


@pytest.mark.parametrize("start", [
    "Starting training loop (max_steps=200)",
    "Starting training loop (config.max_steps=200)",
    "Starting training loop (max_steps=200, steps_per_epoch=25)",
    "Starting training loop with 200 steps (200 batches of 64 samples each)",
])
def test_the_loops_start_line_gives_the_total(start: str) -> None:
    for summary in (parse_log(_log(start)), parse_increment(None, _log(start).encode())[0]):
        assert summary.points[-1].step == 6
        assert summary.total_steps == 200


def test_an_infinite_run_has_no_total() -> None:
    assert parse_log(_log("Starting training loop (max_steps=infinite)")).total_steps is None


def test_a_cut_tail_reads_the_total_from_the_head() -> None:
    """The start lines are printed once, at the top: a tail cut past them takes the head's."""
    text = _log("Starting training loop (max_steps=200)", steps=40)
    cut = text.index("Step 20 |")
    cut = text.rindex("\n", 0, cut) + 1
    summary = parse_log(text[cut:], log_start=False, head=text[:cut])
    assert summary.points[-1].step == 40 and summary.total_steps == 200
