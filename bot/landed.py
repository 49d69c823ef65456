"""Whether a kept post landed after all: a message metadata key, looked for before a resend.

Policy: a ``chat.postMessage`` that timed out on the client (or lost its connection after
sending) may have landed: Slack took it, its answer never came. The digest's change replies
and the job-end DMs are kept and sent again (``bot.digest_posting``, ``bot.notify``), which
showed such a post twice. So each of them carries a key in its message metadata
(:func:`tagged`: the content and when it was first tried, so the same text told again later
is another key), and before a kept one is sent again its conversation is read for that key
(:func:`landed`): found, the post counts as delivered, not sent. Reading needs a history
scope (``channels:history``, ``groups:history``, ``im:history``), which the bot's manifest
does not ask for (it reads no conversation otherwise): without it the lookup is refused, the
post is sent again as before (a duplicate over a lost ending), and this client stops asking.
A ``response_url`` answer (``/jobs``) has no such check: it is ephemeral, so no API lists it,
and Slack gives it no id or ts to look for (``bot.responder.Responder``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.delivery import NETWORK_ERRORS
from bot.slack_errors import AUTH_ERRORS, slack_error

log = structlog.get_logger(__name__)

EVENT_TYPE = "jobtables_post"
"""The metadata event type the bot's keyed posts carry."""
LOOKED_AT = 200
"""How many of a conversation's latest messages a lookup reads (one page)."""


def post_key(text: str, blocks: Any, first_tried: datetime) -> str:
    """The key of one post: its content and when it was first tried."""
    body = json.dumps([text, blocks or [], first_tried.isoformat()], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


def tagged(key: str) -> dict[str, Any]:
    """The ``metadata`` argument a keyed post carries."""
    return {"event_type": EVENT_TYPE, "event_payload": {"key": key}}


_REFUSED: WeakKeyDictionary[AsyncWebClient, str] = WeakKeyDictionary()
"""Clients whose token was refused a conversation's history (asked no more), and why."""


async def landed(client: AsyncWebClient, channel: str, key: str, *,
                 thread_ts: str | None = None) -> str | None:
    """The ts of the post keyed ``key`` in ``channel`` (among the thread ``thread_ts``'s
    replies, or its latest messages): ``""`` when it is not there, None when Slack could not
    say (no history scope, an error); either way the caller sends it (again)."""
    if client in _REFUSED:
        return None
    args: dict[str, Any] = {"channel": channel, "limit": LOOKED_AT, "include_all_metadata": True}
    try:
        if thread_ts:
            answer = await client.conversations_replies(ts=thread_ts, **args)
        else:
            answer = await client.conversations_history(**args)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:
        error = slack_error(exc)
        if error in AUTH_ERRORS:  # missing_scope: no history scope granted (the default)
            _REFUSED[client] = error
            log.info("kept posts are sent again unchecked: conversations cannot be read",
                     error=error)
        return None
    for message in answer.get("messages") or []:
        meta = message.get("metadata") if isinstance(message, dict) else None
        if isinstance(meta, dict) and meta.get("event_type") == EVENT_TYPE \
                and (meta.get("event_payload") or {}).get("key") == key:
            return str(message.get("ts") or "") or None
    return ""
