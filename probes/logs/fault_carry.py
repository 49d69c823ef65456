"""The fault scan's state between two reads of one log: the scanner frozen and thawed.

Policy: ``snapshot_faults`` turns the scanner of ``probes.logs.faults`` that has stepped every
line so far (open tracebacks left open) into a JSON-serialisable model; ``restore_faults``
builds it back, so stepping the next lines through the restored scanner is stepping them
through the original. Bounded whatever the log's length:

- hits: a summary shows the newest ``_MAX_FAULTS`` (100) by line. Past ``MAX_HITS`` live hits
  the scanner keeps the newest ``KEEP_HITS`` and, of the older ones, only those a later
  decision can still read: hits a chained traceback may retract, the newest NCCL timeout (it
  makes the shm heartbeat a hang), and the ``ChildFailedError`` floor with the first real
  traceback after it (the detail of the next ``ChildFailedError``);
- the shm heartbeats and SIGABRT lines: the first of each and a count (all ``faults()`` reads);
- a torchelastic summary: a ``ChildFailedError``'s detail reads the ``SUMMARY_LINES`` lines
  after it, so the last ``SUMMARY_LINES`` lines are kept, each blanked unless the summary
  reader reads it (``probes.logs.tracebacks.summary_relevant``), and a detail is settled once
  its lines are all read;
- open tracebacks: already bounded by ``probes.logs.tracebacks`` (256 streams, 12 frames,
  8 continuation lines).
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Sequence
from datetime import datetime

from pydantic import Field

from probes.logs.carried import Carried, built
from probes.logs.faults import _Hit, _Scanner, _split_prefix
from probes.logs.tracebacks import Traceback, summary_relevant, summary_root_cause
from probes.models import FaultKind, LogTime

SUMMARY_LINES = 120
"""Lines after a ``ChildFailedError`` its summary detail reads (``faults._summary_detail``)."""
MAX_HITS = 256
KEEP_HITS = 128


class HitCarry(Carried):
    kind: FaultKind
    line_no: int
    excerpt: str
    from_traceback: bool = False


class TracebackCarry(Carried):
    key: str
    line_no: int
    group: bool = False
    frames: tuple[str, ...] = ()
    exc: str | None = None
    exc_no: int = 0
    cont: tuple[str, ...] = ()
    junk: int = 0
    indent: str = ""


class LaunchCarry(Carried):
    tunnel_ok: bool | None = None
    api_base: str | None = None
    engine_ok: int | None = None
    last_ok_at: LogTime | None = None
    last_ok_line: int | None = None
    clock_last: LogTime | None = None
    running: int | None = None
    zero_since: LogTime | None = None
    stuck_since: LogTime | None = None
    busy_at: LogTime | None = None
    marks: tuple[tuple[int, LogTime], ...] = ()
    recent: tuple[bool, ...] = ()
    auth_failures: int = 0
    tunnel_auth_failures: int = 0
    engine_auth_failures: int = 0
    engine_auth_streak: int = 0


class FaultCarry(Carried):
    """Everything the fault scanner carries from one line to the next (the module policy)."""

    hits: tuple[HitCarry, ...] = ()
    chained: dict[str, int] = Field(default_factory=dict)
    """Per stream, the index in ``hits`` of the traceback a chained one may retract."""
    tracebacks: tuple[TracebackCarry, ...] = ()
    counts: dict[str, int] = Field(default_factory=dict)
    shm: tuple[int, str] | None = None
    shm_count: int = 0
    abort: tuple[int, str] | None = None
    abort_count: int = 0
    siblings: bool = False
    launch: LaunchCarry = LaunchCarry()
    recent_first: int = 1
    """Line number of ``recent_texts[0]``."""
    recent_texts: tuple[str, ...] = ()
    details: dict[int, str | None] = Field(default_factory=dict)
    """Settled summary details of ``ChildFailedError`` hits, by their line."""


class FoldScanner(_Scanner):
    """The fault scanner over one increment of lines, reading summary details across reads."""

    def __init__(
        self,
        lines: Sequence[str],
        benign: tuple[re.Pattern[str], ...],
        first: int,
        mtime: datetime | None = None,
    ) -> None:
        super().__init__(lines, benign, first, mtime)
        self.shm: list[tuple[int, str]] = FirstOf()
        self.aborts: list[tuple[int, str]] = FirstOf()
        self.recent_first = first
        self.recent: list[str] = []
        self.details: dict[int, str | None] = {}

    def _summary_detail(self, line_no: int) -> str | None:
        if line_no in self.details:
            return self.details[line_no]
        return summary_root_cause(self._texts(line_no + 1, line_no + SUMMARY_LINES))

    def _texts(self, first: int, last: int) -> list[str]:
        """The (blanked) texts of lines ``first..last`` still held: kept or in ``lines``."""
        lo = max(first, self.recent_first)
        hi = min(last, self.first - 1, self.recent_first + len(self.recent) - 1)
        out = self.recent[lo - self.recent_first : hi - self.recent_first + 1] if hi >= lo else []
        start = max(first, self.first) - self.first
        stop = min(last - self.first + 1, len(self.lines))
        if stop > start:  # (a negative stop would slice from the end)
            out.extend(_blank(_split_prefix(line)[1].strip()) for line in self.lines[start:stop])
        return out

    def settle(self) -> None:
        """After ``lines`` were stepped: keep the last ``SUMMARY_LINES`` lines, settle the
        details whose lines are all read, and bound the hits (the module policy)."""
        last = self.first + len(self.lines) - 1
        for hit in self.hits:
            if (hit is not None and hit.kind == "child-failed" and hit.line_no not in self.details
                    and hit.line_no + SUMMARY_LINES <= last):
                self.details[hit.line_no] = self._summary_detail(hit.line_no)
        keep_from = max(self.recent_first, last - SUMMARY_LINES + 1)
        self.recent = self._texts(keep_from, last)
        self.recent_first = keep_from
        self._compact()
        alive = {h.line_no for h in self.hits if h is not None and h.kind == "child-failed"}
        self.details = {n: d for n, d in self.details.items() if n in alive}

    def _compact(self) -> None:
        hits = self.hits
        chained = self.tracebacks._chained
        live = [i for i, h in enumerate(hits) if h is not None]
        keep = set(live)
        if len(live) > MAX_HITS:
            protected = {i for i in chained.values() if i >= 0}
            order = sorted((i for i in live if i not in protected),
                           key=lambda i: (_hit(hits, i).line_no, i))
            old = order[:-KEEP_HITS]
            keep = protected | set(order[-KEEP_HITS:]) | _still_read(hits, old)
        kept = sorted(keep)
        where = {old: new for new, old in enumerate(kept)}
        self.hits = [hits[i] for i in kept]
        for key, index in list(chained.items()):
            chained[key] = where.get(index, -1) if index >= 0 else index


class FirstOf(list[tuple[int, str]]):
    """A list that stores only its first item but counts every one appended: all that
    ``faults()`` reads of the heartbeats and SIGABRT lines (``[0]``, ``len``, truth)."""

    def __init__(self, first: tuple[int, str] | None = None, count: int = 0) -> None:
        super().__init__([] if first is None else [first])
        self.total = count if first is not None else 0

    def append(self, item: tuple[int, str]) -> None:
        if not super().__len__():
            super().append(item)
        self.total += 1

    def __len__(self) -> int:
        return self.total


def _hit(hits: Sequence[_Hit | None], index: int) -> _Hit:
    hit = hits[index]
    assert hit is not None
    return hit


def _still_read(hits: Sequence[_Hit | None], old: Sequence[int]) -> set[int]:
    """Of the old hits (in line order), those ``faults()`` still reads (the module policy)."""
    keep: set[int] = set()
    nccl = [i for i in old if _hit(hits, i).kind == "nccl-timeout"]
    keep.update(nccl[-1:])
    floor = max((n for n, i in enumerate(old) if _hit(hits, i).kind == "child-failed"),
                default=-1)
    if floor >= 0:
        keep.add(old[floor])
    real = (i for i in old[floor + 1 :]
            if _hit(hits, i).from_traceback and _hit(hits, i).kind != "child-failed")
    keep.update(i for i in [next(real, None)] if i is not None)
    return keep


def _blank(text: str) -> str:
    return text if summary_relevant(text) else ""


def snapshot_faults(scanner: FoldScanner) -> FaultCarry:
    """``scanner``'s state after ``advance`` and ``settle`` (tracebacks still open)."""
    launch = scanner.launch
    return built(
        FaultCarry,
        hits=tuple(HitCarry(kind=h.kind, line_no=h.line_no, excerpt=h.excerpt,
                            from_traceback=h.from_traceback)
                   for h in scanner.hits if h is not None),
        chained=dict(scanner.tracebacks._chained),
        tracebacks=tuple(
            TracebackCarry(key=key, line_no=tb.line_no, group=tb.group,
                           frames=tuple(tb.frames), exc=tb.exc, exc_no=tb.exc_no,
                           cont=tuple(tb.cont), junk=tb.junk, indent=tb.indent)
            for key, tb in scanner.tracebacks.open.items()),
        counts=dict(scanner.counts),
        shm=scanner.shm[0] if scanner.shm else None,
        shm_count=len(scanner.shm),
        abort=scanner.aborts[0] if scanner.aborts else None,
        abort_count=len(scanner.aborts),
        siblings=scanner.siblings,
        launch=LaunchCarry(
            tunnel_ok=launch.tunnel_ok, api_base=launch.api_base, engine_ok=launch.engine_ok,
            last_ok_at=launch.last_ok_at, last_ok_line=launch.last_ok_line,
            clock_last=launch.clock.last, running=launch.running,
            zero_since=launch.zero_since, stuck_since=launch.stuck_since,
            busy_at=launch.busy_at, marks=tuple(launch.marks),
            recent=tuple(launch.recent),
            auth_failures=launch.auth_failures,
            tunnel_auth_failures=launch.tunnel_auth_failures,
            engine_auth_failures=launch.engine_auth_failures,
            engine_auth_streak=launch.engine_auth_streak),
        recent_first=scanner.recent_first, recent_texts=tuple(scanner.recent),
        details=dict(scanner.details),
    )


