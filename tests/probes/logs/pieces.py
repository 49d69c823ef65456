"""The bot's warm read of a log, for tests: the log cut in pieces, each folded with
``parse_increment`` on the carry of the last, the carry passed through JSON between reads as
Redis keeps it."""

from __future__ import annotations

from datetime import datetime

from probes.logs.incremental import LogCarry, parse_increment
from probes.models import LogSummary

__test__ = False


def fold_in_pieces(text: str | bytes, pieces: int, *,
                   mtime: datetime | None = None) -> LogSummary:
    """The summary after folding ``text`` in ``pieces`` (about equal byte runs)."""
    data = text.encode() if isinstance(text, str) else text
    carry, summary = None, None
    size = max(1, len(data) // pieces)
    for at in range(0, len(data), size):
        summary, carry = parse_increment(carry, data[at:at + size], mtime=mtime)
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    assert summary is not None
    return summary
