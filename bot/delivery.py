"""Talking to Slack when Slack says no: every failure logged once, counted, and survivable.

Policy: the Web API client (:class:`CountingWebClient`) is the one place a Slack failure is
seen. After slack_sdk's own retries (connection errors, 429 with ``Retry-After``) a failed call
is logged once with Slack's error code (``not_in_channel``, ``user_not_found``,
``ratelimited``, ...), counted in ``jobtables_slack_api_errors_total{method,error}`` and kept
in :class:`SlackHealth` for the ``/healthz`` detail (method, error and time only: no channel,
no job, no text); so is a file upload's POST of its bytes to the upload URL (``files.upload``),
which slack_sdk sends outside its Web API methods. Callers use :func:`post` (and
:func:`open_dm`), which return a :class:`Refusal` instead of raising, so one failed post (the
sweep channel, say) never stops the next one (a collapse DM), and the caller knows why: a
refusal no later try can pass (:data:`PERMANENT_ERRORS`: the conversation gone or closed to
the bot, the token refused, the message itself refused) is dropped, not kept for the next
sweeps; a message refused for its size or its blocks is first sent once more as its text
alone, cut (:func:`post`); anything else (a 429 past its retries, a 5xx, a timeout) passes
and is kept by the caller. A 429's ``Retry-After`` longer than a call waits
(:data:`MAX_RETRY_AFTER_S`) is remembered per method: until it has passed, that method's
calls fail at once, unsent, as ``ratelimited`` (Slack would refuse them again), so a sweep's
retry a minute later leaves its replies kept for the sweep after it. A ``response_url``
answer is checked the same way (``bot.responder.Responder``).

A hung Web API (the connection accepted, no answer) costs each request
``[slack] api_timeout_seconds`` (slack_sdk's default was 30 s a call, and a sweep makes a
dozen calls in a row, each paced behind the last). Within a posting (``bot.breaker``: a
scheduled sweep's messages, a command's answer), after a request times out the next is let
through on half the bound; answered, the posting carries on (one slow call must not silence
the rest of a sweep); timed out too, every later call of that posting gives up at once,
unsent (``GaveUp``, counted as ``gave_up``): the callers keep what was not delivered, as for
any failure, and the scheduler's retry sends it.

A DM's channel is opened once per user (:func:`dm_channel`): the client remembers the id
``conversations.open`` gave (a user's DM with the bot keeps its id), so a sweep that DMs the
same owners every interval costs Slack their posts, not a ``conversations.open`` each
(Tier 3, rate limited per workspace). A call that fails naming a remembered DM channel
forgets it, and the next DM opens it again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from ssl import SSLContext
from typing import Any

import structlog
from aiohttp import ClientError
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.web.file_upload_v2_result import FileUploadV2Result

from bot.breaker import GaveUp, give_up, request_bound, tracked
from bot.slack_errors import CONTENT_ERRORS, RateLimitedUntil, Refusal, cut_message, slack_error
from bot.telemetry import Telemetry
from report.chunks import text_blocks

log = structlog.get_logger(__name__)

NETWORK_ERRORS = (ClientError, TimeoutError, OSError)
"""What slack_sdk's async client raises as is once its own retries are spent (a refused or
reset connection, a timeout): not a ``SlackClientError``."""

Respond = Callable[..., Awaitable[Any]]
RECENT = 10
"""Failures kept for ``/healthz``."""
UPLOAD = "files.upload"
"""How a file's bytes sent to the upload URL are named in the metrics and ``/healthz``."""
DM_CHANNELS_KEPT = 4096
"""Users whose DM channel id the client remembers (the oldest opened is forgotten first)."""


@dataclass
class SlackHealth:
    """Recent Slack failures, for ``/healthz`` (no secrets, no job detail)."""

    failures: int = 0
    recent: list[dict[str, str]] = field(default_factory=list)

    def record(self, surface: str, error: str, at: datetime) -> None:
        self.failures += 1
        self.recent = [*self.recent, {"call": surface, "error": error,
                                      "at": at.isoformat(timespec="seconds")}][-RECENT:]

    def summary(self) -> dict[str, Any]:
        return {"failures": self.failures, "recent": list(self.recent)}


MAX_RETRY_AFTER_S = 30.0
"""The longest ``Retry-After`` a call waits out (the client's own timeout): a 429 asking for
longer is not retried but fails at once, as ``ratelimited``, so a sweep's post never sleeps an
hour (slack_sdk's handler would, once per retry) and the scheduler's retry tries it later."""


def retry_after_s(value: str | None, now: datetime | None = None) -> float:
    """Seconds a ``Retry-After`` asks for: whole or decimal seconds, or an HTTP date (RFC
    9110 allows both; a proxy may send either); 1 s when absent or unreadable (slack_sdk's
    default), never negative."""
    text = (value or "").strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return 1.0
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else 1.0


def header_named(headers: Any, name: str) -> str | None:
    """The header ``name`` (any case) of a webhook's answer: one value, or the first."""
    for key, value in dict(headers or {}).items():
        if str(key).lower() == name:
            return str(value[0] if isinstance(value, list | tuple) and value else value)
    return None


