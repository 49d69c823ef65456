"""One ruled render of a box table equals rich's own two renders (plain and ruled).

``report.boxes.render_box`` draws a table once with rules between rows and, when every column
fits at its natural width, hands rich those widths so it measures no cell. The reference here
is rich left to itself: the table drawn without rules for the text, and again with them for
the row heights, as ``render_box`` did before.
"""

from __future__ import annotations

from io import StringIO

from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.table import Table
from rich.text import Text

from report.boxes import _console, _text_widths, render_box
from report.cells import printable
from report.layouts import Column

Drawn = tuple[str, int, tuple[int, ...]]


def _reference(columns: list[Column], cells: list[list[str]], width: int) -> Drawn:
    table = Table(box=box.SQUARE, padding=(0, 1), highlight=False)
    widths = _text_widths(columns, cells, width)
    for index, column in enumerate(columns):
        table.add_column(Text(column.header, justify="center"), no_wrap=column.numeric,
                         overflow="ellipsis" if column.numeric else "fold",
                         width=widths.get(index))
    for row in cells:
        table.add_row(*(Text(printable(cell)) for cell in row))

    def draw() -> str:
        buffer = StringIO()
        _console(width, buffer).print(table)
        return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").split("\n"))

    text = draw()
    table.show_lines = True
    ruled = draw().split("\n")
    rules = [i for i, line in enumerate(ruled) if line.startswith("├")]
    heights = tuple(b - a - 1 for a, b in zip(rules, [*rules[1:], len(ruled) - 1], strict=True))
    return text, rules[0] - 1, heights if cells else ()


WORDS = st.sampled_from(["sft-bench-1f2e3d-17", "0.512", "—", "200/200", "loss ↓ 1.90→1.51",
                         "▁▂▃▅▇", "a", "", "x" * 40, "grad_norm flat", "漢字", "e\tx", "7"])
CELL = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=6),
    data=st.data(),
    width=st.integers(min_value=20, max_value=140),
)
def test_one_render_equals_richs_two(kinds: list[bool], data: st.DataObject,
                                     width: int) -> None:
    """Any mix of numeric and wrapping columns, any cells, any width: same text and heights."""
    columns = [Column(f"Col {i}" if i % 2 else "Header", lambda r: "", numeric=numeric)
               for i, numeric in enumerate(kinds)]
    rows = data.draw(st.lists(st.lists(CELL, min_size=len(kinds), max_size=len(kinds)),
                              max_size=6))
    drawn = render_box(columns, rows, width=width)
    assert (drawn.text, drawn.header_lines, drawn.row_heights) == _reference(columns, rows, width)
