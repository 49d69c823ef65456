"""Which of Slack's refusals a later try can pass, and which not: what a caller is told.

Policy: :class:`Refusal` carries Slack's error code (``not_in_channel``) or the client error's
class name (``TimeoutError``) from the one place a failure is seen (``bot.delivery``) to the
caller that decides what becomes of the message. :data:`PERMANENT_ERRORS` (the conversation
gone or closed to the bot, the token or the request refused, the message itself refused) are
dropped by the callers, logged once; everything else (rate limits past their retries, 5xx,
network errors, timeouts) passes and is kept for a later try. An error Slack adds that is not
listed passes: one post tried again too often costs less than one lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError

from report.chunks import FENCE, cut_text, text_blocks


def slack_error(exc: BaseException) -> str:
    """Slack's error code (``not_in_channel``) or the client error's class name."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or f"http_{exc.response.status_code}")
    if isinstance(exc, RateLimitedUntil):
        return "ratelimited"
    return type(exc).__name__


CONTENT_ERRORS = frozenset({
    "msg_too_long", "msg_blocks_too_long", "invalid_blocks", "invalid_blocks_format",
    "too_many_attachments", "no_text", "invalid_metadata_format", "invalid_metadata_schema",
    "metadata_too_large",
})
"""The message itself refused: the same message is refused again, wherever and whenever."""
GONE_ERRORS = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "messages_tab_disabled",
    "restricted_action", "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel", "restricted_action_non_threadable_channel",
    "team_access_not_granted", "ekm_access_denied", "user_not_found", "user_disabled",
    "cannot_dm_bot", "user_not_visible",
})
"""The conversation will not take the bot's messages (gone, archived, the bot not in it, a
DM closed to apps or with a deactivated user) until a person changes that."""
AUTH_ERRORS = frozenset({
    "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
    "no_permission", "missing_scope", "not_allowed_token_type", "access_denied",
    "org_login_required", "team_added_to_org", "two_factor_setup_required",
    "enterprise_is_restricted", "invalid_arguments", "invalid_arg_name", "invalid_array_arg",
    "invalid_charset", "invalid_form_data", "invalid_post_type", "missing_post_type",
    "method_deprecated", "deprecated_endpoint", "as_user_not_supported",
})
"""The token, its scopes or the request's form refused: no later try of this process passes
(the token is read once at start; a new one means a restart)."""
UNANSWERED = frozenset({"TimeoutError", "ServerTimeoutError", "ServerDisconnectedError"})
"""A request sent whose answer never came (not ``GaveUp``: that one was never sent): Slack may
have taken the post (``bot.landed``)."""
PERMANENT_ERRORS = CONTENT_ERRORS | GONE_ERRORS | AUTH_ERRORS
"""Refusals no later try of the same post can pass: logged once (by the client) and
dropped. Every other error (``ratelimited``, ``internal_error``, ``fatal_error``,
``service_unavailable``, ``request_timeout``, a 5xx, a network error, a timeout) passes."""


@dataclass(frozen=True)
class Refusal:
    """Why Slack took no message: its error code (``not_in_channel``) or the client error's
    class name (``TimeoutError``), already logged and counted (by
    ``bot.delivery.CountingWebClient``)."""

    error: str

    @property
    def permanent(self) -> bool:
        """Whether no later try of the same post can pass (:data:`PERMANENT_ERRORS`)."""
        return self.error in PERMANENT_ERRORS

    @property
    def unknown(self) -> bool:
        """Whether the post may have landed: sent, and its answer never came
        (:data:`UNANSWERED`)."""
        return self.error in UNANSWERED

    @property
    def gone(self) -> bool:
        """Whether the conversation takes none of the bot's posts (:data:`GONE_ERRORS`)."""
        return self.error in GONE_ERRORS


class RateLimitedUntil(SlackClientError):
    """A call not sent: Slack's last 429 for its method asked to wait longer than that."""


CUT_CHARS = 2900
"""How much of a refused message its cut form keeps (:func:`cut_message`): one section."""


def cut_message(kwargs: dict[str, Any], error: str) -> dict[str, Any]:
    """A ``chat.postMessage`` Slack refused for its content (:data:`CONTENT_ERRORS`) as what
    it will take: the text its blocks show (sections, their fields, contexts; no buttons or
    images), cut to one verbatim section saying why, under the same notification text."""
    shown = _shown(kwargs.get("blocks")) or str(kwargs.get("text") or "")
    body = cut_text(shown, CUT_CHARS, note="")
    if body == shown:
        body += f"\n(Slack refused the full message as {error}: sent as text)"
    else:
        if body.count(FENCE) % 2:  # cut inside a code block: closed, or the note reads as code
            body += f"\n{FENCE}"
        body += f"\n… (cut: Slack refused the full message as {error})"
    dropped = ("blocks", "text", *(("metadata",) if "metadata" in error else ()))
    kept = {key: value for key, value in kwargs.items() if key not in dropped}
    return {**kept, "text": cut_text(str(kwargs.get("text") or ""), 150),
            "blocks": text_blocks(body)}


def _shown(blocks: Any) -> str:
    """The mrkdwn of a message's text blocks, in order (already escaped when built)."""
    parts: list[str] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        items = [block.get("text"), *(block.get("fields") or []),
                 *(block.get("elements") or [] if block.get("type") == "context" else [])]
        parts.extend(str(i["text"]) for i in items if isinstance(i, dict) and i.get("text"))
    return "\n".join(parts)
