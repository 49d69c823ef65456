"""Reads of a job's log: a bounded tail (and its head), or only the bytes appended since the
bot's last sweep read it.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``); every open and read goes through the job's
``probes.remote.guard.Guard``. ``read_tail`` reads at most ``max_bytes`` from the end (or from
the caller's byte offset), dropping a cut first line. The bot keeps, per job, a *cursor*: the log's
path, device and inode, the byte offset read up to, and a digest of the file at that offset
(``signature``: SHA-256 over its first ``ANCHOR`` bytes and the ``ANCHOR`` bytes just before
the offset). The cursor comes back in the request only as a hint: the collector opens the file
under the job's ``Guard`` (same ``O_NOFOLLOW``/owner/device checks as every read) and resumes
only when it is provably the same file, grown by appends:

* another device or inode: ``rotated`` (``mv log log.1`` and a new file, or a new run);
* size below the offset: ``truncated`` (``truncate``, ``copytruncate``, ``> log``);
* the digest differs: ``rewritten`` (replaced in place, same size or larger: a run restarted
  with ``>``, a sparse file after ``copytruncate`` by a writer without ``O_APPEND``);
* more than ``tail_bytes`` appended: ``gap`` (a read from the offset would not be bounded);

and any of those is answered with a fresh bounded tail, flagged ``fresh`` with the reason, so
the client starts a new carry from that cold tail. Two anchors, not one: the head alone is
the same for two runs of one script (the same banner), and the bytes before the offset alone
could match a shorter rewrite by chance; a rewrite that reproduces both is not a log's
behaviour. Both are 4 KiB reads, whatever the log's length.

A read ends at a UTF-8 character boundary (a trailing partial character is left for the next
sweep), so each chunk decodes exactly as the whole would.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process the guard is imported; when shipped, its source is prepended (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused, deadline
with contextlib.suppress(ImportError):
    from probes.remote.read_back import (
        ANCHOR_LINE_RE,
        DEEPEN_GATES,
        FAR_MAX,
        far_cut,
        far_lines,
        line_start,
    )

ANCHOR = 4096
"""Bytes of the file's head and of the bytes before the offset that a cursor's digest covers."""

MAX_DIRS = 8
"""Checkpoint directories a cursor carries (``probes.remote.logged_paths``'s cap on logged dirs)."""
MAX_TRIALS_DIRS = 4
"""Trials dirs a cursor carries (the ones its log named: ``probes.remote.logged_paths``)."""

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9

# Control characters (but tab, newlines, BEL and ESC) and U+FFFD become one "?" each: a binary
# or NUL-heavy log then costs one byte per byte in the answer, like text ("\u0000" costs
# six). ESC stays: trainers colour their lines (ANSI), and the log parser strips those codes;
# BEL too, as it ends a terminal title (OSC '\x1b]0;title\x07'): a '?' there left the code
# unterminated and its text glued to the line (a Traceback header after it went unseen).
PLAIN = {c: "?" for c in (*range(0, 7), 8, 11, 12, *range(14, 27), *range(28, 32), 127, 0xFFFD)}


def plain_text(data: bytes) -> str:
    """Log bytes as answer text: UTF-8 with replacement, control characters as ``?``."""
    return data.decode("utf-8", errors="replace").translate(PLAIN)


def signature(head: bytes, before: bytes) -> str:
    """The digest of a file at an offset: its first bytes and the bytes just before it."""
    return hashlib.sha256(head + b"\0" + before).hexdigest()[:32]


def complete_utf8(data: bytes) -> int:
    """``len(data)`` without a trailing incomplete UTF-8 sequence (at most 3 bytes)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)  # ASCII: nothing partial after it
        if byte >= 0xF8:
            return len(data)  # never a lead byte: invalid, decoded as such
        if byte >= 0xC0:  # a lead byte: is its sequence whole?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


def cursor_at(guard: Guard, fd: int, path: str, *, st: os.stat_result, start: int,
              data: bytes) -> Json:
    """The cursor for a file read up to ``start + len(data)`` (``data`` read from ``start``)."""
    end = start + len(data)
    want = min(ANCHOR, end)
    head = data[:want] if start == 0 else guard.read(fd, 0, want, path)
    if end - start >= want:
        before = data[len(data) - want:]
    else:  # a tail shorter than the anchor: read the bytes before its end
        before = guard.read(fd, end - want, want, path)
    return {"path": path, "dev": st.st_dev, "ino": st.st_ino, "offset": end,
            "digest": signature(head, before), "dirs": [], "trials": []}


def valid_cursor(raw: Any, path: str) -> Json | None:
    """The request's cursor if it is well formed and names ``path``; else ``None`` (a fresh
    read): the client's copy is a hint from its store, never trusted blindly."""
    if not isinstance(raw, dict) or raw.get("path") != path:
        return None
    fields = [raw.get(k) for k in ("dev", "ino", "offset")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in fields):
        return None
    digest = raw.get("digest")
    if not isinstance(digest, str) or len(digest) != 32:
        return None
    dirs, trials = (_paths(raw.get(key)) for key in ("dirs", "trials"))
    return dict(raw, dirs=dirs[:MAX_DIRS], trials=trials[:MAX_TRIALS_DIRS])


