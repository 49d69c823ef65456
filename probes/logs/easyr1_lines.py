"""EasyR1's console logger: each step a ``Step N`` line, then its metrics as a YAML block.

EasyR1 (hiyouga/EasyR1, ``verl/utils/logger/logger.py`` ``ConsoleLogger``) prints a step as
``print(f"Step {step}\\n" + convert_dict_to_str(unflatten_dict(data)))``: ``yaml.dump(data,
indent=2)`` of the metrics nested at each ``/`` (keys sorted; a Python float as its ``repr``,
``1.0e-06`` when scientific, ``.nan`` when not finite), then a blank line:

    Step 12
    actor:
      entropy_loss: 0.523
      grad_norm: 0.231
    critic:
      score:
        mean: 0.512

The metrics ``reduce_metrics`` gives (``np.mean`` of each list: the actor's, the reward
function's) are ``np.float64``, which the default Dumper writes as an object over several
lines, the value's bytes in base64 (its dtype under ``args``, its byte order second in
``state``)::

    actor:
      entropy_loss: !!python/object/apply:numpy._core.multiarray.scalar
      - !!python/object/apply:numpy.dtype
        args:
        - f8
        ...
        state: !!python/tuple
        - 3
        - <
        ...
      - !!binary |
        I9v5fmq84D8=

Such an object is read from its bytes; any other value that is no number (a string, ``null``)
is skipped, and the keys after it are read.

Policy: a block is read only after its ``Step N`` header, one line after another: the first
line that is not the next one (a bar, a line the prefilter drops) or is no ``key:`` line (a
blank line: ``print``'s own newline after the dump's, written with the block) ends it, and only
then is it the step's point. A block still open where the text ends (no blank line yet) is no
point yet (the trainer may be printing it; a line cut mid-number would read as another
value): the next read, or the next line, ends it. So a tail cut inside a block reads nothing
of it (no header), and the ``Config`` dump (``ConsoleLogger.__init__``'s ``"Config\\n"`` +
YAML) and ``Final validation metrics: `` + YAML, having no header, add none.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from datetime import datetime
from math import inf, nan

YAML_SHAPE = (
    rb"^(?:\([^\n)]*\)(?: |$))?(?:(?:  )*(?:[\w.@+-]*:(?: [^\n]*)?|- [^\n]*|[a-z+/=]+))?$"
)
"""A block's line as a prefilter skeleton (``NeedleFilter``'s ``shape``: ASCII lower-cased,
digits deleted): an optional Ray actor prefix, then nothing (the blank line that ends a
block), or an indent and a ``key:`` with any value or none (a nesting key), a ``- `` item or a
lone base64 word (a numpy scalar's lines). A superset of them: a value that is no number is
fed too, so that the keys after it are read (a block ends at a line not fed)."""

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


_OBJECT = "\0"
"""A ``path`` entry starting with it is a numpy scalar being read, never a key: ``\0``, the
part read (``args``, ``state``, ``binary``, ``done``), its dtype and its byte order, joined by
``_SEP``. Kept in ``path`` so that a fold's carry holds it as it holds the keys."""
_SEP = "\x01"
_PARTS = {"args:": "args", "state: !!python/tuple": "state", "- !!binary |": "binary"}
_SCALAR_TAG = re.compile(r"!!python/object/apply:numpy\.(?:_?core\.)?multiarray\.scalar$")
_STRUCT = {"f8": "d", "f4": "f", "f2": "e", "i8": "q", "i4": "i", "i2": "h", "i1": "b",
           "u8": "Q", "u4": "I", "u2": "H", "u1": "B"}
_FLOATS = {8: "f8", 4: "f4", 2: "f2"}


def numpy_scalar(dtype: str, order: str, text: str) -> float | None:
    """The number a numpy scalar's ``!!binary`` base64 ``text`` holds, given its dtype
    (``f8``) and byte order (``<``, ``>``, ``|``), else None. A dtype that is a YAML alias
    (``- *id001``: the Dumper writes the first scalar's dtype once, anchored, and refers to it
    after) is not read: a float of the bytes' width, little-endian, as ``np.mean`` gives on
    every machine EasyR1 runs on."""
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
    code = _STRUCT.get(dtype or _FLOATS.get(len(data), ""))
    if code is None:
        return None
    try:
        (value,) = struct.unpack((">" if order == ">" else "<") + code, data)
    except struct.error:
        return None
    return float(value)


class YamlStep:
    """One step's block being read: its step, header line, last line read, the keys open
    above the next line, and the ``/``-joined metrics read so far."""

    __slots__ = ("last", "line_no", "path", "step", "values")
    fmt = "easyr1"
    """The format its point marks (``probes.logs.bracket_lines.BracketStep``: another)."""
    at: datetime | None = None
    """Its header's stamp, the point's time (EasyR1's ``Step N`` has none)."""

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
        if self.path and self.path[-1][:1] == _OBJECT:
            if self._object_line(body):
                self.last = line_no
                return True
            self.path.pop()
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
        if _SCALAR_TAG.match(value):
            self.path += [key, _OBJECT + _SEP * 3]
            return True
        number = yaml_number(value)
        if number is not None:
            self.values["/".join((*self.path, key))] = number
        return True

    def _object_line(self, body: str) -> bool:
        """A line of the numpy scalar open at the end of ``path`` (indented under its key, or
        one of its ``- `` items at the key's indent): read; False when it is none."""
        key_indent = 2 * (len(self.path) - 2)
        text = body.lstrip(" ")
        indent = len(body) - len(text)
        if not text or indent < key_indent or (indent == key_indent and text[:2] != "- "):
            return False
        _, part, dtype, order = self.path[-1].split(_SEP)
        if text in _PARTS:
            part = _PARTS[text]
        elif part == "args" and text[:2] == "- ":
            dtype, part = text[2:], ""
        elif part == "state" and text[:2] == "- ":
            order, part = (text[2:], "") if text[2:] in ("<", ">", "|", "=") else (order, part)
        elif part == "binary":
            number = numpy_scalar(dtype, order, text)
            if number is not None:
                self.values["/".join(self.path[:-1])] = number
            part = "done"
        self.path[-1] = _SEP.join((_OBJECT, part, dtype, order))
        return True
