"""Scheduled sweeps: interval maths (pure) and the loop that claims each interval once.

Policy: time is cut into epoch-aligned intervals of ``sweep_every_minutes``; interval ``n``
covers ``[n*every, (n+1)*every)``. Every replica computes the same ``n``, and the one that wins
the Redis ``SET NX PX`` on ``tick:{n}`` posts that interval's sweep, so several replicas post
exactly one sweep per interval. A slow sweep never piles up ticks: after each run the loop
sleeps to the start of the next interval *after now*, skipping any it overran. A process that
starts mid-interval sweeps at once if no replica has claimed that interval yet (a restart never
leaves a gap, and never repeats what another replica already posted). The interval length is
re-read on every tick because the config is.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import structlog

log = structlog.get_logger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def interval_number(now: datetime, every_s: float) -> int:
    """The number of the interval that contains ``now``."""
    if every_s <= 0:
        raise ValueError("interval must be positive")
    return math.floor((now - EPOCH).total_seconds() / every_s)


def interval_start(number: int, every_s: float) -> datetime:
    return EPOCH + timedelta(seconds=number * every_s)


def next_tick_at(now: datetime, every_s: float) -> datetime:
    """The start of the first interval that begins strictly after ``now``."""
    return interval_start(interval_number(now, every_s) + 1, every_s)


def seconds_until_next_tick(now: datetime, every_s: float) -> float:
    return max(0.0, (next_tick_at(now, every_s) - now).total_seconds())


class Scheduler:
    """Runs ``run(n)`` once per interval, on whichever replica ``claim(n)`` says won."""

    def __init__(
        self,
        *,
        every_s: Callable[[], float],
        claim: Callable[[int, float], Awaitable[bool]],
        run: Callable[[int], Awaitable[None]],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._every_s = every_s
        self._claim = claim
        self._run = run
        self._clock = clock
        self._sleep = sleep
        self._last: int | None = None

    async def tick(self) -> bool:
        """Claim the current interval and sweep if this replica won; True if it swept."""
        every = self._every_s()
        number = interval_number(self._clock(), every)
        if number == self._last:
            return False
        self._last = number
        # The lock outlives its interval a little so a straggler replica whose clock lags
        # cannot claim the same number after the winner's key expired.
        if not await self._claim(number, every * 2):
            log.info("interval claimed by another replica", interval=number)
            return False
        await self._run(number)
        return True

    async def run_forever(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                # One failed sweep must not end scheduled sweeps; the next interval retries.
                log.exception("scheduled sweep failed")
            await self._sleep(seconds_until_next_tick(self._clock(), self._every_s()))
