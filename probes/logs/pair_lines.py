"""A step line of comma-separated ``name: number`` pairs, the step among them.

MaxText (AI-Hypercomputer/maxtext ``MetricLogger.log_metrics``) ends each training step with
``completed step: 12, seconds: 1.150, TFLOP/s/device: 470.000, Tokens/s/device: 57000.000,
total_weights: 65536, loss: 7.890`` (zero-based: the step as printed), and prints its config
one ``Config param <key>: <value>`` line a key (``steps``: the run's total).

Policy: general, not MaxText's alone: a line holding at least three ``name: number`` pairs
separated by ``, ``, one of them named ``step`` or ``<word> step``, is a step's point. A pair
named ``seconds`` is the step's time. Fewer pairs, or no step pair, is no step line (an epoch
summary, a memory report).
"""

from __future__ import annotations

import re

PAIRS_GATE = "step: "
MAXTEXT_STEPS = "Config param steps: "
"""MaxText's printed ``steps``: the run's total steps."""

_PAIR_RE = re.compile(
    r"(?:^|, |\] |\s)([A-Za-z][\w/.%()\-]{0,40}(?: [A-Za-z][\w/.%()\-]{0,40}){0,2}): "
    r"(-?\d{1,15}(?:\.\d{1,12})?(?:e[-+]?\d{1,3})?|nan|-?inf)(?=,|\s*$)")
_STEP_NAMES = frozenset({"step", "completed step", "train step", "training step"})
_TIME_NAMES = {"seconds": "sec_per_step"}


def parse_step_pairs(body: str) -> tuple[int, dict[str, float]] | None:
    """(the step, its other pairs by name) of a step-pairs line, else None."""
    pairs = {name: value for name, value in _PAIR_RE.findall(body)}
    if len(pairs) < 3:
        return None
    step = next((pairs.pop(name) for name in _STEP_NAMES if name in pairs), None)
    if step is None or not step.isdigit():
        return None
    return int(step), {_TIME_NAMES.get(name, name): float(value) for name, value in pairs.items()}


def maxtext_total(body: str) -> int | None:
    """The total of MaxText's ``Config param steps: N`` line (N > 0), else None."""
    text = body.partition(MAXTEXT_STEPS)[2].strip()
    return int(text) if text.isdigit() and 0 < int(text) < 10**12 else None
