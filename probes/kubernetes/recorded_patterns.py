"""Which of a recording's ``benign_patterns`` a replay may run.

Policy: a recording travels (a bug report), so the regexes its ``cluster.json`` names are
someone else's, and a replay runs each against every log line it reads (the live cluster's
``benign_patterns``, kept so that the replay is the live sweep). Python's ``re`` backtracks: a
repeat inside a repeat (``^(\\w+)+$``, an optional one too: ``(a?a?)+$``), a choice under a
repeat (``(a|aa)*``) or a backreference takes time exponential in a line's length, and each
variable repeat after the first multiplies the work by the line's length again.
:func:`unsafe_pattern` says why a pattern is one of these (``None``: at most one variable
repeat, of a single character or class, no choice or backreference under it); the replay runs
such a pattern only when its own cluster's ``benign_patterns`` name it too (its operator's,
trusted as a live cluster's are). A pattern that is no valid regex is matched literally
(``probes.logs.faults``): safe.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
_SINGLE = {sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY}
"""What matches one character: a repeat of it backtracks over one line at most once."""
MANY_REPEATS = "more than one variable repeat"
"""The reason of a pattern whose time grows as a power of a line's length, not exponentially."""


class _Unsafe(Exception):
    pass


def unsafe_pattern(pattern: str) -> str | None:
    """Why running ``pattern`` on a hostile line may not end (``None``: it is bounded)."""
    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None  # matched literally, as the scanner compiles it
    try:
        variable = _walk(parsed, under_repeat=False)
    except _Unsafe as exc:
        return str(exc)
    return MANY_REPEATS if variable > 1 else None


def _walk(items: Any, *, under_repeat: bool, looped: bool = False) -> int:
    """The variable repeats in ``items``; :class:`_Unsafe` for the exponential shapes.
    ``looped``: an enclosing repeat may run more than once, so an optional (``?``) in it is a
    variable repeat under a repeat too (``(a?a?)+$``, ``(a?){40}a{40}``: every way of spreading
    a run of ``a`` over the optionals is tried); under a ``?`` alone (``measure(?:ments?)?``)
    it is not."""
    variable = 0
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            if under_repeat and (high > 1 or (looped and high != low)):
                raise _Unsafe("a repeat inside a repeat")
            if high != low:
                # An optional (max 1) adds at most one try per position, never a factor of
                # the line's length: only a repeat that may run more than once counts.
                variable += 1 if high > 1 else 0
                if not (len(body) == 1 and body[0][0] in _SINGLE):
                    # raises for a repeat or a choice in it
                    _walk(body, under_repeat=True, looped=looped or high > 1)
                continue
            variable += _walk(body, under_repeat=under_repeat or high > 1,
                              looped=looped or high > 1)
        elif op is sre.BRANCH:
            if under_repeat:
                raise _Unsafe("a choice under a repeat")
            variable += sum(_walk(branch, under_repeat=False) for branch in av[1])
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            raise _Unsafe("a backreference")
        elif op is sre.SUBPATTERN:
            variable += _walk(av[3], under_repeat=under_repeat, looped=looped)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            variable += _walk(av[1], under_repeat=under_repeat, looped=looped)
        elif op is getattr(sre, "ATOMIC_GROUP", None):
            variable += _walk(av, under_repeat=under_repeat, looped=looped)
    return variable
