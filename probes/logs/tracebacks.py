"""Assemble Python tracebacks (and torchelastic failure summaries) from interleaved log lines.

Policy: a traceback opens on ``Traceback (most recent call last):`` (or Ray's
``RayTaskError``, or an ``Exception Group Traceback``) and is kept per output stream (the
Ray actor / rank prefix the caller splits off), so interleaved processes never mix. It
consumes indented frame lines, takes the first non-indented CamelCase ``pkg.Error: message``
line as its exception and keeps up to ``_MAX_CONT`` indented continuation lines after it
(Ray's actor fields, grpc's ``status = ...``). A chained traceback (``During handling of the
above exception ...``) replaces the one before it: the chain's last exception is the one that
propagated. More than ``_MAX_JUNK`` unindented non-exception lines, or a new traceback,
closes an unfinished one. What a finished traceback *means* is the caller's
(``probes.logs.faults``): this module only hands it over, through ``finish``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MethodType
from typing import Any, TypeVar
from weakref import WeakMethod

_R = TypeVar("_R")

EXCERPT_CAP = 400
_MAX_STREAMS = 256
# Continuation lines kept with an exception line, and frames kept for the TimeoutError context.
_MAX_CONT = 8
_MAX_FRAMES = 12
_MAX_JUNK = 20

TB_START = re.compile(r"^(?P<indent>[ \t]{0,16})Traceback \(most recent call last\):")
"""A traceback's header; a block shifted right as a whole (printed after a cursor escape such
as ``\x1b[2J `` or indented by a wrapper) is read relative to the header's indent."""
GROUP_START = re.compile(r"^\s*\+ Exception Group Traceback \(most recent call last\):")
RAY_TASK_ERROR = re.compile(r"^ray\.exceptions\.RayTaskError(?:\([\w.]+\))?:")
_CHAIN = re.compile(
    r"^(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)"
)
# Python's last traceback line is "pkg.mod.SomeError: message" (or a bare class name); class
# names are CamelCase, which keeps "INFO: ..." log lines from passing as an exception.
_EXC_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*_*[A-Z]\w*[a-z]\w*(?:\([\w.]+\))?)(?::(?P<msg>.*))?$"
)
# torchelastic's failure summary (formats.md §5.2).
_SUMMARY_TB = re.compile(r"^traceback\s*:\s*(.*)$")
_SUMMARY_EXIT = re.compile(r"^exitcode\s*:\s*(-?\d+)")
RULE = re.compile(r"^(?:={10,}|-{10,})$")
_GROUP_ROW = re.compile(r"^[\s|]*\|\s?(?P<inner>.*)$")


@dataclass
class Traceback:
    """One traceback being read: where it began, its frames, its exception line and after."""

    line_no: int
    group: bool = False
    frames: list[str] = field(default_factory=list)
    exc: str | None = None
    exc_no: int = 0
    cont: list[str] = field(default_factory=list)
    junk: int = 0
    indent: str = ""
    """The header's leading whitespace: the block's lines are read with it taken off."""