def _paths(raw: Any) -> list[str]:
    """A cursor's list of directories, or none if it is not one (re-checked where used)."""
    if not isinstance(raw, list) or not all(isinstance(d, str) and len(d) < 4096 for d in raw):
        return []
    return raw


def resume(path: str, guard: Guard, cursor: Json,
           max_bytes: int) -> tuple[str | None, Json | None]:
    """``(reason, None)`` when the file is not the one the cursor read (see the module
    policy), else ``(None, read)``: the bytes appended since (``data``, maybe empty), the
    new ``cursor``, ``size``, ``mtime`` and ``offset`` (where ``data`` starts)."""
    fd = guard.open(path)
    try:
        st = os.fstat(fd)
        off = int(cursor["offset"])
        if (st.st_dev, st.st_ino) != (cursor["dev"], cursor["ino"]):
            return "rotated", None
        if st.st_size < off:
            return "truncated", None
        lo = max(0, off - ANCHOR)
        head = guard.read(fd, 0, ANCHOR, path) if lo > 0 else b""
        # One read from the anchor to the end (one byte more than allowed tells a gap).
        data = guard.read(fd, lo, (off - lo) + max_bytes + 1, path)
    finally:
        os.close(fd)
    if len(data) < off - lo:
        return "truncated", None  # shrank between the stat and the read
    if lo == 0:
        head = data[:min(ANCHOR, off)]
    if signature(head, data[:off - lo]) != cursor["digest"]:
        return "rewritten", None
    new = data[off - lo:]
    if len(new) > max_bytes:
        return "gap", None
    new = new[:complete_utf8(new)]
    end = off + len(new)
    window = data[:off - lo + len(new)]
    if lo == 0:
        head = window[:min(ANCHOR, end)]
    digest = signature(head, window[len(window) - min(ANCHOR, end):])
    moved = {"path": path, "dev": st.st_dev, "ino": st.st_ino, "offset": end,
             "digest": digest, "dirs": list(cursor["dirs"]),
             "trials": list(cursor.get("trials") or [])}
    return None, {"size": st.st_size, "mtime": st.st_mtime, "offset": off, "data": new,
                  "cursor": moved, "continued": True}


DEEPEN_MAX = 8 << 20
"""How far back from the end a cold tail that resamples is read for an anchor, at most: a
quarter of the default answer budget (``answer_budget_bytes``, 32 MiB); the read-backs of one
request share that quarter of its budget (``probes.remote.collector.deepen_share``), so a
request holding several such runs still answers for every job; past it only the lines the
lead is counted from are sent (``DEEPEN_SCAN``)."""

DEEPEN_SCAN = 64 << 20
"""How far back from the end a resampling tail's read-back looks for its anchor, per job
(the scan is not shared): past the bytes it sends whole (``deepen_max``), it sends only the
lines the bar's lead is counted from, ``far_max`` bytes at most (``read_back.FAR_MAX``, paid
from the answer budget: ``probes.remote.collector.far_share``)."""


