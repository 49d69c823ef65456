"""Replayed Slack requests: a signed request is run once, a copy of it is refused.

Policy: Slack's signature (``v0`` HMAC-SHA256 over ``v0:{timestamp}:{body}``) is valid for any
copy of the request while its timestamp is within five minutes of our clock, so a captured
slash command or button press (a proxy's log, a shared HAR file) could be played back and
run again. Slack itself never sends one (timestamp, signature) pair twice: a command typed
again, or a retried event, is signed anew. So each signature that passed the check is
remembered until no clock could accept its timestamp any more (:data:`REMEMBER_S`), and a
request carrying one already seen is refused as a bad signature is (401, nothing run).

The memory is this process's (checked first: no wait) and Redis's (``SET NX`` on the
signature, shared by the replicas behind one load balancer). Redis is asked under a short
bound (:data:`STORE_BOUND_S`): Slack wants its answer within three seconds, and a Redis that
is down or frozen must not cost that; without it, the process's own memory still refuses a
copy sent to the same replica.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

import structlog

from bot.store import RedisStore, StoreUnavailable

log = structlog.get_logger(__name__)

REMEMBER_S = 660.0
"""How long a signature is remembered: a timestamp is accepted up to 300 s either side of our
clock, so a request is replayable for at most 600 s after it first arrives; a minute more
for clock steps."""
STORE_BOUND_S = 0.5
"""How long the shared memory in Redis is waited on before the request is let through on the
process's own memory alone."""
KEPT = 100_000
"""Signatures kept in the process (oldest dropped first): far more than Slack sends in
:data:`REMEMBER_S`, so only a flood could push one out early."""


class SeenRequests:
    """The signatures of the Slack requests already run (see the module's policy)."""

    def __init__(self, store: RedisStore | None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        """signature -> when it stops being remembered (``clock`` time), oldest first."""

    async def first_time(self, signature: str) -> bool:
        """True the first time ``signature`` (already checked valid) is seen; False for a
        copy of a request seen before."""
        now = self._clock()
        self._forget_expired(now)
        if signature in self._seen:
            return False
        self._seen[signature] = now + REMEMBER_S
        if len(self._seen) > KEPT:
            self._seen.popitem(last=False)
        return await self._first_in_store(signature)

    def _forget_expired(self, now: float) -> None:
        while self._seen:
            oldest, until = next(iter(self._seen.items()))
            if until > now:
                return
            del self._seen[oldest]

    async def _first_in_store(self, signature: str) -> bool:
        if self._store is None:
            return True
        try:
            async with asyncio.timeout(STORE_BOUND_S):
                return await self._store.first_seen(f"slack-request:{signature}",
                                                    ttl_s=REMEMBER_S)
        except (StoreUnavailable, TimeoutError) as exc:
            # Let through: this process's memory refuses a copy sent here; only a copy sent
            # to another replica while Redis is away would run.
            log.warning("replay check without redis", error=str(exc) or "timed out")
            return True
