"""One posting's circuit breaker: a hung Slack costs about one request's bound, a slow call none.

Policy: a *posting* (:func:`posting`: a scheduled sweep's messages, a command's or a press's
answer) is a run of Slack calls that share one fate. Each request waits the request bound
(``[slack] api_timeout_seconds``). After one times out, the next is let through on
:data:`PROBE_SHARE` of that bound: answered (even with an error), the breaker closes and the
posting carries on, so one slow call does not silence the rest of a sweep; timed out too
(:data:`STRIKES` in a row), the API counts as hung and every later call of the posting gives
up at once, unsent (:class:`GaveUp`). A hung API so costs a posting one and a half bounds,
however many messages it has. The Web API client (``bot.delivery.CountingWebClient``) and
the ``response_url`` answers (``bot.responder.Responder``) both go through :func:`tracked`, and
so do a file upload's bytes, sent to Slack's upload URL outside the Web API methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import structlog

log = structlog.get_logger("bot.delivery")  # the logger these records had before the split

PROBE_SHARE = 0.5
"""After a request of a posting timed out, the share of the request bound the next one gets
(the probe): a Slack that answers again answers a chat call in well under it."""
STRIKES = 2
"""Timeouts in a row after which the rest of a posting gives up unsent."""


class GaveUp(TimeoutError):
    """A call not sent: two requests in a row of the same :func:`posting` timed out (the Web
    API is hung). A ``TimeoutError``, so every caller treats it as the timeout it stands for."""


@dataclass
class Posting:
    """One posting's breaker: closed (full bound), probing after a timeout (the probe's
    share), open after :data:`STRIKES` timeouts in a row (:attr:`hung` set: give up)."""

    hung: str | None = None
    """The call whose timeout opened the breaker, once one has."""
    gave_up: int = 0
    """Calls given up unsent."""
    strikes: int = 0
    """Timeouts in a row (an answered call resets them)."""

    @property
    def giving_up(self) -> bool:
        return self.hung is not None

    def bound(self, seconds: float | None) -> float | None:
        """The next request's bound: the full ``seconds``, or the probe's share of it."""
        if seconds is None or not self.strikes:
            return seconds
        return seconds * PROBE_SHARE

    def timed_out(self, call: str) -> None:
        self.strikes += 1
        if self.strikes >= STRIKES and self.hung is None:
            self.hung = call

    def answered(self) -> None:
        self.strikes = 0


_POSTING: ContextVar[Posting | None] = ContextVar("slack_posting", default=None)


@contextmanager
def posting() -> Iterator[Posting]:
    """A run of Slack calls that give up together: after two requests in a row time out,
    the rest (in this task and the tasks it starts) fail at once with :class:`GaveUp`."""
    scope = Posting()
    token = _POSTING.set(scope)
    try:
        yield scope
    finally:
        _POSTING.reset(token)
        if scope.gave_up:
            log.warning("slack api hung; the rest of this posting's calls given up",
                        hung=scope.hung, gave_up=scope.gave_up)


def given_up() -> bool:
    """Whether the current :func:`posting` gives up its calls (no pacing wait for them)."""
    scope = _POSTING.get()
    return scope is not None and scope.giving_up


def give_up() -> Posting | None:
    """The current posting when it gives this call up (counted there), else ``None``."""
    scope = _POSTING.get()
    if scope is None or not scope.giving_up:
        return None
    scope.gave_up += 1
    return scope


def request_bound(seconds: float | None) -> float | None:
    """A request's bound in the current posting (``seconds`` outside one)."""
    scope = _POSTING.get()
    return seconds if scope is None else scope.bound(seconds)


@asynccontextmanager
async def tracked(call: str) -> AsyncIterator[None]:
    """One request of the current posting, if any: its outcome told to the breaker. A
    ``TimeoutError`` is a strike; anything else (an answer, an error answer, a refused
    connection) says Slack is not hung."""
    scope = _POSTING.get()
    try:
        yield
    except TimeoutError:
        if scope is not None:
            scope.timed_out(call)
        raise
    except Exception:
        if scope is not None:
            scope.answered()
        raise
    if scope is not None:
        scope.answered()
