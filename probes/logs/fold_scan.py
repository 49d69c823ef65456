"""The restored metric pass: ``FoldScan`` and the bounded points it holds between two reads.

Policy: ``probes.logs.metric_carry`` freezes a ``MetricScan`` and thaws it as a ``FoldScan``
(its module policy says what is kept). Thawed, the scan's points are a ``FoldPoints``: only the
``KEEP_POINTS`` steps logged last are points, the steps logged before them are intervals of
step numbers, and ``in`` answers for both. ``FoldScan`` numbers bar-less HF dicts whose middle
the carry dropped as if they were there.
"""

from __future__ import annotations

from itertools import islice

from probes.logs.carried import Carried
from probes.logs.history import MetricScan
from probes.logs.scan_core import Plan
from probes.logs.step_intervals import StepIntervals
from probes.models import LogTime, MetricPoint

KEEP_POINTS = 32
"""Points kept: ``probes.logs.recent.HISTORY_DEPTH`` (the summary's history depth)."""


class PointCarry(Carried):
    """A ``MetricPoint`` as carried."""

    step: int
    values: dict[str, float]
    line_no: int | None = None
    wall_time: LogTime | None = None


def point_carry(point: MetricPoint) -> PointCarry:
    return PointCarry(step=point.step, values=point.values, line_no=point.line_no,
                      wall_time=point.wall_time)


class FoldPoints(dict[int, MetricPoint]):
    """``MetricScan.points`` holding the last points, answering ``in`` for every step logged."""

    def __init__(self, points: tuple[PointCarry, ...], logged: StepIntervals,
                 live: tuple[MetricPoint, ...] | None = None) -> None:
        if live is None or len(live) != len(points):
            live = tuple(MetricPoint.model_construct(
                step=p.step, values=dict(p.values), line_no=p.line_no, wall_time=p.wall_time)
                for p in points)
        super().__init__((m.step, m) for m in live)
        self.logged = logged
        self.lost = False
        """A restart went back below the points kept, to where this pass no longer knows the
        points the whole pass keeps: the log must be read afresh (``LogCarry.afresh``)."""
        self.carried: dict[int, tuple[MetricPoint, PointCarry]] = {
            id(m): (m, c) for m, c in zip(live, points, strict=True)}
        """The carried form of the points restored (by object): a snapshot reuses it."""

    def carry_of(self, point: MetricPoint) -> PointCarry:
        """``point`` as carried (the restored carry's own when ``point`` is one of it)."""
        known = self.carried.get(id(point))
        if known is not None and known[0] is point:
            return known[1]
        return point_carry(point)

    def __contains__(self, step: object) -> bool:
        return dict.__contains__(self, step) or step in self.logged

    def forget_from(self, step: int) -> None:
        """Forget the logged steps from ``step`` on (``MetricScan._rewind``, after the points
        from ``step`` on went). Fewer than ``KEEP_POINTS`` points left and a step below
        ``step`` logged before them: the whole pass keeps that old point (the run resumed
        below it), this one dropped it long ago (``lost``)."""
        self.logged.forget_from(step)
        if len(self) < KEEP_POINTS and self.logged.top() is not None:
            self.lost = True

    def logged_top(self) -> int | None:
        """The highest of the steps logged before the points kept."""
        return self.logged.top()

    def trim(self, keep: int) -> None:
        """Forget all but the ``keep`` points logged last (their steps stay in ``logged``)."""
        for oldest in list(islice(self, max(0, len(self) - keep))):  # oldest first
            del self[oldest]
            self.logged.add(oldest)


class FoldScan(MetricScan):
    """``MetricScan`` whose bar-less HF dicts may have a dropped middle (``hf_gap`` of them
    after the first ``hf_head`` ones), numbered as if they were there."""

    hf_head = 0
    hf_gap = 0

    @property
    def lost(self) -> bool:
        """A restart went back below the points kept (``FoldPoints.lost``)."""
        return isinstance(self.points, FoldPoints) and self.points.lost

    def _on_hf_dict(self, pairs: dict[str, float], line_no: int, plan: Plan) -> None:
        if self.hf_gap and (self.hf_anchor is not None or self.hf_prev is not None):
            # A bar at last: the dropped dicts become placeholders (module policy). With none,
            # this dict waits after the others, the gap kept (an increment's cost, not the
            # gap's: 12,000 placeholders recorded at each close cost a warm read 8 ms).
            head, tail = self.hf_unanchored[: self.hf_head], self.hf_unanchored[self.hf_head :]
            self.hf_unanchored = [*head, *[({}, 0)] * self.hf_gap, *tail]
            self.hf_gap = 0
        super()._on_hf_dict(pairs, line_no, plan)

    def _on_hf_save(self, step: int) -> None:
        if self.hf_gap:  # the dropped dicts become placeholders, as for a bar
            head, tail = self.hf_unanchored[: self.hf_head], self.hf_unanchored[self.hf_head :]
            self.hf_unanchored = [*head, *[({}, 0)] * self.hf_gap, *tail]
            self.hf_gap = 0
        super()._on_hf_save(step)

    def close(self, *, at_log_start: bool = True) -> None:
        if self.hf_gap:  # no bar came: dict i is counted step i, the dropped ones included
            head, tail = self.hf_unanchored[: self.hf_head], self.hf_unanchored[self.hf_head :]
            step_of = self.hf_counted_step
            for count, (pairs, line_no) in enumerate(head, start=1):
                self.record_counted(step_of(count), pairs, line_no)
            if isinstance(self.points, FoldPoints):
                self.points.logged.add(step_of(len(head) + 1), step_of(len(head) + self.hf_gap))
            for count, (pairs, line_no) in enumerate(tail, start=len(head) + self.hf_gap + 1):
                self.record_counted(step_of(count), pairs, line_no)
            self.hf_unanchored.clear()
            self.hf_gap = 0
            self.hf_counted = True
            self.in_line_order()
        super().close(at_log_start=at_log_start)
