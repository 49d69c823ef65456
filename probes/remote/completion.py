"""The completion check of a finished SFT run: ``trainer_log.jsonl`` / ``trainer_state.json``.

Policy: the seed says the JSONL is unreliable mid-run (sparse, empty, frozen) and must never
drive live status; it only answers "did the run reach its last step?" before cleanup. A
resumed run appends and repeats steps, so the LAST record wins, not the largest. Broken or
partial lines (a tail cut mid-record) are skipped; nothing here raises. Standard library only:
this runs on the login node.
"""

from __future__ import annotations

import json
from math import isfinite
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9
_MAX_LINE = 65536


def _as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not isfinite(value):
        return None
    return int(value)


def _status(current: int | None, total: int | None, records: int) -> Json:
    finished = current is not None and total is not None and total > 0 and current >= total
    return {"current_steps": current, "total_steps": total, "finished": finished,
            "records": records}


def parse_trainer_log_jsonl(text: str | bytes) -> Json:
    """The last record's ``current_steps``/``total_steps``; finished when current >= total."""
    if isinstance(text, (bytes, bytearray)):
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
    return _status(current, total, records)
