"""A command's or a press's answer through its ``response_url``: failures logged and counted.

Policy: Bolt's ``respond()`` returns the webhook's status instead of raising, so a 404 used to
vanish; :class:`Responder` logs and counts it (``jobtables_response_url_errors_total``) and
keeps it in ``bot.delivery.SlackHealth`` for ``/healthz``, as the Web API client does its
calls. Each answer waits the Web API's bound, not the webhook client's 30 s, and gives up with
its posting (``bot.breaker``). A 429 is waited out as its ``Retry-After`` asks (up to
``bot.delivery.MAX_RETRY_AFTER_S``, :data:`RATE_LIMITED_RETRIES` times). An answer that
timed out is sent once more, as the posting's probe: nothing else retries a command's answer,
and no check can tell whether the first landed (an ephemeral answer is listed by no API and
Slack gives it no id), so a duplicate is the lesser harm than a lost answer.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import ClientError

from bot.breaker import give_up, given_up, request_bound, tracked
from bot.delivery import (
    MAX_RETRY_AFTER_S,
    Respond,
    SlackHealth,
    header_named,
    retry_after_s,
)
from bot.telemetry import Telemetry
from report.chunks import text_blocks

log = structlog.get_logger("bot.delivery")  # the logger these records had before the move

RATE_LIMITED_RETRIES = 3
"""How many 429s in a row a ``response_url`` answer waits out (as the Web API client's)."""


class Responder:
    """Wraps Bolt's ``respond()``: a failed ``response_url`` POST is logged and counted."""

    def __init__(self, respond: Respond, *, telemetry: Telemetry, health: SlackHealth,
                 surface: str, timeout_s: float | None = None) -> None:
        self._respond = respond
        self._telemetry = telemetry
        self._health = health
        self._surface = surface
        self._timeout_s = timeout_s
        """Each answer's bound (the Web API's: Bolt's webhook client waits 30 s)."""

    async def __call__(self, **kwargs: Any) -> bool:
        if not kwargs.get("blocks") and (blocks := text_blocks(str(kwargs.get("text") or ""))):
            kwargs["blocks"] = blocks  # as :func:`post`: Slack links nothing in verbatim text
        if give_up() is not None:  # an answer of a hung posting
            self._telemetry.response_url_errors.labels(surface=self._surface,
                                                       error="gave_up").inc()
            return False
        # No other try comes for a command's answer (a sweep has the scheduler's retry): one
        # lost to a single timeout is sent once more, as the posting's probe (a duplicate, if
        # the first arrived after all, is the lesser harm). A 429 (Slack rate-limits its
        # webhooks, about a message a second) is waited out as its Retry-After asks, as the
        # Web API's are (BoundedRateLimitRetryHandler): it is no gone URL.
        timeouts = limited = 0
        while True:
            try:
                async with (tracked(f"response_url ({self._surface})"),
                            asyncio.timeout(request_bound(self._timeout_s))):
                    response = await self._respond(**kwargs)
            except TimeoutError as exc:
                self._failed(type(exc).__name__)
                timeouts += 1
                if timeouts > 1 or given_up():
                    return False
                continue
            except (ClientError, OSError) as exc:
                return self._failed(type(exc).__name__)
            status = getattr(response, "status_code", 200)
            if status == 429 and limited < RATE_LIMITED_RETRIES:
                headers = getattr(response, "headers", None)
                wait = retry_after_s(header_named(headers, "retry-after"))
                if wait <= MAX_RETRY_AFTER_S:
                    limited += 1
                    await asyncio.sleep(wait)
                    continue
            return self._failed(f"http_{status}") if status >= 300 else True

    def _failed(self, error: str) -> bool:
        self._telemetry.response_url_errors.labels(surface=self._surface, error=error).inc()
        self._health.record(f"response_url ({self._surface})", error, datetime.now(UTC))
        log.error("response_url post failed", surface=self._surface, error=error)
        return False
