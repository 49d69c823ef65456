"""``excerpt.last_tally_line`` (a catch-all job's note) finds the line the line-by-line search
found, on every fixture log and on drawn texts mixing tallies, digits and every line break."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logs.excerpt import TALLY, last_tally_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def line_by_line(text: str) -> str | None:
    """How the note's tally line was found before: every line searched, latest first."""
    for line in reversed([ln.strip() for ln in text.splitlines()]):
        if line and TALLY.search(line):
            return line
    return None


def test_every_fixture_log_gives_the_same_line() -> None:
    logs = [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".out", ".log", ".txt")]
    assert len(logs) > 20
    for path in logs:
        text = path.read_bytes().decode("utf-8", "replace")
        assert last_tally_line(text) == line_by_line(text), path


_PIECES = st.sampled_from([
    "12 passed", "1 failed, 3 passed", "6,977 rows", "pushing 1.2k files", " examples",
    "Num examples = 51,200", "3 errors", "7_000 records in", "x1 passed", "1.5 shards",
    "loss 0.12 grad 3", "passed", "9 Passed", " ", "\t", "=", "\n", "\r", "\r\n", "\v", "\f",
    "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "1", ",", ".", "_", "k", "rowsy",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_drawn_texts_give_the_same_line(text: str) -> None:
    assert last_tally_line(text) == line_by_line(text)


def test_a_tally_above_later_lines_that_only_name_its_words() -> None:
    text = "upload: 6,977 rows -> org/ds\nrows were pushed\nall passed\n"
    assert last_tally_line(text) == "upload: 6,977 rows -> org/ds"
