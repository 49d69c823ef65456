"""Background tasks: one owner that tracks them and logs a crash the moment it happens.

Policy (after kopf's ``aiotasks``): no task runs untracked. Every background coroutine goes
through :meth:`TaskSet.spawn`, which names it, keeps a reference (so it is not garbage
collected mid-flight), and logs an exception with its traceback as soon as the task dies —
not when someone finally awaits it. :meth:`TaskSet.drain` waits for the work in flight (tests
use it instead of sleeping); :meth:`TaskSet.aclose` cancels what is left at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class TaskSet:
    """The set of background tasks one bot process owns."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.crashes = 0
        """Tasks that ended with an exception (for tests and metrics)."""

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background under ``name``; a crash is logged at once."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.crashes += 1
            log.error("background task crashed", task=task.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every task (including ones spawned meanwhile) has finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self, *, grace_s: float = 5.0) -> None:
        """Cancel every task and wait (at most ``grace_s``) for them to unwind."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
