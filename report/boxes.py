"""How a status table is drawn: a rich SQUARE box rendered at an explicit width, no colour.

Policy: every line fits the requested width. Numeric cells never wrap; text cells (Job,
Trend, Note) wrap inside the box and fold over-long words; when even the narrowest text
columns would not fit, optional metric columns are folded into the last column's text
(``H 0.512 LR 0.012``) before rich may squeeze anything, so the box never breaks. The Job
column keeps up to :data:`NAME_ROOM` columns while prose keeps :data:`TEXT_FLOOR`. Control
characters become spaces first (:func:`report.cells.printable`): they would shift the box.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from io import StringIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from report.cells import DASH, printable
from report.layouts import Column, Row

TEXT_MIN_WIDTH = 12
"""Narrowest any wrapping text column may ever get (very narrow widths)."""
NAME_FLOOR = 24
"""Job names wrap mid-word below this; optional metric columns fold first."""
NAME_ROOM = 28
"""Widest the Job column gets while the prose columns can still keep ``TEXT_FLOOR``."""
TEXT_FLOOR = 18
"""Trend/Note read as prose down to about this width; optional metric columns fold first."""


@dataclass(frozen=True)
class RenderedTable:
    """One titled box table; ``header_lines``/``row_heights`` let chunkers split between rows."""

    bucket: str
    title: str
    text: str
    header_lines: int = 1
    row_heights: tuple[int, ...] = ()


def _console(width: int, file: StringIO) -> Console:
    return Console(
        width=width, file=file, color_system=None, force_terminal=False,
        legacy_windows=False, no_color=True, highlight=False, emoji=False, soft_wrap=False,
        markup=False,
    )


def _min_width(columns: Sequence[Column], cells: Sequence[Sequence[str]]) -> int:
    """Narrowest the table can be with these columns without squeezing any number."""
    total = len(columns) + 1  # vertical rules
    for index, column in enumerate(columns):
        natural = max([cell_len(column.header)] + [cell_len(row[index]) for row in cells])
        if column.numeric:
            total += natural + 2
        else:
            total += _text_floor(index, column, natural) + 2
    return total


def _text_floor(index: int, column: Column, natural: int) -> int:
    """The width a text column keeps before optional columns fold (names get more room)."""
    longest_header_word = max(cell_len(word) for word in column.header.split())
    floor = NAME_FLOOR if index == 0 else TEXT_FLOOR
    return min(natural, max(floor, longest_header_word))


def _text_widths(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int,
) -> dict[int, int]:
    """Fixed widths for the text columns when they must wrap, so the Job column keeps room.

    Left alone, rich shrinks the widest wrapping columns first until Job and Trend end up
    equally narrow and names wrap mid-word; its ``min_width`` can push a table past the width.
    Here the job name gets up to ``NAME_ROOM`` columns while the other text columns can keep
    ``TEXT_FLOOR``, and those share what is left in proportion to their natural width.
    """
    text = [i for i, c in enumerate(columns) if not c.numeric]
    natural = {i: _natural(i, c, cells) for i, c in enumerate(columns)}
    fixed = sum(natural[i] + 2 for i in natural if i not in text) + len(columns) + 1
    avail = width - fixed - 2 * len(text)
    if not text or sum(natural[i] for i in text) <= avail or avail < TEXT_MIN_WIDTH * len(text):
        return {}
    out: dict[int, int] = {}
    rest = text
    if text[0] == 0 and len(text) > 1:
        keep_others = sum(min(natural[i], TEXT_FLOOR) for i in text[1:])
        out[0] = min(natural[0], max(TEXT_MIN_WIDTH, min(NAME_ROOM, avail - keep_others)))
        avail -= out[0]
        rest = text[1:]
    total = sum(natural[i] for i in rest)
    for i in rest:
        share = avail * natural[i] // max(total, 1)
        out[i] = min(natural[i], max(min(TEXT_MIN_WIDTH, natural[i]), share))
    spare = avail - sum(out[i] for i in rest)
    # Rounding and floors leave a little over or under: give it to (or take it from) the
    # widest columns, never squeezing one below its floor, so numbers are never truncated.
    for i in sorted(rest, key=lambda i: -out[i]):
        if spare > 0:
            step = min(spare, natural[i] - out[i])
        else:
            step = max(spare, min(0, TEXT_MIN_WIDTH - out[i]))
        out[i] += step
        spare -= step
    return out


def _natural(index: int, column: Column, cells: Sequence[Sequence[str]]) -> int:
    return max([cell_len(column.header)] + [cell_len(row[index]) for row in cells])


def fold_cells(
    layout: Sequence[Column], rows: Sequence[Row], width: int,
) -> tuple[list[Column], list[list[str]]]:
    """Drop optional columns (lowest rank first) into the last column until the table fits."""
    kept = list(layout)
    folded: list[Column] = []
    optional = sorted((c for c in layout if c.fold_label), key=lambda c: c.fold_rank)
    while True:
        cells = [_row_cells(layout, kept, folded, row) for row in rows]
        if not optional or _min_width(kept, cells) <= width:
            return kept, cells
        column = optional.pop(0)
        kept.remove(column)
        folded.append(column)


def _row_cells(
    layout: Sequence[Column], kept: Sequence[Column], folded: Sequence[Column], row: Row,
) -> list[str]:
    cells = [printable(column.cell(row)) for column in kept]
    if folded:
        parts = []
        # Layout order, so a folded row reads like the full-width header did.
        for column in (c for c in layout if c in folded):
            value = printable(column.cell(row))
            if value == DASH and not column.always:  # not emitted yet: a folded "—" per
                continue  # row is noise, but for a signal every row must show
            parts.append(value if value.startswith("imp ") else f"{column.fold_label} {value}")
        if parts:
            cells[-1] = " ".join(parts) + "; " + cells[-1]
    return cells


def render_box(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], *, width: int,
    bucket: str = "", title: str = "",
) -> RenderedTable:
    """Render rows of ready-made cell strings as one SQUARE box table at most ``width`` wide.

    When the columns fit at the widths rich would give them (each at its natural width, the
    wrapping text columns at :func:`_text_widths`' when the table is too wide for that) and
    every header fits its column, the box is joined from strings as rich would draw it
    (``_render_lines``: a cell too wide for its column wrapped as rich wraps it). Else (a
    width too narrow for the text floors, a header wider than its column, a cell holding a
    line break) it is drawn by rich once with a rule between rows: the rules reveal where
    each wrapped row ends, and the table without them is the same lines less those rules
    (the rule under the header is drawn alike in both).
    """
    shown = [[printable(cell) for cell in row] for row in cells]
    natural = [_natural(i, c, shown) for i, c in enumerate(columns)]
    widths = _text_widths(columns, cells, width)
    spans = [widths.get(i, n) for i, n in enumerate(natural)]
    if sum(spans) + 3 * len(columns) + 1 <= width and all(
            cell_len(c.header) <= span for c, span in zip(columns, spans, strict=True)) and not any(
            "\n" in cell for row in shown for cell in row):  # a kept line break: rich measures
        return _render_lines(columns, shown, spans, width, bucket=bucket, title=title)
    table = Table(box=box.SQUARE, padding=(0, 1), highlight=False, show_lines=True)
    for index, column in enumerate(columns):
        table.add_column(
            Text(column.header, justify="center"),
            no_wrap=column.numeric,
            overflow="ellipsis" if column.numeric else "fold",
            width=widths.get(index),
        )
    for row in shown:
        table.add_row(*map(Text, row))
    ruled = _print(table, width).split("\n")
    rules = [i for i, line in enumerate(ruled) if line.startswith("├")]
    heights = tuple(b - a - 1 for a, b in zip(rules, [*rules[1:], len(ruled) - 1], strict=True))
    between = set(rules[1:])
    text = "\n".join(line for i, line in enumerate(ruled) if i not in between)
    return RenderedTable(bucket=bucket, title=title, text=text, header_lines=rules[0] - 1,
                         row_heights=heights if cells else ())


def _render_lines(
    columns: Sequence[Column], shown: Sequence[Sequence[str]], spans: Sequence[int],
    width: int, *, bucket: str, title: str,
) -> RenderedTable:
    """The table whose columns fit at ``spans`` (their widths less padding), drawn as rich
    draws it (SQUARE box, a pad space either side, headers centred on one line, cells
    left-aligned and top-aligned, a cell wider than its column word-wrapped and folded by
    rich's own ``Text.wrap``) by joining strings: rich's layout pass over 5,000 one-line
    rows cost 0.5 s, over 256 wrapped ones 0.2 s (the property tests hold the two equal)."""
    console = _console(width, StringIO())  # Text.wrap measures with it; nothing is printed
    pads = [own + 2 for own in spans]
    heads = []
    for column, pad in zip(columns, pads, strict=True):
        excess = pad - cell_len(column.header)
        heads.append(" " * (excess // 2) + column.header + " " * (excess - excess // 2))
    lines = [_rule("┌", "┬", "┐", pads), "│" + "│".join(heads) + "│",
             _rule("├", "┼", "┤", pads)]
    heights = []
    known: dict[tuple[str, int], list[str]] = {}  # a table repeats its cells (notes, states)
    for row in shown:
        wrapped = [_wrapped(cell, own, console, known)
                   for cell, own in zip(row, spans, strict=True)]
        height = max(map(len, wrapped))
        heights.append(height)
        for at in range(height):
            lines.append("│" + "│".join(
                f" {part}{' ' * (own + 1 - cell_len(part))}"
                for part, own in ((cell[at] if at < len(cell) else "", own)
                                  for cell, own in zip(wrapped, spans, strict=True))) + "│")
    lines.append(_rule("└", "┴", "┘", pads))
    return RenderedTable(bucket=bucket, title=title, text="\n".join(lines), header_lines=1,
                         row_heights=tuple(heights))


def _wrapped(cell: str, width: int, console: Console,
             known: dict[tuple[str, int], list[str]]) -> list[str]:
    """``cell``'s lines in a column ``width`` cells wide, as rich wraps a Text there (left
    justified, over-long words folded); a cell that fits is its own one line. ``known``:
    the cells this table wrapped already."""
    if cell_len(cell) <= width and len(cell) <= width:
        return [cell]
    lines = known.get((cell, width))
    if lines is None:
        lines = known[cell, width] = [
            line.plain for line in Text(cell).wrap(console, width, justify="left",
                                                   overflow="fold")]
    return lines


def _rule(left: str, middle: str, right: str, spans: Sequence[int]) -> str:
    return left + middle.join("─" * span for span in spans) + right


def _print(table: Table, width: int) -> str:
    buffer = StringIO()
    _console(width, buffer).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").split("\n"))
