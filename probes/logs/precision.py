"""When a log prints one value twice, keep the more precise printing.

Policy: SkyRL prints ``reward/avg_raw_reward`` at full float precision on its reward line and
again as a 4-decimal display string in the step dict; verl 0.4 prints every value with 3
decimals. A rule that tests integrality (reward x rollouts_per_step) must read the most precise
value the log gives, so when two printings of one key agree to the shorter one's precision, the
one with more decimals wins; when they disagree, the step dict (the trainer's own record of the
step) wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation


def decimals(value: float) -> int | None:
    """Decimal places of ``value``'s shortest repr (a lower bound on what was printed)."""
    if not math.isfinite(value):
        return None
    try:
        exponent = Decimal(repr(value)).as_tuple().exponent
    except InvalidOperation:
        return None
    return max(0, -exponent) if isinstance(exponent, int) else None


def precise_merge(line: Mapping[str, float], step: Mapping[str, float]) -> dict[str, float]:
    """``{**line, **step}``, except where ``line`` holds a more precise printing of a value."""
    merged = {**line, **step}
    for key, fine in line.items():
        coarse = step.get(key)
        if coarse is None or coarse == fine:
            continue
        places = decimals(coarse)
        fine_places = decimals(fine)
        if places is None or fine_places is None or fine_places <= places:
            continue
        if abs(round(fine, places) - coarse) <= 0.5 * 10.0 ** -places + 1e-15:
            merged[key] = fine
    return merged
