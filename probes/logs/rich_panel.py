"""open-instruct's GRPO step metrics: a rich ``Metrics`` panel, wrapped to the console's width.

``open_instruct/grpo_fast.py`` (allenai/open-instruct) prints each training step's scalars with
``print_rich_single_line_metrics`` (``open_instruct/model_utils.py``): names grouped by their
first ``/`` part (``other`` for plain names), one table row a group, ``name: value`` pairs
joined by `` | `` (floats ``.2f``, ``.2e`` below 1e-5) inside ``Panel(title="Metrics")``.
Outside a terminal rich renders 80 columns wide: a group's pairs wrap onto the lines below,
under its values column, a value sometimes on the line after its name::

    ╭──────────────────────── Metrics ─────────────────────────╮
    │  other      episode: 1536 | training_step: 3 | epoch:    │
    │             0.03 | scores: 0.41 | lr: 1.00e-06           │
    ╰──────────────────────────────────────────────────────────╯

Policy: a panel is read from its titled top border, one line after another, and is a point
only at its bottom border; a line that is not the next one or no panel line ends it unread (a
panel cut at the end of a tail is no point yet). A group's wrapped lines are joined with a
space (rich wraps at a space), split at `` | ``, and each pair named ``group/name`` (a plain
name in ``other``). The step is ``training_step``; ``time/total`` its time.
"""

from __future__ import annotations

PANEL_TOP = "─ Metrics ─"
"""What the panel's top border holds (and the prefilter's needle for it)."""
PANEL_GATES = (PANEL_TOP, "│", "╰─")
_STEP_KEY = "training_step"
_STEP_TIME = "time/total"
"""grpo_fast's ``time/total``: the step's own time (``perf_counter()`` since it began), its
``sec_per_step`` (elsewhere ``time/total`` is no step time: Composer's is the run's hours)."""


class MetricsPanel:
    """One panel being read: its top line, the last line read, its inner lines."""

    __slots__ = ("last", "line_no", "rows")

    def __init__(self, line_no: int, last: int | None = None,
                 rows: list[str] | None = None) -> None:
        self.line_no = line_no
        self.last = line_no if last is None else last
        self.rows: list[str] = [] if rows is None else rows

    def read(self, body: str, line_no: int) -> bool | None:
        """Take ``body`` at ``line_no``: True while the panel goes on, False at its bottom
        border (complete), None when the line ends it unread."""
        if line_no != self.last + 1:
            return None
        text = body.strip()
        if text.startswith("╰"):
            return False
        if not (text.startswith("│") and text.endswith("│")) or len(self.rows) >= 200:
            return None
        self.last = line_no
        self.rows.append(text[1:-1])
        return True

    def metrics(self) -> tuple[int, dict[str, float]] | None:
        """(``training_step``, the panel's numbers by ``group/name``), or None."""
        values: dict[str, float] = {}
        for group, text in _groups(self.rows):
            for pair in text.split(" | "):
                name, colon, shown = pair.partition(": ")
                try:
                    number = float(shown) if colon else None
                except ValueError:
                    number = None
                if number is not None:
                    values[name.strip() if group == "other" else f"{group}/{name.strip()}"] = (
                        number)
        step = values.pop(_STEP_KEY, None)
        if step is None or not step.is_integer() or step < 0:
            return None
        took = values.pop(_STEP_TIME, None)
        if took is not None:
            values["sec_per_step"] = took
        return int(step), values


def is_panel_top(body: str) -> bool:
    """Whether ``body`` is the top border of a ``Metrics`` panel."""
    text = body.strip()
    return text.startswith("╭") and text.endswith("╮") and PANEL_TOP in text


def _groups(rows: list[str]) -> list[tuple[str, str]]:
    """(group, its pairs' text) of the panel's inner lines: a group's first line names it in
    the first column; the lines after it with that column blank continue it."""
    groups: list[tuple[str, str]] = []
    column = None
    for row in rows:
        name = row.split(None, 1)[0] if row.strip() else ""
        if column is None and name:
            lead = len(row) - len(row.lstrip())
            after = row[lead + len(name):]
            column = lead + len(name) + len(after) - len(after.lstrip())
        if column is None:
            continue
        head, rest = row[:column].strip(), row[column:].strip()
        if head:
            groups.append((head, rest))
        elif groups and rest:
            groups[-1] = (groups[-1][0], f"{groups[-1][1]} {rest}")
    return groups