def restore_faults(
    carry: FaultCarry | None,
    lines: Sequence[str],
    benign: tuple[re.Pattern[str], ...],
    first: int,
    mtime: datetime | None,
) -> FoldScanner:
    """A scanner over ``lines`` (numbered from ``first``) in the state ``carry`` was taken in."""
    scanner = FoldScanner(lines, benign, first, mtime)
    if carry is None:
        return scanner
    scanner.hits = [_Hit(h.kind, h.line_no, h.excerpt, h.from_traceback) for h in carry.hits]
    scanner.tracebacks._chained.update(carry.chained)
    for tb in carry.tracebacks:
        scanner.tracebacks.open[tb.key] = Traceback(
            tb.line_no, group=tb.group, frames=list(tb.frames), exc=tb.exc, exc_no=tb.exc_no,
            cont=list(tb.cont), junk=tb.junk, indent=tb.indent)
    scanner.counts = Counter(carry.counts)
    scanner.shm = FirstOf(carry.shm, carry.shm_count)
    scanner.aborts = FirstOf(carry.abort, carry.abort_count)
    scanner.siblings = carry.siblings
    launch, saved = scanner.launch, carry.launch
    launch.tunnel_ok, launch.api_base, launch.engine_ok = (
        saved.tunnel_ok, saved.api_base, saved.engine_ok)
    launch.last_ok_at, launch.last_ok_line = saved.last_ok_at, saved.last_ok_line
    if saved.clock_last is not None:
        launch.clock.reference = launch.clock.last = saved.clock_last
    launch.running, launch.zero_since = saved.running, saved.zero_since
    launch.stuck_since, launch.busy_at = saved.stuck_since, saved.busy_at
    launch.marks = deque(saved.marks, maxlen=launch.marks.maxlen)
    launch.recent = deque(saved.recent, maxlen=launch.recent.maxlen)
    launch.auth_failures = saved.auth_failures
    launch.tunnel_auth_failures = saved.tunnel_auth_failures
    launch.engine_auth_failures = saved.engine_auth_failures
    launch.engine_auth_streak = saved.engine_auth_streak
    scanner.recent_first, scanner.recent = carry.recent_first, list(carry.recent_texts)
    scanner.details = dict(carry.details)
    return scanner
