"""The collector as one ``python3 -`` script: the shipped modules' sources joined in process.

Policy: the login node has nothing of ours installed, so ``harbor_reduce``, ``stdio_pattern``
and ``completion`` are prepended to ``collector`` and their import lines there become ``pass``;
the request rides inside the script as a string literal (never on a command line).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_FUTURE = re.compile(r"^from __future__ import [^\n]*\n", re.MULTILINE)
_SHIPPED_IMPORT = re.compile(
    r"^([ \t]*)from probes\.remote\.(?:harbor_reduce|stdio_pattern|completion) import "
    r"(?:\([^)]*\)|[^\n(]*)$",
    re.MULTILINE,
)
_SHIPPED_MODULES = ("harbor_reduce.py", "stdio_pattern.py", "completion.py")
"""Stdlib-only modules whose source is prepended to the collector (it imports them in process)."""


@functools.cache
def collector_source() -> str:
    """The shipped modules + collector as one script body (without ``main(...)``)."""
    collector = (_HERE / "collector.py").read_text(encoding="utf-8")
    collector, count = _SHIPPED_IMPORT.subn(r"\1pass  # source prepended above", collector)
    if count != len(_SHIPPED_MODULES):
        raise RuntimeError("probes/remote/collector.py: expected one import line per shipped"
                           " module")
    parts = [(_HERE / name).read_text(encoding="utf-8") for name in _SHIPPED_MODULES]
    body = "\n\n".join(_FUTURE.sub("", text) for text in (*parts, collector))
    # One __future__ line, first: it is only legal before any other statement.
    return "from __future__ import annotations\n" + body


def build_collector_script(request: Mapping[str, Any]) -> str:
    """The script run by ``python3 -``: the request rides inside it as a string literal."""
    return f"{collector_source()}\n\nmain({json.dumps(request)!r})\n"


