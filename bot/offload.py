"""Where the bot's heavy CPU stages run: a worker process for big inputs, a thread for small.

Policy (issue 12: a 5,000-job sweep must not delay a Slack ack): a worker *thread* still holds
the GIL, and pydantic's and json's C calls hold it for their whole length (dumping a 5,000-job
report is one 0.6 s call), so the event loop waits for the GIL at every await while the sweep
cache is encoded, decoded or rendered. Those stages go to one worker process instead when
their input is big (``min_bytes``); small inputs stay in a thread, where pickling and a
process round trip would cost more than the work. The functions run are plain module-level
functions of picklable arguments (``bot.cached_render``), so both paths run the same code and
give the same answer. One worker (a second would double the memory of a big decode under the
chart's 1 GiB limit), started by ``forkserver`` (never ``fork`` from a process with threads),
and a fresh one for every task (``max_tasks``): a worker that decoded and rendered 5,016 jobs
stays at about 360 MB of RSS, since CPython keeps its freed arenas, while a new fork of the
preloaded server costs about 23 ms against the seconds the task takes. A worker
that dies (OOM-killed) is logged and its task re-run in a thread; the next task starts a new
pool. Where no process can be started at all, the stages run in threads (logged once). The
process also gets a shorter GIL switch interval (:func:`tune_interpreter`): the probes still
parse in worker threads, and the loop thread gets the GIL back after 1 ms of their work rather
than 5 ms.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

import structlog

log = structlog.get_logger(__name__)

T = TypeVar("T")

MIN_BYTES = 1_000_000
"""Inputs at least this big (a sweep cache of about 170 jobs) go to the worker process."""

SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval of the bot process (CPython's default is 5 ms)."""

_PRELOAD = ["bot.cached_render"]


def tune_interpreter(interval_s: float = SWITCH_INTERVAL_S) -> None:
    """Let the event loop thread take the GIL back sooner from CPU-bound worker threads."""
    if sys.getswitchinterval() > interval_s:
        sys.setswitchinterval(interval_s)


def keep_cwd_off_child_path() -> None:
    """Keep the current directory off the worker processes' ``sys.path`` before they start.

    CPython 3.11 starts the forkserver and the resource tracker as ``python -c '...'``, which
    puts ``''`` (the current directory) first on their path: a bot started in a directory
    others can write would import a planted ``selectors.py`` or ``bot/`` there, as the bot's
    user, before the server's first line runs. The children inherit the interpreter's flags
    (``-I``/``-P`` already keep it off) and its environment, so PYTHONSAFEPATH (3.11+) does it
    for every later start too (a forkserver restarted after a crash); nothing else the bot
    runs is a Python that should see that directory. Under ``-E`` alone a child ignores the
    variable: no process is started then (RuntimeError: the stages run in threads).
    """
    if sys.flags.isolated or sys.flags.safe_path:
        return
    if sys.flags.ignore_environment:
        raise RuntimeError("python -E without -P: a worker process would import from the "
                           "current directory")
    os.environ["PYTHONSAFEPATH"] = "1"


class Offload:
    """Runs CPU stages off the event loop: in the worker process when big, else in a thread."""

    def __init__(self, *, processes: bool = True, min_bytes: int = MIN_BYTES,
                 max_tasks: int = 1) -> None:
        self.processes = processes
        self.min_bytes = min_bytes
        self.max_tasks = max_tasks
        self._pool: ProcessPoolExecutor | None = None
        self.in_process = 0
        """Tasks the worker process ran (for tests and benchmarks)."""

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            keep_cwd_off_child_path()
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(_PRELOAD)
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context,
                                             max_tasks_per_child=self.max_tasks)
        return self._pool

    async def run(self, fn: Callable[..., T], *args: Any, size: int) -> T:
        """``fn(*args)`` off the loop; ``size`` (bytes, roughly) picks the process or a thread."""
        if not self.processes or size < self.min_bytes:
            return await asyncio.to_thread(fn, *args)
        try:
            # Submitted from a thread: a submit may start the worker (the forkserver's first
            # start imports the bot, seconds) or wait on the lock the pool holds while it
            # replaces one; neither may stall the event loop.
            future = await asyncio.to_thread(self._executor().submit, fn, *args)
        except (OSError, RuntimeError) as exc:  # no process here (no /dev/shm, no writable
            log.warning("no worker process; CPU stages run in threads", error=str(exc))
            self.processes = False  # /tmp, a process limit): threads, as for small inputs
            self._discard()
            return await asyncio.to_thread(fn, *args)
        try:
            result = await asyncio.wrap_future(future)
        except BrokenProcessPool as exc:  # the worker died (OOM-killed): this task in a thread
            log.warning("worker process died; running in a thread", task=fn.__name__,
                        error=str(exc))
            self._discard()
            return await asyncio.to_thread(fn, *args)
        self.in_process += 1
        return result

    def _discard(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def aclose(self) -> None:
        """Stop the worker process (waits for its current task, off the loop)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)


__all__ = ["MIN_BYTES", "Offload", "keep_cwd_off_child_path", "tune_interpreter"]
