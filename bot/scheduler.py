"""Scheduled sweeps: interval maths (pure) and the loop that claims each interval once.

Policy: time is cut into epoch-aligned intervals of ``sweep_every_minutes``; interval ``n``
covers ``[n*every, (n+1)*every)``. Every replica computes the same ``n``, and the one that wins
the Redis ``SET NX PX`` on ``tick:{n}`` posts that interval's sweep, so several replicas post
exactly one sweep per interval. A slow sweep never piles up ticks: after each run the loop
sleeps to the start of the next interval *after now*, skipping any it overran. A process that
starts mid-interval sweeps at once if no replica has claimed that interval yet (a restart never
leaves a gap, and never repeats what another replica already posted). The interval length is
re-read on every tick because the config is.

A sweep that failed (it raised, a cluster was unreachable, Redis blipped, Slack refused a
post: ``run`` says so by returning False) is tried once more soon, after :func:`retry_delay`
(a tenth of the interval, at most a minute), by the replica that won the interval and under
its claim: no other replica posts it, and the retry ends before the next interval (a retry
that would not, taking as long as the failed try, is left to that interval). The retry
publishes only what the first try could not (``bot.digest``: the parent is edited, not posted
again; only changes not yet told, and the replies Slack refused, are posted).
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


RETRY_MAX_S = 60.0
"""The longest wait before a failed sweep's one retry."""


def retry_delay(every_s: float) -> float:
    """How long after a failed sweep its retry runs: soon, bounded, well inside the interval."""
    return min(RETRY_MAX_S, every_s / 10)


class Scheduler:
    """Runs ``run(n, retry)`` once per interval, on whichever replica ``claim(n)`` says won,
    and once more (``retry`` True) soon after when the first run says it failed."""

    def __init__(
        self,
        *,
        every_s: Callable[[], float],
        claim: Callable[[int, float], Awaitable[bool]],
        run: Callable[[int, bool], Awaitable[bool | None]],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._every_s = every_s
        self._claim = claim
        self._run = run
        self._clock = clock
        self._sleep = sleep
        self._last: int | None = None
        self.retry_at: tuple[int, datetime] | None = None
        """The interval whose failed sweep is to be tried again, and when."""

    async def tick(self) -> bool:
        """Claim the current interval and sweep if this replica won, or run the retry that
        is due; True if it swept."""
        every = self._every_s()
        now = self._clock()
        number = interval_number(now, every)
        if number == self._last:
            if self.retry_at is None or self.retry_at[0] != number or now < self.retry_at[1]:
                return False
            self.retry_at = None
            await self._attempt(number, every, retry=True)
            return True
        self._last, self.retry_at = number, None
        # The lock outlives its interval a little so a straggler replica whose clock lags
        # cannot claim the same number after the winner's key expired.
        if not await self._claim(number, every * 2):
            log.info("interval claimed by another replica", interval=number)
            return False
        await self._attempt(number, every, retry=False)
        return True

    async def _attempt(self, number: int, every: float, *, retry: bool) -> None:
        began = self._clock()
        try:
            done = await self._run(number, retry) is not False
        except Exception:
            # One failed sweep must not end scheduled sweeps: retried once, then the next
            # interval sweeps again.
            log.exception("scheduled sweep failed", interval=number, retry=retry)
            done = False
        if done or retry:
            return
        now = self._clock()
        due = now + timedelta(seconds=retry_delay(every))
        # Only a retry that should end (taking as long as this try) before the next interval
        # begins: one that overran would cost this replica the next interval's tick.
        if due + (now - began) < interval_start(number + 1, every):
            log.warning("scheduled sweep incomplete; retrying soon", interval=number,
                        at=due.isoformat())
            self.retry_at = (number, due)

    def seconds_to_wake(self) -> float:
        """Until the next interval, or the pending retry if that comes first."""
        now = self._clock()
        wait = seconds_until_next_tick(now, self._every_s())
        if self.retry_at is not None:
            wait = min(wait, max(0.0, (self.retry_at[1] - now).total_seconds()))
        return wait

    async def run_forever(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                # A failed claim (its store raising) must not end scheduled sweeps.
                log.exception("scheduled sweep failed")
            await self._sleep(self.seconds_to_wake())
