"""Where a table cell's text breaks into lines: at spaces, then inside a word at separators.

Policy: a cell is wrapped greedily at spaces (never at a no-break space); a word only
breaks when it is wider than its column, and then after a run of separators
(``datagen-`` / ``consolidate``,
``hf://datasets/`` / ``team/``), never inside a name part; a part still wider than the
column (one 40-letter token) is folded, the one case a word is cut. Widths are display cells
(rich's ``cell_len``: CJK and emoji take two, combining marks none), and a character is never
split across lines, so a wrapped line is never wider than its column. A cell holding a line
break keeps it. Numeric cells do not wrap: :func:`shorten` ends them with ``…``.
"""

from __future__ import annotations

import re

from rich.cells import cell_len, split_graphemes

ELLIPSIS = "…"
SEPARATORS = "-_/.:,;=+@|&)]}>→"
# A separator ends a part of a word; "." and "," between digits do not (6,977 and 1.2M are
# one number). A part is anything up to and including a run of separators, or the word's end.
_SEP = r"(?:[-_/:;=+@|&)\]}>→]|[.,](?!\d))"
_PART = re.compile(rf"(?:(?!{_SEP}).)*{_SEP}+|(?:(?!{_SEP}).)+", re.DOTALL)


def longest_part(text: str) -> int:
    """The widest piece ``text`` can be broken into without cutting a word part (cells)."""
    return max((cell_len(part) for word in text.split(" ") for part in _PART.findall(word)),
               default=0)


def wrap_cell(text: str, width: int) -> list[str]:
    """``text``'s lines in a column ``width`` cells wide (at least one line, maybe empty)."""
    width = max(1, width)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if cell_len(paragraph) <= width:
            lines.append(paragraph)
        else:
            lines.extend(_wrap_paragraph(paragraph, width))
    return lines or [""]


def wrap_prose(text: str, width: int, indent: str = "", hanging: str | None = None) -> list[str]:
    """Prose outside a table (a title, a fact, a log line) in lines at most ``width`` cells
    wide, broken as :func:`wrap_cell` breaks a cell: the first line after ``indent`` (by
    default the text's own leading spaces), the others after ``hanging`` (default: the same)."""
    if not indent:
        stripped = text.lstrip(" ")
        if not stripped:  # a blank line is empty, however many spaces it had
            return [""]
        indent, text = text[:len(text) - len(stripped)], stripped
    hanging = indent if hanging is None else hanging
    # An indent keeps at most half the width (a log line indented past it still reads).
    indent, hanging = indent[:width // 2], hanging[:width // 2]
    room = width - max(cell_len(indent), cell_len(hanging))
    lines = wrap_cell(text, room)
    return [indent + lines[0]] + [hanging + line for line in lines[1:]]


def _wrap_paragraph(text: str, width: int) -> list[str]:
    lines: list[str] = []
    line, used = "", 0
    for word in _words(text, width):
        size = cell_len(word)
        parts = [word] if size <= width else _PART.findall(word)
        for index, part in enumerate(parts):
            gap = 1 if index == 0 and line else 0
            part_size = size if len(parts) == 1 else cell_len(part)
            if used + gap + part_size <= width:
                line += " " * gap + part
                used += gap + part_size
                continue
            if part_size <= width:  # a whole part on the next line
                if line:
                    lines.append(line)
                line, used = part, part_size
                continue
            # A part wider than any line must be cut. Its word's earlier parts are on this
            # line: it goes on from them; a word cut from its start starts a line.
            if gap or used == width:
                if line:
                    lines.append(line)
                line, used = "", 0
            slices = _fold(part, width - used, width)
            for piece, piece_size in slices:
                if used + piece_size > width:
                    lines.append(line)
                    line, used = "", 0
                line += piece
                used += piece_size
    lines.append(line)
    return lines


def _words(text: str, width: int) -> list[str]:
    """The words between spaces; a no-break space joins two into one, unless together they
    are wider than the column (then it breaks like a space: before any separator)."""
    words: list[str] = []
    for word in filter(None, text.split(" ")):
        if "\xa0" in word and cell_len(word) > width:
            words.extend(filter(None, word.split("\xa0")))
        else:
            words.append(word)
    return words


def _fold(part: str, first: int, width: int) -> list[tuple[str, int]]:
    """``part`` in slices: the first at most ``first`` cells wide, the others ``width``. A
    slice ends between graphemes: a combining mark stays with its letter, an emoji with its
    variation selector (``❤️`` is two cells, ``❤`` one), a flag's two letters together."""
    out: list[tuple[str, int]] = []
    piece, used, room = "", 0, first
    for grapheme, size in graphemes(part):
        if used + size > room and piece:
            out.append((piece, used))
            piece, used, room = "", 0, width
        piece += grapheme
        used += size
    out.append((piece, used))
    return out


def graphemes(text: str) -> list[tuple[str, int]]:
    """``text``'s graphemes with their widths in cells, as rich measures the whole string
    (their widths add up to ``cell_len(text)``); a regional-indicator pair is one flag."""
    spans, _ = split_graphemes(text)
    out: list[tuple[str, int]] = []
    for start, end, size in spans:
        grapheme = text[start:end]
        if out and _is_regional(grapheme) and _is_regional(out[-1][0]):
            out[-1] = (out[-1][0] + grapheme, out[-1][1] + size)
        else:
            out.append((grapheme, size))
    return out


def _is_regional(grapheme: str) -> bool:
    return len(grapheme) == 1 and "\U0001F1E6" <= grapheme <= "\U0001F1FF"


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, ending in ``…`` when anything was cut."""
    if cell_len(text) <= width:
        return text
    kept, used = "", 0
    for grapheme, size in graphemes(text):
        if used + size > width - 1:
            break
        kept += grapheme
        used += size
    return kept + ELLIPSIS if width >= 1 else ""


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells by taking out its middle (``…`` in its place): a job
    name's start says what it runs, its end which run (the seed, the arm, the attempt), so
    both are kept, the start the larger share. Graphemes are never split."""
    if cell_len(text) <= width:
        return text
    if width < 3:
        return shorten(text, width)
    parts = graphemes(text)
    head_cells = (width - 1) * 3 // 5
    head, used = "", 0
    for grapheme, size in parts:
        if used + size > head_cells:
            break
        head += grapheme
        used += size
    tail, room = "", width - 1 - used  # what the head left unused goes to the tail
    for grapheme, size in reversed(parts):
        if size > room:
            break
        tail = grapheme + tail
        room -= size
    return head + ELLIPSIS + tail