def clip(text: str, limit: int = EXCERPT_CAP) -> str:
    """``text`` stripped and cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_exception(text: str) -> bool:
    """Whether ``text`` is an exception line (``pkg.SomeError: message``)."""
    return bool(text) and not text[0].isspace() and _EXC_LINE.match(text.rstrip()) is not None


def exception_type(exc: str) -> str:
    """The dotted class name an exception line starts with (the line itself if none)."""
    match = _EXC_LINE.match(exc)
    return match.group("type") if match else exc


def _weakly(fn: Callable[..., _R]) -> Callable[..., _R]:
    """``fn``, not keeping its object alive when it is a bound method (no reference cycle)."""
    if not isinstance(fn, MethodType):
        return fn
    ref: WeakMethod[Callable[..., _R]] = WeakMethod(fn)

    def call(*args: Any) -> _R:
        method = ref()
        assert method is not None, "the scanner outlives its own tracebacks"
        return method(*args)
    return call


class Tracebacks:
    """The open tracebacks of one scan, one per stream.

    ``finish`` receives each closed traceback and returns an id for what it made of it (or -1
    for nothing); ``retract`` takes such an id back when a chained traceback supersedes it.
    """

    def __init__(
        self, finish: Callable[[Traceback], int], retract: Callable[[int], None]
    ) -> None:
        self.open: dict[str, Traceback] = {}
        self._chained: dict[str, int] = {}
        # Held weakly when they are the scanner's own methods: a scanner -> Tracebacks ->
        # bound method -> scanner cycle kept each log's lines alive until a full collection
        # (and for a whole sweep while the bot freezes its objects, bot.gcquiet).
        self._finish = _weakly(finish)
        self._retract = _weakly(retract)

    def start(self, key: str, line_no: int, *, group: bool = False, indent: str = "") -> None:
        """Open a traceback on stream ``key`` (closing the one already open there)."""
        if key in self.open:
            self.close(key)
        if len(self.open) < _MAX_STREAMS:
            self.open[key] = Traceback(line_no, group=group, indent=indent)

    def feed(self, key: str, line_no: int, text: str) -> bool:
        """Consume ``text`` into ``key``'s open traceback; False hands it back to line rules."""
        tb = self.open.get(key)
        if tb is None:
            return False
        if tb.indent and text.startswith(tb.indent):
            text = text[len(tb.indent):]
        indented = not text.strip() or text[0].isspace() or text.startswith("> File ")
        if tb.group:
            return self._feed_group(key, tb, line_no, text, indented)
        if tb.exc is None:
            return self._feed_frames(key, tb, line_no, text, indented)
        if indented:
            if len(tb.cont) < _MAX_CONT and text.strip():
                tb.cont.append(text.strip())
            return True
        if _CHAIN.match(text):
            self._chained[key] = self.close(key)
            return True
        self.close(key)
        return False

    def _feed_group(self, key: str, tb: Traceback, line_no: int, text: str, indented: bool) -> bool:
        if indented:
            row = _GROUP_ROW.match(text)
            inner = row.group("inner").strip() if row else ""
            if tb.exc is None and is_exception(inner) and "ExceptionGroup" not in inner:
                tb.exc, tb.exc_no = inner, line_no
            return True
        self.close(key)
        return False

    def _feed_frames(
        self, key: str, tb: Traceback, line_no: int, text: str, indented: bool
    ) -> bool:
        if indented:
            tb.frames = [*tb.frames[-(_MAX_FRAMES - 1) :], text.strip()[:200]]
            return True
        if RAY_TASK_ERROR.match(text):
            return True
        if is_exception(text):
            tb.exc, tb.exc_no = text, line_no
            return True
        tb.junk += 1
        if tb.junk > _MAX_JUNK or TB_START.match(text):
            self.close(key)
        return False

    def close(self, key: str) -> int:
        """Finish ``key``'s traceback; returns ``finish``'s id for it."""
        tb = self.open.pop(key)
        previous = self._chained.pop(key, None)
        if previous is not None and previous >= 0:
            self._retract(previous)  # the chain's last exception is the one that propagated
        return self._finish(tb)

    def close_all(self) -> None:
        """Finish every traceback still open at the end of the tail."""
        for key in list(self.open):
            self.close(key)


def summary_root_cause(texts: Sequence[str]) -> str | None:
    """The diagnosis in a torchelastic failure summary: its Root Cause traceback or signal.

    ``traceback : To enable traceback see ...`` is no diagnosis; with nothing better the
    root cause's exit code is given.
    """
    root = next((i for i, t in enumerate(texts) if t.startswith("Root Cause")), None)
    section = _until_rule(texts[root + 1 :] if root is not None else texts)
    exit_code = None
    for index, text in enumerate(section):
        if (code := _SUMMARY_EXIT.match(text)) is not None and exit_code is None:
            exit_code = code.group(1)
        value = _SUMMARY_TB.match(text)
        if value is None:
            continue
        detail = value.group(1).strip()
        if detail.startswith("Traceback"):
            block = [t for t in section[index + 1 :] if is_exception(t)]
            return clip(block[-1]) if block else None
        if detail and not detail.startswith("To enable traceback"):
            return clip(detail)
    return f"exitcode {exit_code}" if exit_code is not None else None


def summary_relevant(text: str) -> bool:
    """Whether ``summary_root_cause`` reads anything from ``text`` (one stripped line): any
    other line acts there as ``""`` does, so a reader that keeps lines for it may blank it."""
    return (
        text.startswith("Root Cause")
        or (text.startswith("=") and RULE.match(text) is not None)
        or _SUMMARY_EXIT.match(text) is not None
        or _SUMMARY_TB.match(text) is not None
        or is_exception(text)
    )


def _until_rule(texts: Sequence[str]) -> list[str]:
    """Lines up to the summary's closing ``====`` rule (leading rules skipped)."""
    out: list[str] = []
    for text in texts:
        if RULE.match(text) and text.startswith("="):
            if out:
                break
            continue
        out.append(text)
    return out
