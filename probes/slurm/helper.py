"""A forked child that folds some of a cold sweep's jobs on another core.

Policy: parsing a log is pure-Python CPU work, and one process folds one job at a time
whatever its threads (the GIL). A one-shot command (``jobtables sweep``: nothing else runs in
the process, and it exits after printing) may let a cold sweep fork ONE helper when the
machine has a second core and the load leaves one idle (:func:`allow`, :func:`idle_core`):
the answer's worker thread hands it job lines as they arrive (the raw bytes; it decodes and
folds them itself) while it has few owed (``BACKLOG``), and folds the others. The helper
only folds: no I/O but its two pipes, no asyncio, no logging, and it ends with
``os._exit`` (nothing of the parent's is flushed or closed twice). Results come back
pickled (~0.1 ms a job against ~2 ms of folding).

The helper is a speed-up, never a dependency: a job it did not answer (it crashed, hung,
or was stopped) is folded by the parent as if there were no helper; it is stopped when the
sweep ends however it ends, and a helper silent for ``STALL_S`` is killed. The bot never
forks one (nothing is allowed unless a command turns it on with :func:`allow`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO

from probes.models import SchedulerRecord

STALL_S = 2.0
"""A helper that sends nothing for this long while owing results is killed."""

BACKLOG = 2
"""Jobs handed to the helper and not answered yet, at most: more go to the parent's fold."""

_HEADER = struct.Struct("!I")
_state = {"allowed": False, "busy_too": False, "live": 0}
_lock = threading.Lock()

Fold = Callable[[SchedulerRecord, Mapping[str, Any] | None], Any]


@contextlib.contextmanager
def allow(*, busy_too: bool = False) -> Iterator[None]:
    """Within this block cold sweeps may fork a helper (a one-shot command's sweep), when a
    core looks idle (:func:`idle_core`; ``busy_too``: whatever the load, for tests)."""
    before = _state["allowed"], _state["busy_too"]
    _state["allowed"], _state["busy_too"] = True, busy_too
    try:
        yield
    finally:
        _state["allowed"], _state["busy_too"] = before


def idle_core() -> bool:
    """A core is likely free for a helper: the 1-minute load average is below the cores
    this process may run on. On a busy machine a helper only adds work (its own decoding,
    pickling, and copy-on-write faults in both processes) for no core to run it."""
    try:
        return os.getloadavg()[0] < _cores()
    except OSError:
        return True


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_frame(stream: BinaryIO) -> bytes | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def _child(jobs_fd: int, results_fd: int, fold: Fold,
           records: Mapping[str, SchedulerRecord]) -> None:
    """The helper's whole life: frames of ``key\\tentry JSON`` in, ``(key, result)`` out."""
    with os.fdopen(jobs_fd, "rb") as jobs:
        while (frame := _read_frame(jobs)) is not None:
            key, _, raw = frame.partition(b"\t")
            name = key.decode("ascii", "replace")
            try:
                result = fold(records[name], json.loads(raw))
                blob = pickle.dumps((name, result), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # the parent folds this one itself
                blob = pickle.dumps((name, None))
            _write_all(results_fd, _HEADER.pack(len(blob)) + blob)


class FoldHelper:
    """One forked helper (see the module policy); the parent side."""

    def __init__(self, pid: int, jobs_fd: int, results_fd: int) -> None:
        self._pid = pid
        self._jobs_fd: int | None = jobs_fd
        self._results = os.fdopen(results_fd, "rb")
        self.sent: dict[str, Any] = {}
        """Job key -> the parent's own entry for it (what ``take`` matches)."""
        self.answered: dict[str, Any] = {}
        self._heard = time.monotonic()
        self._done = threading.Event()
        self._reaped = False
        threading.Thread(target=self._read, name="fold-helper", daemon=True).start()

    @classmethod
    def start(cls, fold: Fold, records: Mapping[str, SchedulerRecord]) -> FoldHelper | None:
        """Fork a helper if allowed and a core is free for it; else ``None``."""
        with _lock:
            if not _state["allowed"] or _state["live"] >= _cores() - 1 \
                    or not (_state["busy_too"] or idle_core()):
                return None
            _state["live"] += 1
        try:
            jobs_r, jobs_w = os.pipe()
            results_r, results_w = os.pipe()
            with warnings.catch_warnings():  # 3.12+ warns of fork in a threaded process:
                # the child takes no lock the parent's threads may hold (see the policy)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            with _lock:
                _state["live"] -= 1
            return None
        if pid == 0:  # the helper: fold, then leave without running anything of the parent's
            status = 0
            try:
                os.close(jobs_w)
                os.close(results_r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                with contextlib.suppress(ValueError, OSError):  # the parent's loop's, not ours
                    signal.set_wakeup_fd(-1)
                _child(jobs_r, results_w, fold, records)
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        os.close(jobs_r)
        os.close(results_w)
        return cls(pid, jobs_w, results_r)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def ready(self) -> bool:
        """It can take another job now (few owed, still running)."""
        return self._jobs_fd is not None and len(self.sent) - len(self.answered) < BACKLOG

    def send(self, key: str, raw: bytes, entry: Any) -> bool:
        """Hand one job's line over; ``False`` when the helper is gone (fold it here)."""
        if self._jobs_fd is None:
            return False
        frame = key.encode("ascii") + b"\t" + raw
        try:
            _write_all(self._jobs_fd, _HEADER.pack(len(frame)) + frame)
        except OSError:
            self._close_jobs()
            return False
        self.sent[key] = entry
        return True

    def _read(self) -> None:
        try:
            while (frame := _read_frame(self._results)) is not None:
                key, result = pickle.loads(frame)  # our own forked child's bytes
                self.answered[key] = result
                self._heard = time.monotonic()
        except Exception:  # whatever it did not answer is folded by the parent
            pass
        finally:
            with contextlib.suppress(OSError):
                self._results.close()
            self._done.set()

    def finish(self) -> dict[str, Any]:
        """No more jobs: wait for what it owes (killing it once silent for ``STALL_S``) and
        return its results by key (a job it could not fold is absent)."""
        self._close_jobs()
        while not self._done.wait(0.05):
            if time.monotonic() - self._heard > STALL_S:
                self.stop()
                break
        self._reap()
        return {k: v for k, v in self.answered.items() if v is not None}

    def stop(self) -> None:
        """End it now (the sweep failed, was cancelled, or it stalled)."""
        self._close_jobs()
        with contextlib.suppress(OSError):
            os.kill(self._pid, signal.SIGKILL)
        self._reap()

    def _close_jobs(self) -> None:
        fd, self._jobs_fd = self._jobs_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _reap(self) -> None:
        if self._reaped:
            return
        self._reaped = True
        with contextlib.suppress(OSError):
            os.waitpid(self._pid, 0)
        with _lock:
            _state["live"] -= 1