def read_tail(path: str, max_bytes: int, offset: int, guard: Guard | None = None, *,
              head_bytes: int = 0, track: bool = False, deepen_max: int = DEEPEN_MAX,
              deepen_scan: int = DEEPEN_SCAN, far_max: int = FAR_MAX) -> Json:
    """At most ``max_bytes`` from the end (or from ``offset``), the cut first line dropped;
    with ``head_bytes``, a read that starts past the file's beginning also gives ``head``;
    with ``track``, the ``cursor`` a later sweep resumes from (``probes.remote.resume``);
    a cold tail that resamples is read back to at most ``deepen_max`` bytes, and its anchor
    looked for to ``deepen_scan`` bytes from the end, the lines its lead is counted from
    sent from past the read-back in ``far_max`` bytes at most (``_deepened``; ``far_cut``
    says when they took more, and none were sent)."""
    guard = guard or Guard(os.geteuid(), 30.0)
    cursor = None
    endless = 0
    far, far_at, cut_far = b"", 0, 0
    try:
        fd = guard.open(path)
        try:
            st = os.fstat(fd)
            size, mtime = st.st_size, st.st_mtime
            start = max(0, size - max_bytes)
            if 0 < offset <= size:
                start = max(start, offset)
            data = guard.read(fd, start, max_bytes, path)
            if start > 0 and offset <= 0:  # a cold tail of a longer log
                start, data, far_at, far, cut_far = _deepened(
                    guard, fd, path, start, data, max_bytes=max_bytes, limit=deepen_max,
                    scan=deepen_scan, far_max=far_max)
            if track:  # read up to a whole character, the cursor just past it
                data = data[:complete_utf8(data)]
                cursor = cursor_at(guard, fd, path, st=st, start=start, data=data)
            if start > 0 and start != offset:  # cut into a line: drop the partial first line
                cut = first_whole_line(data)
                data = data[cut:] if cut >= 0 else b""
                start = size - len(data)
                if cut < 0:  # the tail is inside one long last line: read the lines before it
                    start, data = _before_long_line(guard, fd, path, size, max_bytes)
                    if start == size:  # none within the scan: say so, not just "0 lines"
                        endless = min(size, max_bytes + LONG_LINE_SCAN)
            if data[:1] == b"\0":  # a hole where the text starts (first_whole_line): not text
                text_at = len(data) - len(data.lstrip(b"\0"))
                data, start = data[text_at:], start + text_at
            if far and not endless:  # the far lines before the tail, from where they start
                data, start = far + data, far_at
        finally:
            os.close(fd)
    except (Refused, Hung) as exc:
        return {"status": "failed", "error": str(exc), "lines": 0, "size": 0, "final": True}
    except OSError as exc:
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "lines": 0,
                "size": 0}
    text = plain_text(data)
    lines = len(text.splitlines())
    out = {"status": "ok", "size": size, "mtime": mtime, "offset": start, "text": text,
           "lines": lines}
    if cursor is not None:
        out["cursor"] = cursor
    if endless:
        out["endless"] = endless
    if cut_far:
        out["far_cut"] = far_cut(cut_far, far_max)
    if head_bytes > 0 and start > 0 and offset <= 0:
        out["head"] = _read_head(path, guard, head_bytes)
    return out


LONG_LINE_SCAN = 64 << 20
"""How far back before a tail that holds no line break a read looks for the last one."""


def _deepened(guard: Guard, fd: int, path: str, start: int, data: bytes, *,
              max_bytes: int, limit: int = DEEPEN_MAX,
              scan: int = DEEPEN_SCAN,
              far_max: int = FAR_MAX) -> tuple[int, bytes, int, bytes, int]:
    """``(start, data, at, far, cut)``: ``data`` read back, a tail's worth at a time, to the
    line that names the step (``ANCHOR_LINE_RE``) or the log's start, when ``data``
    resamples and names none: a count of batches read from the tail's start alone would
    take every batch resampled before it for a step (a run at global step 1200 read at
    1494). At most
    ``limit`` bytes are read back whole; past them, to ``scan`` bytes from the end, only
    ``far`` (whole lines, from ``at``; ``far_lines``: ``far_max`` bytes at most, ``cut``
    the bytes they took when more, and then none). A tail with no resample line, or an
    anchor, is left as it is (two ``bytes.find`` of its MiB)."""
    if not any(gate in data for gate in DEEPEN_GATES) or ANCHOR_LINE_RE.search(data):
        return start, data, start, b"", 0
    while start > 0 and len(data) < limit:
        lo = max(0, start - max_bytes, start - (limit - len(data)))
        chunk = guard.read(fd, lo, start - lo, path)
        start, data = start - len(chunk), chunk + data
        # (the chunk and the line it cuts at its end: an anchor line split between reads)
        if ANCHOR_LINE_RE.search(data, 0, len(chunk) + 4096) or len(chunk) < 1:
            return start, data, start, b"", 0
    if start <= 0 or scan <= len(data):
        return start, data, start, b"", 0
    cut = line_start(data)  # the line cut at ``start`` is read whole with the far lines
    end = start + cut if cut >= 0 else start
    if far_max <= 0:  # no share of the answer budget left for them
        return start, data, start, b"", 1
    at, far, cut_far = far_lines(guard, fd, path, end, floor=max(0, end + len(data) - scan),
                                 chunk_bytes=max(max_bytes, 1 << 20), cap=far_max)
    return start, data, at, far, cut_far


