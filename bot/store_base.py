"""The store's Redis plumbing: one client, errors translated once, fast failure while frozen.

Policy (``bot.store``): Redis errors are translated exactly once, in
:meth:`StoreBase._translated`, into :class:`StoreUnavailable` (the original chained); after
:data:`TIMEOUTS_TO_PAUSE` calls in a row timed out, every call is refused unsent for
:data:`TIMEOUT_PAUSE_S`. Scripts are called by ``EVALSHA`` and sent whole only to a Redis
that answers NOSCRIPT. Values are JSON that keeps NaN/Infinity (:func:`dump_json`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot.store_texts import TextBook
from bot.store_windows import CACHED_POINTS, WindowCache


class StoreUnavailable(Exception):
    """Redis could not be reached or refused the operation. ``reason`` says which, without
    the error's own text (which names Redis's address): what Slack may be told."""

    def __init__(self, message: str, *, reachable: bool = False) -> None:
        super().__init__(message)
        self.reason = "Redis refused a request" if reachable else "Redis is unreachable"


def dump_json(value: Any) -> str:
    """JSON that keeps NaN/Infinity and writes datetimes as ISO 8601."""
    return json.dumps(value, default=_default, allow_nan=True, separators=(",", ":"))


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump()
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[at : at + size] for at in range(0, len(items), size)]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


TIMEOUT_PAUSE_S = 15.0
"""After :data:`TIMEOUTS_TO_PAUSE` calls in a row timed out, how long every call is refused
at once instead of sent. A frozen Redis (its port accepting, nothing answering) costs each
call its socket timeout twice (one retry): a sweep's and an answer's calls, one after
another, took 40 s and 20 s. Refused Redis (connection refused) fails fast anyway and pauses
nothing."""
TIMEOUTS_TO_PAUSE = 2
"""Timed-out calls in a row (no call answered between them) that pause the store: one alone
may be a busy machine's stall (an event loop starved past the socket timeout), not a frozen
Redis, and pauses nothing."""


class StoreBase:
    """A key prefix on one Redis client, and the calls every part of
    :class:`bot.store.RedisStore` makes through it."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str,
        window_len: int = 200,
        expire_s: float = 72 * 3600,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        cached_points: int = CACHED_POINTS,
    ) -> None:
        self._r = client
        self._paused_until = 0.0
        """``time.monotonic()`` until which calls are refused unsent (``TIMEOUT_PAUSE_S``)."""
        self._timeouts = 0
        """Calls timed out since one was last answered."""
        self.prefix = prefix
        self.window_len = window_len
        self.expire_ms = int(expire_s * 1000)
        self._clock = clock
        self.windows = WindowCache(window_len=window_len, expire_ms=self.expire_ms,
                                   cached_points=cached_points)
        """The windows this process merged last (``bot.store_windows``): a warm merge sends
        the new points and reads back two integers per job, not the window."""
        self.texts = TextBook()
        """The log texts this process wrote last (``bot.store_texts``): a warm save appends
        each job's new bytes, not its text."""

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    @asynccontextmanager
    async def _translated(self, what: str) -> AsyncIterator[None]:
        if time.monotonic() < self._paused_until:
            raise StoreUnavailable(f"redis {what}: not sent (a call timed out less than "
                                   f"{TIMEOUT_PAUSE_S:g}s ago)")
        try:
            yield
        except RedisError as exc:
            if isinstance(exc, RedisTimeoutError):
                self._timeouts += 1
                if self._timeouts >= TIMEOUTS_TO_PAUSE:
                    self._paused_until = time.monotonic() + TIMEOUT_PAUSE_S
            raise StoreUnavailable(f"redis {what}: {exc}", reachable=not isinstance(
                exc, RedisConnectionError | RedisTimeoutError)) from exc
        except OSError as exc:  # a socket error that escaped redis-py's own wrapping
            raise StoreUnavailable(f"redis {what}: {exc}") from exc
        self._timeouts = 0

    async def ping(self) -> None:
        async with self._translated("ping"):
            await self._r.ping()

    async def aclose(self) -> None:
        await self._r.aclose()

    async def _script_calls(self, sha: str, lua: str,
                            calls: Sequence[tuple[Sequence[str], Sequence[Any]]],
                            sent: Sequence[Any] | None = None) -> list[Any]:
        """Each call's answers, concatenated: ``(keys, args)`` calls of one script, pipelined
        (one round trip; none when the caller ``sent`` them by ``EVALSHA`` in its own
        pipeline and passes their results). A Redis without the script cached (restarted,
        failed over, flushed) answers NOSCRIPT before running anything: those calls go again
        with the script itself, once."""
        answers: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        for by_sha in (True, False):  # EVALSHA; then EVAL for the calls answered NOSCRIPT
            if not pending:
                break
            if by_sha and sent is not None:
                results = list(sent)
            else:
                async with self._r.pipeline(transaction=False) as p:
                    for n in pending:
                        keys, args = calls[n]
                        if by_sha:
                            p.evalsha(sha, len(keys), *keys, *args)
                        else:
                            p.eval(lua, len(keys), *keys, *args)
                    results = await p.execute(raise_on_error=False)
            missing = []
            for n, result in zip(pending, results, strict=True):
                if by_sha and isinstance(result, NoScriptError):
                    missing.append(n)
                elif isinstance(result, Exception):
                    raise result
                else:
                    answers[n] = result
            pending = missing
        return [answer for chunk in answers for answer in chunk]