def _retry_after_header(response: HttpResponse) -> str | None:
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            return values[0] if values else None
    return None


class BoundedRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 retry, waiting out at most :data:`MAX_RETRY_AFTER_S` and reading any
    ``Retry-After`` form (slack_sdk's ``int()`` raised ``ValueError`` on ``1.5`` or a date,
    which no caller expects: it crashed the scheduled sweep)."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None,
                               error: Exception | None = None) -> bool:
        return (response is not None and response.status_code == 429
                and retry_after_s(_retry_after_header(response)) <= MAX_RETRY_AFTER_S)

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        if response is None:  # as slack_sdk's: only a 429 is retried here
            raise error  # type: ignore[misc]
        state.next_attempt_requested = True
        await asyncio.sleep(retry_after_s(_retry_after_header(response)) + random.random())
        state.increment_current_attempt()


class CountingWebClient(AsyncWebClient):
    """``AsyncWebClient`` that logs, counts and remembers each failed call exactly once."""

    def __init__(self, *, telemetry: Telemetry, health: SlackHealth, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._telemetry = telemetry
        self.health = health
        self.dm_channels: dict[str, str] = {}
        """User id -> the id of the bot's DM with them, as ``conversations.open`` gave it."""
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        """What a ``Retry-After`` is counted on (the bot's clock: ``bot.app.Bot``)."""
        self._limited: dict[str, datetime] = {}
        """Method -> until when Slack's last 429 for it asked its calls to wait."""

    def bound(self, seconds: float) -> None:
        """Each request waits at most ``seconds`` for Slack (``[slack] api_timeout_seconds``)."""
        self.timeout = seconds

    @property  # type: ignore[override]
    def timeout(self) -> float:
        """The bound slack_sdk gives each request it sends (read per request, in the calling
        task): the probe's share of it after a timeout in this posting (``bot.breaker``)."""
        return request_bound(self._bound) or self._bound

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        # slack_sdk annotates an int, but hands it to aiohttp.ClientTimeout, which takes float.
        self._bound = float(seconds)

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        self._unless_given_up(api_method)
        # chat.postMessage is limited per channel (Slack's special tier), the rest per method.
        limit = api_method + "".join(f":{c}" for c in _channels(kwargs))
        self._unless_limited(api_method, limit)
        try:
            async with tracked(api_method):  # each request bounded by :attr:`timeout`
                return await super().api_call(api_method, **kwargs)
        except (SlackApiError, SlackClientError) as exc:
            self._failed(api_method, slack_error(exc))
            self._forget_dm(kwargs)
            self._remember_limit(limit, exc)
            raise
        except NETWORK_ERRORS as exc:  # counted as the others; the callers treat it so
            self._failed(api_method, type(exc).__name__)
            raise

    async def _upload_file(self, *, url: str, data: bytes, logger: logging.Logger,
                           timeout: int, proxy: str | None,  # noqa: ASYNC109 (slack_sdk's)
                           ssl: SSLContext | None) -> FileUploadV2Result:
        """``files_upload_v2``'s bytes, POSTed to the upload URL Slack gave, outside
        :meth:`api_call`: accounted and bounded as a Web API call is (its posting's breaker
        too); a refusal (not 200) is counted here, then raised by slack_sdk."""
        self._unless_given_up(UPLOAD)
        try:
            async with tracked(UPLOAD):
                result = await super()._upload_file(url=url, data=data, logger=logger,
                                                    timeout=timeout, proxy=proxy, ssl=ssl)
        except NETWORK_ERRORS as exc:
            self._failed(UPLOAD, type(exc).__name__)
            raise
        if result.status != 200:
            self._failed(UPLOAD, f"http_{result.status}")
        return result

    def _unless_limited(self, call: str, limit: str) -> None:
        """Raise :class:`RateLimitedUntil` (counted, not logged again) while Slack's last 429
        for ``limit`` (the method, and the channel it posts to) asks its calls to wait."""
        until = self._limited.get(limit)
        if until is None:
            return
        if self.clock() >= until:
            del self._limited[limit]
            return
        self._telemetry.slack_api_errors.labels(method=call, error="ratelimited").inc()
        raise RateLimitedUntil(f"{call} not sent: rate-limited until {until.isoformat()}")

    def _remember_limit(self, limit: str, exc: BaseException) -> None:
        """A 429 slack_sdk did not wait out (its ``Retry-After`` too long): its wait kept."""
        response = exc.response if isinstance(exc, SlackApiError) else None
        if response is None or response.status_code != 429:
            return
        wait = retry_after_s(header_named(response.headers, "retry-after"))
        self._limited[limit] = self.clock() + timedelta(seconds=wait)

    def _unless_given_up(self, call: str) -> None:
        """Raise :class:`GaveUp` (counted) when this call's posting gives its calls up."""
        if (scope := give_up()) is not None:
            self._telemetry.slack_api_errors.labels(method=call, error="gave_up").inc()
            raise GaveUp(f"{call} not sent: {scope.hung} timed out in this posting")

    def _failed(self, call: str, error: str) -> None:
        """A failed call, logged, counted and kept for ``/healthz`` once."""
        self._telemetry.slack_api_errors.labels(method=call, error=error).inc()
        self.health.record(call, error, datetime.now(UTC))
        log.error("slack call failed", method=call, error=error)

    def remember_dm(self, user: str, channel: str) -> None:
        """Keep ``user``'s DM channel id (at most :data:`DM_CHANNELS_KEPT` users)."""
        known = self.dm_channels
        known.pop(user, None)
        known[user] = channel
        while len(known) > DM_CHANNELS_KEPT:
            del known[next(iter(known))]

    def _forget_dm(self, kwargs: dict[str, Any]) -> None:
        """Forget the DM channel a failed call named (a closed or unknown DM opens afresh)."""
        if not self.dm_channels:
            return
        named = set(_channels(kwargs))
        for user in [u for u, c in self.dm_channels.items() if c in named]:
            del self.dm_channels[user]


def _channels(kwargs: dict[str, Any]) -> list[str]:
    """The channels a Web API call's arguments name (slack_sdk's ``json``/``params``/``data``)."""
    return sorted({str(part[key]) for part in (kwargs.get(k) for k in ("json", "params", "data"))
                   if isinstance(part, dict) for key in ("channel", "channel_id") if key in part})


async def post(client: AsyncWebClient, **kwargs: Any) -> dict[str, Any] | Refusal:
    """``chat.postMessage``: Slack's answer, or why it took no message (already logged and
    counted). A message refused as such (:data:`CONTENT_ERRORS`: too long, blocks Slack will
    not take) is sent once more as its text alone, cut and saying so: what Slack takes of it
    beats nothing, and the same message would only be refused again."""
    refused = await _post(client, dict(kwargs))
    if not isinstance(refused, Refusal) or refused.error not in CONTENT_ERRORS:
        return refused
    again = await _post(client, cut_message(kwargs, refused.error))
    return again if not isinstance(again, Refusal) else refused


async def _post(client: AsyncWebClient, kwargs: dict[str, Any]) -> dict[str, Any] | Refusal:
    if not kwargs.get("blocks"):
        # Text only: its verbatim sections are what Slack shows (top-level text is always
        # auto-linked: a job named with a URL would read as a link); the text notifies.
        kwargs.pop("blocks", None)
        if blocks := text_blocks(str(kwargs.get("text") or "")):
            kwargs["blocks"] = blocks
    try:
        response = await client.chat_postMessage(**kwargs)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:
        return Refusal(slack_error(exc))
    return dict(response.data) if isinstance(response.data, dict) else {}


async def open_dm(client: AsyncWebClient, user: str) -> str | Refusal:
    """The id of the bot's DM with ``user``: remembered by a :class:`CountingWebClient`, else
    ``conversations.open``'s; or why Slack refused (already logged and counted)."""
    counting = client if isinstance(client, CountingWebClient) else None
    if counting is not None and user in counting.dm_channels:
        return counting.dm_channels[user]
    try:
        opened = await client.conversations_open(users=user)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:
        return Refusal(slack_error(exc))
    channel = str(opened["channel"]["id"])
    if counting is not None:
        counting.remember_dm(user, channel)
    return channel


async def dm_channel(client: AsyncWebClient, user: str) -> str | None:
    """:func:`open_dm`, ``None`` when Slack refused (for callers that need no reason)."""
    opened = await open_dm(client, user)
    return None if isinstance(opened, Refusal) else opened


async def update(client: AsyncWebClient, **kwargs: Any) -> bool:
    """``chat.update``; False when Slack refused (already logged and counted)."""
    return await edit(client, **kwargs) == "edited"


GONE_FOR_EDITS = frozenset({
    "message_not_found", "cant_update_message", "edit_window_closed", "channel_not_found",
    "is_inactive",
})
"""``chat.update`` errors that mean this message will not take an edit, now or later. Any
other failure may pass by the next try (rate limits past the retries, ``internal_error``, a
5xx, a network error), but for one about the content (``msg_too_long``, ``invalid_blocks``),
which a new message would meet too: the edit is then made cut (:func:`edit`)."""


async def edit(client: AsyncWebClient, **kwargs: Any) -> str:
    """``chat.update``: ``"edited"``, ``"gone"`` (the message will not take it:
    :data:`GONE_FOR_EDITS`), ``"refused"`` (Slack will not take this edit, ever:
    ``bot.slack_errors.PERMANENT_ERRORS``) or ``"failed"`` (for now); refusals already logged
    and counted. An edit refused for its content is made once more as its text alone, cut
    (``bot.slack_errors.cut_message``), as :func:`post` does."""
    error = await _update(client, kwargs)
    if error in CONTENT_ERRORS:
        error = await _update(client, cut_message(kwargs, error)) and error
    if error is None:
        return "edited"
    if error in GONE_FOR_EDITS:
        return "gone"
    return "refused" if Refusal(error).permanent else "failed"


async def _update(client: AsyncWebClient, kwargs: dict[str, Any]) -> str | None:
    """``chat.update``; Slack's error code or the client error's name, None when edited."""
    try:
        await client.chat_update(**kwargs)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:
        return slack_error(exc)
    return None
