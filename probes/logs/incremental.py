"""The incremental log fold: a summary from the bytes appended since the last read.

# TEMP until wt-a merges: this whole file is a stand-in for helper A's fold (same names and
# signature), so the cursor, store and sweep wiring can be built and tested against it. It
# carries the text itself and re-parses it whole with ``parse_log``: exact, but neither bounded
# nor faster than a cold read. The lead replaces this file with A's ``probes/logs/incremental.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from probes.logs.parse import parse_log
from probes.models import Frozen, LogSummary

SHIM_CARRY_CHARS = 1 << 20
"""TEMP until wt-a merges: the text the stand-in carries (a cold tail's size)."""


class LogCarry(Frozen):
    """TEMP until wt-a merges: what a fold carries from one chunk to the next."""

    text: str = ""


def parse_increment(
    carry: LogCarry | None,
    text: str | bytes,
    *,
    aliases: Mapping[str, str] | None = None,
    benign_patterns: Sequence[str] = (),
    max_line_chars: int = 65536,
    mtime: datetime | None = None,
) -> tuple[LogSummary, LogCarry]:
    """TEMP until wt-a merges: ``parse_log`` of the carried text and ``text``, and the carry."""
    new = bytes(text).decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    whole = (carry.text if carry is not None else "") + new
    summary = parse_log(whole, aliases=aliases, benign_patterns=benign_patterns,
                        max_line_chars=max_line_chars, mtime=mtime)
    return summary, LogCarry(text=whole[-SHIM_CARRY_CHARS:])
