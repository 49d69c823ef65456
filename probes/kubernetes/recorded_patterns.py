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
LEADING_REPEAT = "a variable repeat first, unanchored"
"""The same, for one variable repeat that ``re.search`` runs from every position of a line."""


class _Unsafe(Exception):
    pass


def unsafe_pattern(pattern: str) -> str | None:
    """Why running ``pattern`` on a hostile line may not end (``None``: it is bounded)."""
    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None  # matched literally, as the scanner compiles it
    try:
        variable, optional = _walk(parsed, under_repeat=False)
    except _Unsafe as exc:
        return str(exc)
    if optional > MAX_OPTIONALS:
        return f"more than {MAX_OPTIONALS} optional repeats"
    if variable > 1:
        return MANY_REPEATS
    return LEADING_REPEAT if _leads_with_repeat(parsed) else None


def _leads_with_repeat(items: Any) -> bool:
    """Whether the pattern starts with a repeat that may run more than once, unanchored
    (``\\s*$``, ``.*foo``, ``(\\d+)ms``): ``re.search`` tries it from every position, a
    second variable repeat in effect; a literal first (``NCCL INFO .*``) or ``^`` is not."""
    while items:
        op, av = items[0]
        if op is sre.SUBPATTERN:
            items = av[3]
        elif op in _REPEATS:
            return bool(av[1] > 1 and av[1] != av[0])
        else:
            return False
    return False


MAX_OPTIONALS = 4
"""Optionals (``?``, ``{0,1}``) a pattern may hold outside any loop: each at most doubles the
tries at a position (``a?`` forty times then ``a`` forty times: 2**40), never multiplies them
by a line's length as a second ``*`` does (``skip[-_]?spikes?`` or ``\\d+ seconds?`` is
bounded); more are exponential in the pattern, on a job name too."""


def _walk(items: Any, *, under_repeat: bool, looped: bool = False) -> tuple[int, int]:
    """The repeats in ``items`` that may run more than once, and the optionals;
    :class:`_Unsafe` for the exponential shapes. ``looped``: an enclosing repeat may run more
    than once, so an optional (``?``) in it is a variable repeat under a repeat too
    (``(a?a?)+$``, ``(a?){40}a{40}``: every way of spreading a run of ``a`` over the optionals
    is tried); under a ``?`` alone (``measure(?:ments?)?``) it is not."""
    variable = optional = 0
    for op, av in items:
        found = (0, 0)
        if op in _REPEATS:
            low, high, body = av
            if under_repeat and (high > 1 or (looped and high != low)):
                raise _Unsafe("a repeat inside a repeat")
            if high != low:
                found = (1, 0) if high > 1 else (0, 1)
                if not (len(body) == 1 and body[0][0] in _SINGLE):
                    # raises for a repeat or a choice in it
                    _walk(body, under_repeat=True, looped=looped or high > 1)
            else:
                found = _walk(body, under_repeat=under_repeat or high > 1,
                              looped=looped or high > 1)
        elif op is sre.BRANCH:
            if under_repeat:
                raise _Unsafe("a choice under a repeat")
            branches = [_walk(branch, under_repeat=False) for branch in av[1]]
            found = (sum(b[0] for b in branches), sum(b[1] for b in branches))
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            raise _Unsafe("a backreference")
        elif op is sre.SUBPATTERN:
            found = _walk(av[3], under_repeat=under_repeat, looped=looped)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            found = _walk(av[1], under_repeat=under_repeat, looped=looped)
        elif op is getattr(sre, "ATOMIC_GROUP", None):
            found = _walk(av, under_repeat=under_repeat, looped=looped)
        variable, optional = variable + found[0], optional + found[1]
    return variable, optional
