"""EasyR1's console logger: each step a ``Step N`` line, then its metrics as a YAML block.

EasyR1 (hiyouga/EasyR1, ``verl/utils/logger/logger.py`` ``ConsoleLogger``) prints a step as
``print(f"Step {step}\\n" + convert_dict_to_str(unflatten_dict(data)))``: ``yaml.dump(data,
indent=2)`` of the metrics nested at each ``/`` (keys sorted; floats rounded to 3 decimals,
``1.0e-06`` when scientific, ``!!float 'nan'`` when not finite), then a blank line:

    Step 12
    actor:
      entropy_loss: 0.523
      grad_norm: 0.231
    critic:
      score:
        mean: 0.512

Policy: a block is read only after its ``Step N`` header, one line after another: the first
line that is not the next one (a blank line, a bar, a line the prefilter drops) or is no
``key:`` line ends it, and only then is it the step's point. A block still open where the
text ends is no point yet (the trainer may be printing it; a line cut mid-number would read
as another value): the next read, or the next line, ends it. So a tail cut inside a block
reads nothing of it (no header), and the ``Config`` dump (``ConsoleLogger.__init__``'s
``"Config\\n"`` + YAML) and ``Final validation metrics: `` + YAML, having no header, add none.
"""

from __future__ import annotations

import re
from math import inf, nan

YAML_SHAPE = (
    rb"^(?:\([^\n)]*\) )?(?:  )*[\w.@+-]*:"
    rb"(?: -?\.?(?:e[-+])?| !!float '-?(?:nan|inf)'| -?\.(?:nan|inf))?$"
)
"""A block's line as a prefilter skeleton (``NeedleFilter``'s ``shape``: ASCII lower-cased,
digits deleted): an optional Ray actor prefix, an indent, a key (all digits: empty), and a
number or nothing (a nesting key). A superset of them: ``0.523`` is ``.``, ``1.0e-06`` is
``.e-``, ``12`` empty. A value no number (a string, ``null``) is no candidate: its line, and
so the rest of its block, is not read (a block ends at a line not fed)."""

_HEADER_RE = re.compile(r"Step (\d{1,12})\s*$")
_LINE_RE = re.compile(r"( *)([A-Za-z0-9_][\w.@+-]*):(?: (.*))?$")
_SPECIAL = {".nan": nan, ".inf": inf, "-.inf": -inf, "+.inf": inf}


def easyr1_header(body: str) -> int | None:
    """The step of a ``Step N`` line that is nothing else, else None."""
    found = _HEADER_RE.match(body)
    return int(found.group(1)) if found is not None else None


def yaml_number(text: str) -> float | None:
    """A YAML scalar as PyYAML dumps a number (``0.5``, ``-3``, ``1.0e-06``, ``.nan``,
    EasyR1's ``!!float 'nan'``), else None (a string, a bool, ``null``)."""
    text = text.strip()
    if text.startswith("!!float "):
        text = text[8:].strip().strip("'")
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    if not text or (text[0] not in "+-.0123456789" and text.lower() not in ("nan", "inf")):
        return None
    try:
        return float(text)
    except ValueError:
        return None


class YamlStep:
    """One step's block being read: its step, header line, last line read, the keys open
    above the next line, and the ``/``-joined metrics read so far."""

    __slots__ = ("last", "line_no", "path", "step", "values")

    def __init__(self, step: int, line_no: int, last: int | None = None,
                 path: list[str] | None = None, values: dict[str, float] | None = None) -> None:
        self.step, self.line_no = step, line_no
        self.last = line_no if last is None else last
        self.path: list[str] = [] if path is None else path
        self.values: dict[str, float] = {} if values is None else values

    def read(self, body: str, line_no: int) -> bool:
        """Read ``body`` at ``line_no`` into the block; False when it ends the block (not the
        next line, no ``key:`` line, or indented deeper than a key opened)."""
        if line_no != self.last + 1:
            return False
        found = _LINE_RE.match(body)
        if found is None:
            return False
        indent, key, value = found.groups()
        depth, odd = divmod(len(indent), 2)
        if odd or depth > len(self.path):
            return False
        self.last = line_no
        del self.path[depth:]
        if not value:
            self.path.append(key)
            return True
        number = yaml_number(value)
        if number is not None:
            self.values["/".join((*self.path, key))] = number
        return True
