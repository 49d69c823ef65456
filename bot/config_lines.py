"""Where in a config file's text a refused key or value sits, so a ``ConfigError`` names the line.

Policy: pydantic and tomllib name a key path, not a line; these map the path back to the line
TOML read it from (tables, arrays of tables, dotted keys), and find where a value nested too
deep begins. Imported only when a file is refused (``bot.config_file`` imports it then), so a
command reading a good file never pays for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

from bot.config_file import MAX_CONFIG_DEPTH


def describe_errors(exc: ValidationError, text: str, source: str) -> str:
    locator = KeyLocator(text)
    lines = []
    for err in exc.errors():
        kinds = [p for p in err["loc"] if p in ("slurm", "kubernetes", "replay")]
        loc = tuple(p for p in err["loc"] if p not in ("slurm", "kubernetes", "replay"))
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "kind")  # the key whose value (or absence) picked no model
        short = err["type"] == "missing" and loc and isinstance(loc[-1], int)
        if short:  # a tuple's element: the file has the array, not a key ".1"
            loc = loc[:-1]
        key = ".".join(str(p) for p in loc) or "(top level)"
        line = locator.line_for(loc)
        where = f"{source}:{line}" if line else source
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "union_tag_invalid":
            msg = 'kind must be "slurm", "kubernetes" or "replay"'
        elif err["type"] == "union_tag_not_found":
            msg = 'kind is required: "slurm", "kubernetes" or "replay"'
        elif short:
            msg = f"expected {int(err['loc'][-1]) + 1} values, got {len(err['input'])}"
        elif err["type"] == "too_long":
            msg = (f"expected {err['ctx']['max_length']} values, "
                   f"got {err['ctx']['actual_length']}")
        elif err["type"] == "missing":
            msg = f"missing: a {kinds[0]} cluster needs it" if kinds else "missing: it is required"
        elif err["type"] in ("tuple_type", "list_type"):  # (TOML arrays are read as tuples)
            msg = f'expected an array (e.g. ["..."]), got {_toml_type(err["input"])}'
        lines.append(f"{where}: {key}: {msg}")
    return "; ".join(lines)


def _toml_type(value: object) -> str:
    """How TOML calls the type of a value it read."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


_SEGMENT = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)"""


_DOTTED = rf"{_SEGMENT}(?:\s*\.\s*{_SEGMENT})*"


_TABLE = re.compile(rf"^\s*\[(\[)?\s*({_DOTTED})\s*\]\]?\s*(#.*)?$")


_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")


_PART = re.compile(_SEGMENT)


def _key_parts(dotted: str) -> tuple[str, ...]:
    """``a."b.c".d`` -> ``('a', 'b.c', 'd')`` (TOML's bare, basic and literal keys)."""
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in _PART.findall(dotted))


def too_deep(source: str, line: int | None, key: str | None) -> str:
    where = f"{source}:{line}" if line else source
    what = f"{key}: " if key else ""
    return f"{where}: {what}nested more than {MAX_CONFIG_DEPTH} levels deep: not a config"


def top_line(text: str, top: str) -> int | None:
    """The first line whose table header or key starts with the top-level key ``top``."""
    for number, raw in enumerate(text.splitlines(), start=1):
        m = _TABLE.match(raw)
        dotted = m.group(2) if m else (k.group(1) if (k := _KEY.match(raw)) else None)
        if dotted is not None and _key_parts(dotted)[:1] == (top,):
            return number
    return None


_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")


def deep_value(text: str) -> tuple[int | None, str | None]:
    """Where the parser ran out of recursion: the line on which brackets and braces (outside
    simple strings and comments) open more than ``MAX_CONFIG_DEPTH`` deep, and the top-level
    key of the value there. Only to name the place in the error."""
    depth, table, key = 0, None, None
    for number, raw in enumerate(text.splitlines(), start=1):
        if depth == 0:
            if m := _TABLE.match(raw):
                table = _key_parts(m.group(2))[:1]
            elif k := _KEY.match(raw):
                key = (table or _key_parts(k.group(1)) or (None,))[0]
        bare = _QUOTED.sub("", raw).split("#", 1)[0]
        for ch in bare:
            depth += 1 if ch in "[{" else -1 if ch in "]}" else 0
            if depth > MAX_CONFIG_DEPTH:
                return number, key
    return None, key


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
"""Where tomllib says it stopped: ``Invalid value (at line 4, column 10)``."""


def syntax_error(source: str, text: str, message: str) -> str:
    """tomllib's ``message`` in the form every config mistake takes: ``file:LINE: key:
    reason (column N)``, the key being the one on that line (none on a broken header)."""
    if (at := _AT.search(message)) is None:  # "at end of document": no line to name
        return f"{source}: {message}"
    line = int(at.group(1))
    key = KeyLocator(text).key_on(line)
    what = f"{'.'.join(str(p) for p in key)}: " if key else ""
    return f"{source}:{line}: {what}{message[:at.start()]} (column {at.group(2)})"


class KeyLocator:
    """Maps a key path such as ``('clusters', 1, 'host')`` to its 1-based line in the file.

    As TOML reads them: ``[clusters.owners]`` after a ``[[clusters]]`` is a table of that
    last array entry, and a dotted key (``owners.alice = ...``) names each of its parts."""

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str | int, ...], int] = {}
        self._keys: dict[int, tuple[str | int, ...]] = {}
        table: tuple[str | int, ...] = ()
        counts: dict[tuple[str, ...], int] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            if m := _TABLE.match(raw):
                parts = _key_parts(m.group(2))
                if m.group(1):
                    counts[parts] = counts.get(parts, -1) + 1
                resolved: list[str | int] = []
                for end, part in enumerate(parts, start=1):
                    resolved.append(part)
                    if parts[:end] in counts:  # an array of tables: its latest entry
                        resolved.append(counts[parts[:end]])
                table = tuple(resolved)
                self._lines.setdefault(table, number)
                self._keys[number] = table
            elif m := _KEY.match(raw):
                parts = _key_parts(m.group(1))
                for end in range(1, len(parts) + 1):
                    self._lines.setdefault((*table, *parts[:end]), number)
                self._keys[number] = (*table, *parts)

    def key_on(self, line: int) -> tuple[str | int, ...] | None:
        """The full path of the key (or table header) written on ``line``, if one is."""
        return self._keys.get(line)

    def line_for(self, loc: Sequence[str | int]) -> int | None:
        path = tuple(loc)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None
