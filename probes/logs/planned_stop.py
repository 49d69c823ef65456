"""A trainer's own line that it stopped ahead of its time budget, so a chain successor resumes.

Policy: such a trainer saves, prints one line and exits 0, so the scheduler says COMPLETED
although the run is short of its total; the line is the reason. Read, the last one wins:

- NeMo-RL: ``Timeout has been reached, stopping training early`` (its GRPO/SFT/DPO/
  distillation loops return on ``checkpointing.checkpoint_must_save_by`` after saving);
- Megatron-LM ``--exit-duration-in-mins``: ``[exiting program after 239.0166 minutes]
  datetime: ...`` (``print_datetime``; the minutes are kept whole), and ``--exit-interval``:
  ``[exiting program at iteration 500] datetime: ...`` (older forks print it bare, after a
  rank prefix). Megatron's ``exiting program after receiving SIGTERM`` is a signal, not a
  budget, and is none.

What the line means for the run (whether a logged step follows it, the successor, the total)
is the judge's (``report.planned_stop``). Never raises; every capture is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probes.logs.prefilter import NeedleFilter
from probes.models import PlannedStop

__all__ = ["PLANNED_STOP_GATE", "read_planned_stop"]

_NEMO_RL = "Timeout has been reached, stopping training early"
_AFTER = re.compile(r"\bexiting program after (\d{1,9})(?:\.\d{0,30})? minutes\b")
_AT = re.compile(r"\bexiting program at iteration (\d{1,12})\b")
PLANNED_STOP_GATE = NeedleFilter(("timeout has been reached", "exiting program a"))
"""Every planned-stop line holds one of these."""


def planned_stop_text(line: str) -> str | None:
    """The planned stop ``line`` says, in the trainer's words (minutes whole), else None."""
    if _NEMO_RL in line:
        return _NEMO_RL
    if "exiting program a" not in line:
        return None
    after = _AFTER.search(line)
    if after is not None:
        return f"exiting program after {int(after.group(1))} minutes"
    at = _AT.search(line)
    return f"exiting program at iteration {int(at.group(1))}" if at is not None else None


def read_planned_stop(
    lines: Sequence[str], first_line_no: int = 1, *, gated: bool = True,
) -> PlannedStop | None:
    """The last planned-stop line of ``lines`` (numbered from ``first_line_no``), else None.

    ``gated``: only the lines ``PLANNED_STOP_GATE`` keeps are read (the tests compare both)."""
    kept = PLANNED_STOP_GATE.lines(lines) if gated else None
    order = reversed(range(len(lines)) if kept is None else kept)
    for index in order:
        text = planned_stop_text(lines[index])
        if text is not None:
            return PlannedStop(line_no=first_line_no + index, text=text)
    return None
