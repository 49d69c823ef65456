"""Which steps a run has logged, in bounded memory: sorted, disjoint, inclusive intervals.

Policy: a fold keeps only the metric points it reports (``fold_scan.KEEP_POINTS``), but
"was this step logged before?" must still be answered for every step read so far (a SkyRL
reward line makes a step of its own only if the step is new). Runs number their steps in
order, so the steps logged form a few intervals; past :data:`MAX_INTERVALS` the lowest are
forgotten (a reward line for a step that old would count as new).
"""

from __future__ import annotations

from bisect import bisect_right

MAX_INTERVALS = 256
"""Intervals kept; past it the lowest are forgotten (see the module policy)."""

Interval = tuple[int, int]


class StepIntervals:
    """A set of step numbers stored as sorted, disjoint, inclusive intervals."""

    def __init__(self, intervals: tuple[Interval, ...] = ()) -> None:
        self.starts = [lo for lo, _ in intervals]
        self.ends = [hi for _, hi in intervals]

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, int):
            return False
        at = bisect_right(self.starts, step) - 1
        return at >= 0 and step <= self.ends[at]

    def add(self, lo: int, hi: int | None = None) -> None:
        """Add the steps ``lo..hi`` (inclusive), merging neighbours."""
        hi = lo if hi is None else hi
        at = bisect_right(self.starts, lo) - 1
        ends = self.ends
        if (at == len(ends) - 1 >= 0 and lo == ends[at] + 1 and hi >= lo
                and self.starts[at] <= ends[at]):  # a run goes on: the last interval grows
            ends[at] = hi
            return
        if at >= 0 and self.ends[at] >= lo - 1:
            lo = self.starts[at]
        else:
            at += 1
        end = at
        while end < len(self.starts) and self.starts[end] <= hi + 1:
            hi = max(hi, self.ends[end])
            end += 1
        self.starts[at:end], self.ends[at:end] = [lo], [hi]
        if len(self.starts) > MAX_INTERVALS:  # forget the lowest (see the module policy)
            del self.starts[0], self.ends[0]

    def forget_from(self, step: int) -> None:
        """Forget every step from ``step`` on (a restarted run's new segment)."""
        at = bisect_right(self.starts, step - 1)  # intervals starting below ``step``
        del self.starts[at:], self.ends[at:]
        if self.ends and self.ends[-1] >= step:
            self.ends[-1] = step - 1

    def top(self) -> int | None:
        return self.ends[-1] if self.ends else None

    def intervals(self) -> tuple[Interval, ...]:
        return tuple(zip(self.starts, self.ends, strict=True))


