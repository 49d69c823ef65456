"""Benchmark: drawing a sweep's box tables, joined from strings beside rich's Table (not a test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_render.py [--rows 256] [--repeat 5]

Three tables of a cold ``jobtables sweep`` of the bench cluster (``bench_cli``'s jobs), each
with ``--rows`` rows, drawn by ``report.boxes.render_box`` and by rich's own ``Table`` laid
out at the same widths (what ``render_box`` did for any table whose text must wrap), median
of ``--repeat``, side by side in one run, the texts checked equal:

1. SFT rows at their natural widths (one line each);
2. the Filling buffer table: pending notes that wrap at width 100;
3. RL rows with long trends wrapping at width 80.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rich import box  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from report.boxes import _console, _text_widths, render_box  # noqa: E402
from report.cells import printable  # noqa: E402
from report.layouts import LAYOUTS, Column  # noqa: E402

__test__ = False


def by_rich(columns: list[Column], cells: list[list[str]], width: int) -> str:
    """The table as rich lays it out at the widths ``render_box`` gives it."""
    table = Table(box=box.SQUARE, padding=(0, 1), highlight=False)
    widths = _text_widths(columns, cells, width)
    for index, column in enumerate(columns):
        table.add_column(Text(column.header, justify="center"), no_wrap=column.numeric,
                         overflow="ellipsis" if column.numeric else "fold",
                         width=widths.get(index))
    for row in cells:
        table.add_row(*(Text(printable(cell)) for cell in row))
    buffer = StringIO()
    _console(width, buffer).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").split("\n"))


def tables(rows: int) -> list[tuple[str, list[Column], list[list[str]], int]]:
    sft = [Column(h, lambda r: "", numeric=n) for h, n in
           (("Job", False), ("Step", True), ("Loss", True), ("Grad Norm", True), ("Trend", False))]
    rl = [Column(h, lambda r: "", numeric=n) for h, n in
          (("Job", False), ("Step", True), ("Reward", True), ("Entropy", True),
           ("Trend", False), ("Note", False))]
    return [
        ("SFT, natural widths, width 100", sft,
         [[f"sft-bench-deae7e-{n}", "200/200", "1.50", "0.38", "Loss flat; healthy ▁▂▃▅▇"]
          for n in range(rows)], 100),
        ("Filling buffer, notes wrap, width 100", list(LAYOUTS["buffer"]),
         [[f"sft-bench-deae7e-{n}", "SFT", "pending", "—",
           "Pending (Resources), expected start 12-01 14:24Z"] for n in range(rows)], 100),
        ("RL, trends and notes wrap, width 80", rl,
         [[f"rl-grpo-agentic-{n}", f"{n}/1000", "0.512", "0.61",
           "Reward rising 0.41→0.52 ▁▂▃▅▇", "checkpoint 400 saved 12 min ago; 3 restarts"]
          for n in range(rows)], 80),
    ]


def median_time(draw: Callable[[], str], repeat: int) -> tuple[float, str]:
    times, text = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        text = draw()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.rows} rows a table, median of {args.repeat} (same run)")
    for label, columns, cells, width in tables(args.rows):
        joined, text = median_time(lambda c=columns, r=cells, w=width:
                                   render_box(c, r, width=w).text, args.repeat)
        laid, reference = median_time(lambda c=columns, r=cells, w=width:
                                      by_rich(c, r, w), args.repeat)
        assert text == reference, label
        print(f"  {label:40} render_box {joined * 1000:7.1f} ms   rich Table {laid * 1000:7.1f} ms"
              f"   ({laid / joined:4.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
