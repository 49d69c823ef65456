"""LLaMA-Factory ``trainer_log.jsonl``, read only as a completion check.

Policy: the seed says the JSONL is unreliable mid-run (sparse, empty, frozen) and must never
drive live status; it only answers "did the run reach its last step?" before consolidation.
A resumed run appends and repeats steps, so the LAST record wins, not the largest. Broken or
partial lines (a tail cut mid-record) are skipped; this function never raises.
"""

from __future__ import annotations

import json
from math import isfinite

from probes.models import Frozen

_MAX_LINE = 65536


class JsonlStatus(Frozen):
    """What the last usable ``trainer_log.jsonl`` record says."""

    current_steps: int | None = None
    total_steps: int | None = None
    finished: bool = False
    records: int = 0
    """How many records parsed (0: empty or unreadable file)."""


def _as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not isfinite(value):
        return None
    return int(value)


def parse_trainer_log_jsonl(text: str | bytes) -> JsonlStatus:
    """The last record's ``current_steps``/``total_steps``; finished when current >= total."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    current, total, records = None, None, 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("{") or len(line) > _MAX_LINE:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        step = _as_int(record.get("current_steps"))
        if step is None:
            continue
        records += 1
        current = step
        total = _as_int(record.get("total_steps")) or total
    finished = current is not None and total is not None and total > 0 and current >= total
    return JsonlStatus(current_steps=current, total_steps=total, finished=finished, records=records)
