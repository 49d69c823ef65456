"""Ctrl-C for the one-shot commands (``sweep``, ``demo``, ``job``, ``probe``, ``record``): exit
130 and print no report, however the interrupted work took its cancellation.

``asyncio.run`` turns a Ctrl-C into one cancellation of the main task, and into
``KeyboardInterrupt`` only when that task then ends cancelled. On Python 3.11 a cancellation
can be lost: ``asyncio.wait_for`` (asyncssh's connect waits through it) returns its inner
result when that result and the cancellation arrive together (CPython gh-86296, fixed in 3.12).
The sweep then went on as if nothing had been pressed: it printed its report and exited 0, or,
waiting on something long, ignored the key. :func:`run` takes the SIGINT itself: it cancels the
task again every :data:`RECANCEL_S` until it ends, and once a Ctrl-C was seen the command
prints nothing (:func:`check`, called just before a command prints) and ends with
``KeyboardInterrupt``, which ``bot.cli`` makes exit 130.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

RECANCEL_S = 0.5
"""How long a cancelled command may run on before it is cancelled again (a lost cancellation);
long enough for its clean-up (closing SSH connections) to finish first."""


class _Seen:
    """Whether a Ctrl-C came during the command :func:`run` runs (one per process)."""

    sigint = False


_SEEN = _Seen()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C came: called before a command prints, so a
    command whose cancellation was lost prints nothing."""
    if _SEEN.sigint:
        raise KeyboardInterrupt


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, but a Ctrl-C always ends it in ``KeyboardInterrupt``."""
    _SEEN.sigint = False
    try:
        result = asyncio.run(_guarded(main))
    except asyncio.CancelledError:
        check()
        raise
    check()  # the task ended normally: its cancellation was lost
    return result


async def _guarded(main: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None

    def cancel() -> None:
        if not task.done():
            task.cancel()
            loop.call_later(RECANCEL_S, cancel)

    def on_sigint(_signum: int, _frame: object) -> None:
        # A Python handler, not loop.add_signal_handler's: it runs as the signal comes, so a
        # Ctrl-C while the task ends (rendering, printing) is seen, not left in the loop's pipe.
        if _SEEN.sigint:  # a second Ctrl-C: out now, as asyncio.run's own handler does (a
            raise KeyboardInterrupt  # command stuck in synchronous code still ends)
        _SEEN.sigint = True
        loop.call_soon_threadsafe(cancel)

    before = signal.signal(signal.SIGINT, on_sigint)
    try:
        return await main
    finally:
        signal.signal(signal.SIGINT, before)
