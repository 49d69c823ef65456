"""Whole-text prefilters: find the few lines of a tail that a per-line parser must look at.

Policy: a prefilter may name more lines than needed, never fewer, so running the detailed
per-line logic on its lines only gives exactly the result of running it on every line (the
property tests hold the fast path to the per-line reference on real fixture lines). Two kinds:

``NeedleFilter`` keeps the lines holding a literal needle, compared without case. It works
on a *skeleton* of the text: UTF-8 bytes with ASCII letters lower-cased and digits deleted.
Needles hold no digit, so deleting digits never hides one; and since a trainer repeats the same
few line shapes with new numbers, the skeletons repeat, so each distinct one is searched once.
The only non-ASCII characters ``str.lower()`` turns into ASCII letters (``İ``, ``K``) make a
line a candidate outright, so ASCII-only lowering stays a superset of ``needle in line.lower()``.

``pattern_lines`` keeps the lines where a cluster's own ``benign_patterns`` regex matches. A
pattern without anchors, lookarounds, back-references or possessive/atomic parts matches a
line's text only if a search over the whole tail meets that line, so such a pattern runs once
over the tail; any other pattern runs line by line, as before.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import compress

_UPPER_TO_LOWER = bytes.maketrans(bytes(range(65, 91)), bytes(range(97, 123)))
_DIGITS = b"0123456789"
_UNICODE_DIGIT = re.compile(r"[^\D0-9]")
_FOLDS_TO_ASCII = ("\u0130", "\u212a")
"""The only characters whose ``str.lower()`` holds an ASCII letter but which are not ASCII."""

# Conservative: anything that could be an anchor, lookaround, group reference, inline group,
# atomic group or possessive repeat sends the pattern to the per-line path.
_CONTEXT_MARKS = re.compile(r"[\^$]|\\[AbBZzG0-9g]|\(\?(?![aiLmsux]*(?:-[imsx]+)?[:)])|[*+?}]\+")

_Node = dict[int, "_Node"]
"""A trie node: next byte -> child; key -1 marks the end of a word."""


def _trie(words: Iterable[bytes]) -> bytes:
    """One regex alternation for ``words`` with shared prefixes factored (sre tries fewer arms)."""
    root: _Node = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}

    def emit(node: _Node) -> bytes:
        arms = [re.escape(bytes([b])) + emit(child) for b, child in sorted(node.items()) if b >= 0]
        if not arms:
            return b""
        body = arms[0] if len(arms) == 1 else b"(?:" + b"|".join(arms) + b")"
        return b"(?:" + body + b")?" if -1 in node else body

    return emit(root)


def needle_pattern(words: Iterable[str]) -> re.Pattern[str]:
    """One regex matching any of ``words`` (a trie, as ``NeedleFilter``'s: sre tries one
    arm per first character rather than every word at every position)."""
    unique = sorted(set(words))
    if not unique or not all(w and w.isascii() for w in unique):
        return re.compile("|".join(re.escape(w) for w in unique))
    return re.compile(_trie(w.encode() for w in unique).decode("ascii"))


class NeedleFilter:
    """Finds the lines holding any of ``needles`` (case-insensitive; needles hold no digit)."""

    def __init__(
        self, needles: Iterable[str], *, unicode_digits: bool = False, shape: bytes = b"",
    ) -> None:
        """``unicode_digits`` also keeps lines holding a non-ASCII decimal digit: a regex's
        ``\\d`` matches those, and deleting only ASCII digits keeps them. ``shape`` is a
        regex over skeletons (multi-line mode: ``^`` and ``$`` are a line's ends) that keeps
        the lines it meets too: for a line form no literal names (an indented ``key:``)."""
        self._unicode_digits = unicode_digits
        words = {needle.lower() for needle in needles}
        if not words or any(not w or any(c.isdigit() for c in w) or "\n" in w for w in words):
            raise ValueError("needles must be non-empty, digit-free and single-line")
        encoded = {w.encode() for w in words} | {c.encode() for c in _FOLDS_TO_ASCII}
        self.needles = frozenset(words)
        self._pattern = re.compile(_trie(sorted(encoded)))
        self._shape = re.compile(shape, re.MULTILINE) if shape else None

    def lines(
        self, lines: Sequence[str], start: int = 0, stop: int | None = None,
    ) -> list[int] | None:
        """Indices of the lines that may hold a needle; None when a line holds a ``\\n``.

        ``start``/``stop`` (``0 <= start``): only among ``lines[start:stop]``, numbered from
        ``start``, as ``lines(lines[start:stop])`` finds them (but None when any line of
        ``lines`` holds a ``\\n``: a split line never does); a slice would be a new list, and
        only ``lines`` itself shares its skeletons (``shared_skeletons``)."""
        whole = start == 0 and stop is None
        if not whole and not range(len(lines))[start:stop]:
            return self.lines(())  # as for an empty slice
        found = self._hits(lines)
        if found is None:
            return None
        copy, hits = found
        if not hits:
            return []
        marks = copy.marks(hits)
        if whole:
            return list(compress(range(len(marks)), marks))
        span = range(len(marks))[start:stop]
        return list(compress(range(len(span)), marks[span.start:span.stop]))

    def groups(self, lines: Sequence[str]) -> dict[bytes, list[int]] | None:
        """``lines`` as ``lines()`` finds them, grouped by skeleton (ASCII lower-cased, digits
        deleted): a reader can judge a repeated line shape once. None as for ``lines()``."""
        found = self._hits(lines)
        if found is None:
            return None
        copy, hits = found
        grouped: dict[bytes, list[int]] = {skeleton: [] for skeleton in hits}
        if hits:
            order, ids = copy.ids()
            by_id = {order[skeleton]: indices for skeleton, indices in grouped.items()}
            for index in compress(range(len(ids)), copy.marks(hits)):
                by_id[ids[index]].append(index)
        return grouped

    def hits(self, lines: Sequence[str]) -> tuple[Skeletons, set[bytes]] | None:
        """(``lines``' skeletons, the distinct ones holding a needle or the shape): a reader
        judges each distinct skeleton once and finds its lines by ``Skeletons.indices``. None
        as for ``lines()``."""
        return self._hits(lines)

    def _hits(self, lines: Sequence[str]) -> tuple[Skeletons, set[bytes]] | None:
        """(the lines' skeletons, the distinct skeletons holding a needle or the shape)."""
        copy = skeletons_of(lines)
        if copy is None:
            return None
        hits = self._matching(copy.joined, self._pattern)
        if self._shape is not None:
            hits |= self._matching(copy.joined, self._shape)
        if self._unicode_digits:
            hits.update(s for s in copy.unique if not s.isascii() and _has_unicode_digit(s))
        return copy, hits

    @staticmethod
    def _matching(joined: bytes, pattern: re.Pattern[bytes]) -> set[bytes]:
        """The distinct lines of ``joined`` ``pattern`` meets (each line searched at most once).

        Searched over the whole text, line by line once hits are dense (a config dump: most
        lines hold a quote or a brace): there ``filter`` runs the search per line in C, where
        the loop here costs a turn of Python per hit. ``pattern`` never crosses a line end
        (no needle holds one; a shape's ``^``/``$`` are its line's), so both meet the same."""
        hits: set[bytes] = set()
        found = pattern.search(joined)
        while found is not None:
            start = joined.rfind(b"\n", 0, found.start()) + 1
            end = joined.find(b"\n", found.end())
            end = len(joined) if end < 0 else end
            hits.add(joined[start:end])
            if end >= len(joined):
                break
            if not len(hits) % _DENSE_CHECK and len(hits) > _DENSE * joined.count(b"\n", 0, end):
                hits.update(filter(pattern.search, joined[end + 1 :].split(b"\n")))
                break
            found = pattern.search(joined, end + 1)
        return hits


_DENSE_CHECK = 32
_DENSE = 0.25
"""Past this share of the lines searched holding a hit, the rest are searched line by line."""


class Skeletons:
    """Every line's skeleton (UTF-8, ASCII lower-cased, digits deleted), and the distinct
    ones joined on ``\\n``: what every ``NeedleFilter`` searches."""

    __slots__ = ("_clock", "_ids", "joined", "skeletons", "unique")

    def __init__(self, skeletons: list[bytes]) -> None:
        self.skeletons = skeletons
        self.unique = dict.fromkeys(skeletons)
        self.joined = b"\n".join(self.unique)
        self._clock: bool | None = None
        self._ids: tuple[dict[bytes, int], bytes | list[int]] | None = None

    def ids(self) -> tuple[dict[bytes, int], bytes | list[int]]:
        """(each distinct skeleton's number, in order of first line; each line's skeleton's
        number: a ``bytes`` when at most 256 are distinct), made once for every filter."""
        if self._ids is None:
            order = dict(zip(self.unique, range(len(self.unique)), strict=True))
            ids = list(map(order.__getitem__, self.skeletons))
            self._ids = (order, bytes(ids) if len(order) <= 256 else ids)
        return self._ids

    def marks(self, hits: Iterable[bytes]) -> bytes | list[bool]:
        """Per line, whether its skeleton is one of ``hits`` (distinct skeletons of these
        lines): a line's mark is its skeleton number's, looked up in C (``bytes.translate``
        of the numbers when they fit a byte), not each skeleton compared with the hits."""
        order, ids = self.ids()
        if isinstance(ids, bytes):
            table = bytearray(256)
            for hit in hits:
                table[order[hit]] = 1
            return ids.translate(table)
        flags = [False] * len(order)
        for hit in hits:
            flags[order[hit]] = True
        return list(map(flags.__getitem__, ids))

    def indices(self, hits: set[bytes]) -> list[int]:
        """The indices of the lines whose skeleton is one of ``hits``, ascending (in C)."""
        if not hits:
            return []
        return list(compress(range(len(self.skeletons)), self.marks(hits)))

    def may_hold_time(self) -> bool:
        """Whether a line may hold a time of day ``HH:MM:SS`` (every stamp the log clock reads
        has one): a skeleton holds ``::`` (the digits deleted), or a non-ASCII decimal digit,
        which ``\\d`` matches and the skeleton keeps. Judged once."""
        if self._clock is None:
            joined = self.joined
            self._clock = b"::" in joined or (not joined.isascii() and any(
                not s.isascii() and _has_unicode_digit(s) for s in self.unique))
        return self._clock


def _build(lines: Sequence[str]) -> Skeletons | None:
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    skeletons = text.translate(_UPPER_TO_LOWER, _DIGITS).split(b"\n")
    if len(skeletons) != len(lines):
        return None  # a line holds a line end: no skeleton per line
    return Skeletons(skeletons)


class _Held(threading.local):
    """The line lists whose skeletons this thread shares (``shared_skeletons``): by identity,
    each with its skeletons once built (an empty list: not yet)."""

    def __init__(self) -> None:
        self.lists: dict[int, tuple[Sequence[str], list[tuple[int, Skeletons | None]]]] = {}


_held = _Held()


@contextmanager
def shared_skeletons(*line_lists: Sequence[str]) -> Iterator[None]:
    """While open, every ``NeedleFilter`` given one of ``line_lists`` (the same object, not
    changed meanwhile) builds its skeletons once for all filters: a parse runs six filters
    over the same lines. On leaving, the copies are dropped (nothing outlives the parse)."""
    before = _held.lists
    _held.lists = {**before, **{id(lines): (lines, []) for lines in line_lists}}
    try:
        yield
    finally:
        _held.lists = before


def skeletons_of(lines: Sequence[str]) -> Skeletons | None:
    """``lines``' skeletons (None when a line holds a ``\\n``): shared when ``lines`` is
    held by ``shared_skeletons`` and unchanged in length, else built for this call."""
    entry = _held.lists.get(id(lines))
    if entry is None or entry[0] is not lines:
        return _build(lines)
    cached = entry[1]
    if not cached:
        cached.append((len(lines), _build(lines)))
    size, built = cached[0]
    if size != len(lines):
        return _build(lines)  # changed since: never a stale copy
    return built


def held_skeletons(lines: Sequence[str]) -> Skeletons | None:
    """``lines``' skeletons if ``shared_skeletons`` holds them (built, unchanged), else None:
    never built for this call (for a shortcut that pays only when they are at hand)."""
    entry = _held.lists.get(id(lines))
    if entry is None or entry[0] is not lines:
        return None
    return skeletons_of(lines)


def _has_unicode_digit(skeleton: bytes) -> bool:
    return _UNICODE_DIGIT.search(skeleton.decode("utf-8", "surrogatepass")) is not None


def is_context_free(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` matches a string only through the matched text itself (no context)."""
    return _CONTEXT_MARKS.search(pattern.pattern) is None and pattern.search("") is None


def pattern_lines(
    lines: Sequence[str],
    patterns: Sequence[re.Pattern[str]],
    text_of: Callable[[str], str],
) -> set[int]:
    """Indices of the lines whose ``text_of(line)`` a pattern may match (a superset)."""
    found: set[int] = set()
    if not patterns:
        return found
    joined = "\n".join(lines)
    per_line = []
    for pattern in patterns:
        if is_context_free(pattern) and joined.count("\n") == len(lines) - 1:
            found.update(_spanned_lines(joined, pattern))
        else:
            per_line.append(pattern)
    if per_line:
        found.update(
            index
            for index, line in enumerate(lines)
            if any(p.search(text_of(line)) for p in per_line)
        )
    return found


def _spanned_lines(joined: str, pattern: re.Pattern[str]) -> Iterable[int]:
    """Every line any match of ``pattern`` in ``joined`` touches (a match may span lines)."""
    line, position = 0, 0
    for match in pattern.finditer(joined):
        line += joined.count("\n", position, match.start())
        last = line + joined.count("\n", match.start(), match.end())
        yield from range(line, last + 1)
        line, position = last, match.end()
