"""The lines a resampling run's read-back sends from past the bytes it sends whole.

Policy: STANDARD LIBRARY ONLY, Python 3.7+ (shipped inside the collector script before
``probes.remote.logread``, which reads back a cold tail of a dynamic-sampling run to its
anchor). A SkyRL DAPO run's batches bar leads its global step by the batches resampled since
the last line that names the step (``probes.logs.skyrl_batches``); that line can lie tens of
MiB back (the wandb logger, a long save interval, a chatty engine), and the bytes between are
no use to the lead but for its anchor, resample and bar lines: those are all that is sent of
them, a few hundred bytes a batch.
"""

from __future__ import annotations

import contextlib
import re

with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard


DEEPEN_GATES = (b"continue sampling", b"Keep generating")
"""Lines after which a batches bar leads its step by more than the tail can measure: SkyRL's
``Resample batch K, continue sampling...``, verl's DAPO ``num_gen_batches=K. Keep
generating...`` (``probes.logs.skyrl_batches``)."""
ANCHOR_LINE_RE = re.compile(
    rb"saved checkpoint for global_step_\d|Step \d+: ?(?:\x1b\[[0-9;]*m)*\r?$|step:\d+ - ",
    re.MULTILINE)
"""A line that names the step the bar stands at: SkyRL's save line and its tracker's ``Step
N:`` header, verl's ``step:N - ...`` line."""


_KEPT_RE = re.compile(
    rb"Training Batches Processed|Training Progress|continue sampling|Keep generating|"
    rb"saved checkpoint for global_step_\d|Step \d+: ?(?:\x1b\[[0-9;]*m)*\r?$|step:\d+ - ",
    re.MULTILINE)
"""A bar redraw (SkyRL's, verl's), a resample line (``DEEPEN_GATES``) or an anchor."""


def line_start(data: bytes) -> int:
    """Where the first whole line of ``data`` starts (just past its first ``\n``, ``\r`` or
    ``\r\n``), or -1 with no line break. ``\r`` breaks lines as for the log parser: a tqdm bar
    writing to a file redraws with ``\r`` only, and a tail inside its redraws is lines."""
    newline, ret = data.find(b"\n"), data.find(b"\r")
    if ret < 0 or 0 <= newline < ret:
        return newline + 1 if newline >= 0 else -1
    return ret + 2 if data[ret + 1:ret + 2] == b"\n" else ret + 1


FAR_MAX = 1 << 20
"""Bytes the far lines of one job's read-back may take (``far_lines``): a resampling run
sends a few hundred bytes a resampled batch past its read-back (some 4% of a dense SkyRL
log's bytes: ~2.7 MB of a 64 MiB scan), and the lead needs every one of them from the
anchor on, so a run needing more sends none (``far_cut``); the request's share of them
is paid from its answer budget (``probes.remote.collector.far_share``)."""


def far_cut(needed: int, cap: int) -> str:
    """The note of a read-back whose far lines the cap cut (``needed`` bytes at least), or
    that had no share of the answer budget left for them (``cap`` 0)."""
    if cap <= 0:
        return ("no share of the answer budget left for the lines its batches bar's lead is"
                " counted from, past the read-back: none sent, its lead is counted from the"
                " read-back's start")
    return (f"the lines its batches bar's lead is counted from, past the read-back, take over"
            f" {needed} bytes, more than its cap of {cap}: none sent, its lead is counted"
            f" from the read-back's start")


def far_lines(guard: Guard, fd: int, path: str, end: int, *, floor: int,
              chunk_bytes: int, cap: int = FAR_MAX) -> tuple[int, bytes, int]:
    """``(at, lines, cut)``: from the last anchor before ``end`` (or ``floor``, or the log's
    start), the anchor, each resample line and the bar redraw after it, and the first redraw
    after the anchor: all the bar's lead is counted from (``probes.logs.skyrl_batches``), a
    few bytes a batch of the MiBs between. ``at`` is where the first of them starts (0 when
    read from the log's start: the lead counted from there is exact). They take ``cap``
    bytes at most: the lead needs every one from the anchor on (a count missing some reads
    the step that much too high), so more are none, ``cut`` the bytes they took when the
    scan stopped (else 0)."""
    found: list[tuple[int, bytes]] = []
    pos = end
    while pos > floor:
        lo = max(floor, pos - chunk_bytes)
        chunk = guard.read(fd, lo, pos - lo, path)
        if not chunk:
            break
        cut = line_start(chunk) if lo > 0 else 0
        if cut < 0:  # no line break in the chunk: one long line, none of ours
            pos = lo
            continue
        lines = _kept(chunk, cut, lo)
        anchors = [n for n, (_, line) in enumerate(lines) if ANCHOR_LINE_RE.search(line)]
        found = lines[anchors[-1]:] + found if anchors else lines + found
        pos = lo + cut
        if sum(len(line) + 1 for _, line in found) > cap:  # cheap first: all it holds
            needed = len(_needed(found))
            if needed > cap:
                return end, b"", needed
        if anchors or lo <= floor:
            break
    if pos > 0 and not any(ANCHOR_LINE_RE.search(line) for _, line in found[:1]):
        return end, b"", 0  # neither anchor nor log start: the lead is unknown either way
    return (0 if pos <= 0 else found[0][0]), _needed(found), 0


def _needed(found: list[tuple[int, bytes]]) -> bytes:
    """The lines of ``found`` the lead is counted from, each ended by ``\n``: a redraw
    counts only after an anchor or a resample line (or first, the log's start)."""
    kept, after = [], True
    for _, line in found:
        bar = not any(g in line for g in DEEPEN_GATES) and not ANCHOR_LINE_RE.search(line)
        if not bar or after:
            kept.append(line)
        after = not bar
    return b"".join(line + b"\n" for line in kept)


def _kept(chunk: bytes, cut: int, lo: int) -> list[tuple[int, bytes]]:
    """The ``_KEPT_RE`` lines of ``chunk`` from ``cut`` (whole ones), with their offsets."""
    out: list[tuple[int, bytes]] = []
    at = cut
    while True:
        found = _KEPT_RE.search(chunk, at)
        if found is None:
            return out
        begin = max(chunk.rfind(b"\n", cut, found.start()), chunk.rfind(b"\r", cut,
                                                                          found.start())) + 1
        begin = max(begin, cut)
        stops = [i for i in (chunk.find(b"\n", found.end()), chunk.find(b"\r", found.end()))
                 if i >= 0]
        stop = min(stops) if stops else len(chunk)
        out.append((lo + begin, chunk[begin:stop]))
        at = stop + 1
