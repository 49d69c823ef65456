"""A metrics tracker's JSON record behind a logger's prefix: Levanter's ``json_logger``.

Levanter (``src/levanter/tracker/json_logger.py``, ``JsonLoggerTracker.log``) logs each
``levanter.tracker.log(metrics, step=N)`` call as one JSON line through its Python logger
(``utils/logging.py``: ``%(asctime)s - 0 - %(name)s - %(filename)s:%(lineno)d - %(levelname)s
:: %(message)s``)::

    ... - INFO :: {"tracker": "json_logger", "event": "log", "step": 320, "metrics": \
{"train/loss": 1.7, "global_step": 320, "run_progress": 0.32}}

One step is several such records (the optimiser's ``optim/learning_rate`` first, then the
loss); ``run_progress`` is ``step / num_train_steps`` (``callbacks/_metrics.py``
``log_step_info``), the run's total at every step.

Policy: only an ``event`` of ``log`` (or none) with an integer ``step`` and a ``metrics``
object is a point; its numbers are read flat (a histogram's nested object is no metric), a
JSON ``NaN`` is the NaN the trainer logged. Its hyperparameters, summary and finish records
are not steps.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

TRACKER_GATE = '"metrics": {'
"""What a tracker record holds (``json.dumps``' separators)."""
_MAX_CHARS = 1 << 16


class TrackerRecord(NamedTuple):
    """One record's step, its numeric metrics and, when it says so, the run's total steps."""

    step: int
    values: dict[str, float]
    total: int | None


def tracker_record(body: str) -> TrackerRecord | None:
    """The tracker record ``body`` ends with, or None."""
    start = body.find('{"')
    if start < 0 or TRACKER_GATE not in body or len(body) - start > _MAX_CHARS:
        return None
    try:
        record = json.loads(body[start:])
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("event", "log") != "log":
        return None
    step, metrics = record.get("step"), record.get("metrics")
    if type(step) is not int or step < 0 or not isinstance(metrics, dict):
        return None
    values = {name: float(value) for name, value in metrics.items()
              if type(value) in (int, float) and isinstance(name, str)}
    if not values:
        return None
    return TrackerRecord(step, values, _total(step, values.get("run_progress")))


def _total(step: int, progress: float | None) -> int | None:
    """``step / run_progress``: the run's total steps, when the fraction is a real one."""
    if progress is None or not (math.isfinite(progress) and 0 < progress <= 1) or step < 1:
        return None
    total = round(step / progress)
    return total if total >= step else None
