"""The collector's answer read as it arrives: a head, one line per job, an end.

Policy: a request with ``"stream": true`` is answered in lines (``probes.remote.collector``):
the head (squeue's document, the scheduler commands' output, the keys of the jobs in
``order``), then ``<key>\\t<entry JSON>`` per job in that order, then ``{"part": "end"}``. Each
line is handed on (to a worker thread, ``AnswerStream``) as soon as it is whole, so a job's
log is parsed while the collector reads the next one and the answer is still in transit.
A one-trip sweep's answer may begin with job lines before the head (the running jobs a fast
listing named, read while ``squeue --json`` ran): each is held, and stands only if the head
lists its key in ``sent`` (the collector found the document gives that job the very spec
it was read with) as well as in ``order``; every other one is dropped (``ignored``).

The answer is read as data from the cluster, never trusted to be whole or well formed:

* A job line whose entry is not a JSON object (garbled, or cut short by the end of the
  stream) is that job's ``failed`` entry with the reason; the other jobs stand.
* A line naming a key the head did not announce, or one already answered, is ignored (and
  counted in ``ignored``): no line can add a job or overwrite another's entry.
* Jobs the head announced and no line answered (a collector killed midway) are in
  ``missing``: the probe collects them again, and reports them ``failed`` with the reason if
  that fails too. Nothing is dropped and nothing waits past the command's own timeout.
* An answer that is one JSON document (protocol 1: a collector that does not stream) is read
  as before, whole.

Each line is decoded by pydantic-core's JSON parser (:func:`loads`), ten times faster than
``json.loads`` on a job's entry (a log tail of escaped lines), and always to what ``json.loads``
gives: where that parser refuses a line (lone surrogates, nesting past 200, anything malformed)
``json.loads`` reads it, so a line's value, or the error that fails its job, is ``json.loads``'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from probes.remote.script import COLLECTOR_ARGV
from probes.slurm.transport import CommandResult, Runner, run_streaming

STREAM = 2
"""``probes.remote.collector.STREAM``: the protocol of a streamed answer."""

OnJob = Callable[[str, dict[str, Any], bytes | None], None]
"""``on_job(key, entry, raw)``: see :class:`AnswerReader`."""

MAX_KEY = 64
"""Bytes a job key may have on a job line (SLURM's are digits with ``_`` or ``+``)."""


def loads(raw: bytes) -> Any:
    """``json.loads(raw)``, read by pydantic-core's parser (jiter) wherever it accepts ``raw``:
    it refuses what it reads differently (lone surrogates, a BOM) and nesting past 200, and
    ``json.loads`` then reads the line, so the value or the error is always its own (module
    policy; ``tests/probes/slurm/test_answer_decode.py`` holds it to that)."""
    try:
        return from_json(raw)
    except ValueError:
        return json.loads(raw)


def unreadable(error: str) -> dict[str, Any]:
    """A job's entry when its line could not be read: its log ``failed``, with the reason."""
    return {"log": {"requested": None, "path": None, "status": "failed", "error": error,
                    "attempts": 1}}


class AnswerReader:
    """One answer, line by line (:meth:`line`, then :meth:`finish`); see the module policy.

    ``on_head(head)`` and ``on_job(key, entry, raw)`` are called as the lines are read (a
    job's only once, in the order of the stream; ``raw`` is the entry's JSON as sent, or
    ``None`` when it came inside a protocol 1 document or could not be read)."""

    def __init__(self, *, on_head: Callable[[dict[str, Any]], None] | None = None,
                 on_job: OnJob | None = None, on_early: OnJob | None = None) -> None:
        self.head: dict[str, Any] | None = None
        """The head line (``None`` until read; a protocol 1 answer is its own head)."""
        self.jobs: dict[str, Any] = {}
        self.ended = False
        """The end line was read: the collector finished its answer."""
        self.error: str | None = None
        """Why no answer could be read at all (the first line was not a head)."""
        self.banner = ""
        """The first line of text before the head that was none of the answer's (a login
        shell's); ``""`` when there was none."""
        self.ignored = 0
        self._order: dict[str, None] = {}
        self._early: dict[str, tuple[Any, bytes | None]] = {}
        self._on_head = on_head
        self._on_job = on_job
        self._on_early = on_early

    def line(self, raw: bytes, *, cut: bool = False) -> None:
        """One line of stdout, without its newline; ``cut``: the stream ended inside it."""
        if self.error is not None or self.ended:
            self.ignored += 1 if raw.strip() else 0
            return
        tab = raw.find(b"\t", 0, MAX_KEY + 1)
        if self.head is None:
            if tab > 0 and not raw.startswith(b"{"):
                self._before_head(raw, tab, cut)
            elif not raw.startswith(b"{") and not cut:
                # Text the login shell printed before the collector's (a motd, ``module``
                # notes): passed over, and named if no head follows.
                self.banner = self.banner or raw[:120].decode("utf-8", "replace").strip()
                self.ignored += 1
            else:
                self._first(raw, cut)
            return
        if tab < 0:
            self._other(raw)
            return
        key = raw[:tab].decode("ascii", "replace")
        if key not in self._order or key in self.jobs:
            self.ignored += 1
            return
        entry, payload = self._entry(raw, tab, cut)
        self._job(key, entry, payload)

    def _before_head(self, raw: bytes, tab: int, cut: bool) -> None:
        """A job line before the head (read while squeue ran): held until the head says
        whether it stands (its key in ``sent``); ``on_early`` sees it now."""
        key = raw[:tab].decode("ascii", "replace")
        if cut or key in self._early:
            self.ignored += 1
            return
        entry, payload = self._entry(raw, tab, cut)
        self._early[key] = (entry, payload)
        if self._on_early is not None and isinstance(entry, dict):
            self._on_early(key, entry, payload)

    @staticmethod
    def _entry(raw: bytes, tab: int, cut: bool) -> tuple[Any, bytes | None]:
        """A job line's entry and its JSON as sent (``None`` when it could not be read)."""
        entry: Any
        payload: bytes | None = None
        if cut:
            entry = unreadable("collector answer for this job was cut short"
                               f" ({len(raw) - tab - 1} bytes)")
        else:
            body = raw[tab + 1:]
            try:
                entry = loads(body)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested past it
                entry = unreadable(f"collector answer for this job is unreadable: {exc}")
            if isinstance(entry, dict):
                payload = body
            else:
                entry = unreadable("collector answer for this job is not an object")
        return entry, payload

    def _first(self, raw: bytes, cut: bool) -> None:
        try:
            first = loads(raw)
        except (ValueError, RecursionError) as exc:
            why = "was cut short" if cut else f"is unreadable: {exc}"
            self.error = f"collector answer {why}"
            return
        if not isinstance(first, dict):
            self.error = "collector answer is not an object"
        elif first.get("protocol") == STREAM and first.get("part") == "head":
            order = first.get("order")
            self._order = dict.fromkeys(str(k) for k in order) if isinstance(order, list) \
                else {}
            self.head = first
            if self._on_head is not None:
                self._on_head(first)
            sent = first.get("sent")
            for key in dict.fromkeys(str(k) for k in sent) if isinstance(sent, list) else ():
                if key in self._order and key in self._early:
                    # on_early saw it: it stands as the line it was, not read again
                    self.jobs[key] = self._early.pop(key)[0]
            self.ignored += len(self._early)  # read early, then not confirmed: dropped
            self._early.clear()
        elif isinstance(first.get("jobs"), dict):  # protocol 1: the whole answer at once
            self.head = first
            self.ended = True
            if self._on_head is not None:
                self._on_head(first)
            for key, entry in first["jobs"].items():
                self._job(str(key), entry, None)
        else:
            self.error = "collector answer has no jobs"

    def _other(self, raw: bytes) -> None:
        try:
            data = loads(raw)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and data.get("part") == "end":
            self.ended = True
        elif raw.strip():
            self.ignored += 1

    def _job(self, key: str, entry: Any, raw: bytes | None) -> None:
        self.jobs[key] = entry
        if self._on_job is not None and isinstance(entry, dict):
            self._on_job(key, entry, raw)

    @property
    def missing(self) -> list[str]:
        """Keys the head announced that no line answered (so far), in order."""
        return [k for k in self._order if k not in self.jobs]

    def answer(self) -> dict[str, Any] | None:
        """The answer in one document's shape (``jobs`` by key, the head's other fields), or
        ``None`` when no head was read."""
        if self.head is None:
            return None
        out = {k: v for k, v in self.head.items() if k not in ("part", "order", "sent")}
        out["jobs"] = dict(self.jobs)
        return out


class LineSplitter:
    """Bytes in, whole lines out (to ``emit``), in the event loop: a chunk is searched for
    newlines once, and a line spanning chunks is joined once."""

    def __init__(self, emit: Callable[[bytes, bool], None]) -> None:
        self._emit = emit
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            if self._partial:
                self._partial.append(chunk[start:nl])
                line = b"".join(self._partial)
                self._partial = []
            else:
                line = chunk[start:nl]
            self._emit(line, False)
            start = nl + 1
        if start < len(chunk):
            self._partial.append(chunk[start:])

    def close(self) -> None:
        """The stream ended: a last line without its newline is handed on as ``cut``."""
        if self._partial:
            line, self._partial = b"".join(self._partial), []
            if line.strip():
                self._emit(line, True)


def read_whole(stdout: str) -> AnswerReader:
    """A finished command's whole stdout, read as the stream would have been."""
    reader = AnswerReader()
    splitter = LineSplitter(lambda raw, cut: reader.line(raw, cut=cut))
    splitter.feed(stdout.encode("utf-8"))
    splitter.close()
    return reader


_READER: list[concurrent.futures.ThreadPoolExecutor] = []
_READER_LOCK = threading.Lock()


def _reader_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The ONE thread that reads every streamed answer of this process, lines of all the
    clusters swept at once in the order they came: folding is GIL-bound, and one such
    thread per stream (ten at ten clusters) would only contend with each other and with the
    event loop, which then drains the SSH channels late and stalls the remote collectors."""
    with _READER_LOCK:
        if not _READER:
            _READER.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="collector-answer"))
        return _READER[0]


async def stream_answer(runner: Runner, script: str, reader: AnswerReader, *,
                        on_arrival: Callable[[bytes], None] | None = None,
                        ) -> CommandResult:
    """Run the collector (``python3 -``, ``script`` on stdin), each whole line of its answer
    read by ``reader`` in the answers' worker thread as it arrives (decoding and whatever the
    reader's callbacks do: the probe parses each job's log there), while the event loop
    keeps receiving. ``on_arrival`` sees each line starting ``{`` (a head) on the event
    loop as it arrives, before the worker reads it. Returns once every line received is
    read; on an error or a cancellation (the sweep's deadline), while the command runs or
    while its last lines are read, the lines not yet read are skipped."""
    pool = _reader_thread()
    stop = threading.Event()
    failed: list[BaseException] = []

    def read(raw: bytes, cut: bool) -> None:
        if stop.is_set() or failed:
            return
        try:
            reader.line(raw, cut=cut)
        except BaseException as exc:  # raised here once every line is in (a reader bug)
            failed.append(exc)

    last: list[concurrent.futures.Future[None]] = []

    def emit(raw: bytes, cut: bool) -> None:
        if on_arrival is not None and raw.startswith(b"{"):
            on_arrival(raw)
        last[:] = [pool.submit(read, raw, cut)]

    splitter = LineSplitter(emit)
    try:
        res = await run_streaming(runner, list(COLLECTOR_ARGV), stdin=script,
                                  on_chunk=splitter.feed)
        splitter.close()
        if last:  # one thread, in order: the last line read means every line is
            await asyncio.wrap_future(last[0])
    except BaseException:
        # A sweep past its deadline (or cancelled) while lines wait to be read: none of
        # them is folded now; the fold under way is the last.
        stop.set()
        raise
    if failed:
        raise failed[0]
    return res