def endless_line(scanned: int) -> str:
    """Why a tail read no line: its last line is longer than the ``scanned`` bytes."""
    size = f"{scanned >> 20} MiB" if scanned >= 1 << 20 else f"{max(1, scanned >> 10)} KiB"
    return f"last line over {size}"


def first_whole_line(data: bytes) -> int:
    """Where the first whole line of a tail that starts mid-file begins (``line_start``), or
    just past a run of NULs before that: a hole (logrotate's copytruncate under a writer
    without ``O_APPEND``, which goes on at its old offset) ends where the writer's text
    begins, so the line after it is no cut line. A tail that ends in the hole is read as
    before (the lines before a long last "line" are looked for)."""
    cut = line_start(data)
    hole = data.rfind(b"\0", 0, cut if cut >= 0 else len(data))
    return hole + 1 if 0 <= hole < len(data) - 1 else cut


HOLE_EXTENTS = 4096
"""Data extents stepped over at most looking for the last one before a hole."""


def _data_end(fd: int, pos: int) -> int:
    """``pos``, or where the file's data last ends before it when ``pos`` lies in a hole (a
    log extended by ``truncate``, a preallocated file): a hole reads as NULs, which hold no
    line, and a 5 GB one is never read through. Found with ``SEEK_DATA``/``SEEK_HOLE`` (no
    byte read); where the file system or the OS has neither, ``pos``."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return pos
    end, at = 0, 0
    try:
        for _ in range(HOLE_EXTENTS):
            start = os.lseek(fd, at, seek_data)
            if start >= pos:
                break
            at = os.lseek(fd, start, seek_hole)
            if at >= pos:
                return pos  # inside data
            end = at
        else:
            return pos  # too many extents to walk: scanned as before
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # (ENXIO: no data after ``at``) not supported here
            return pos
    return end if end > 0 else pos


def _before_long_line(guard: Guard, fd: int, path: str, size: int,
                      max_bytes: int) -> tuple[int, bytes]:
    """``(offset, data)``: the bounded tail of the whole lines before the file's last line,
    which is longer than ``max_bytes`` (a trainer dumping a multi-MB array, a binary blob with
    no line break), so the log's metrics and faults are still read, past any more such lines
    before it; ``(size, b"")`` when no whole line lies within ``LONG_LINE_SCAN`` bytes before
    the tail (one endless line)."""
    with deadline(guard._seconds(), f"seek {path}"):  # (a file system call: NFS's SEEK)
        pos = _data_end(fd, size - max_bytes)
    floor = max(0, pos - LONG_LINE_SCAN)
    while pos > floor:
        lo = max(floor, pos - (1 << 20))
        chunk = guard.read(fd, lo, pos - lo, path)
        at = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if at >= 0:
            end = lo + at + 1
            begin = max(0, end - max_bytes)
            data = guard.read(fd, begin, end - begin, path)
            if begin > 0:  # cut into a line: drop it, as any tail does
                data = data[line_start(data):]
            if data or begin == 0:
                return end - len(data), data
            pos = begin  # the line before is longer than the budget too: look before it
            continue
        pos = lo
    return size, b""


def _read_head(path: str, guard: Guard, head_bytes: int) -> str:
    """The log's first ``head_bytes`` (cut at the last whole line): the trainer's start-up
    config dump falls out of a long run's tail. Sent on a whole-tail read only (offset 0),
    never on incremental reads; "" when it cannot be read (the tail still stands)."""
    try:
        fd = guard.open(path)
        try:
            data = guard.read(fd, 0, head_bytes, path)
        finally:
            os.close(fd)
    except (Refused, Hung, OSError):
        return ""
    if len(data) >= head_bytes:
        data = data[:data.rfind(b"\n") + 1]
    return plain_text(data)


def scan_text(carried: list[str], text: str | None) -> str:
    """The text whose logged checkpoint directories a tracked read reports: the ones earlier
    reads found (oldest first, as printed) and then the new text, so the newest win."""
    return "".join(f"checkpoint {d}\n" for d in reversed(carried)) + (text or "")
