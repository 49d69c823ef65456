"""The shape of what Slack sends, checked before Bolt dispatches it.

Policy: a slash command, a button press (``block_actions``) or an event whose body lacks what
Slack always sends (the invoker, the ``response_url``, the pressed action and its id) or holds
a field of another type is refused with a 400 and a warning; nothing runs and nothing is
written. Bolt's own matchers index ``actions[0]`` and read ``event`` as a mapping, and the
handlers read the payload after their ``ack()``: such a body (validly signed, or a Socket Mode
envelope) was a 500 with a trace, or acked and then lost with a trace logged as an error.
Bodies of other kinds go to Bolt untouched (it answers 404 for what nothing listens to).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Action(_Part):
    action_id: str
    value: str = ""


class Who(_Part):
    id: str


class Where(_Part):
    id: str | None = None


class Container(_Part):
    channel_id: str | None = None
    message_ts: str | None = None


class Message(_Part):
    ts: str | None = None
    blocks: list[dict[str, Any]] | None = None


class BlockActions(_Part):
    """A ``block_actions`` payload as far as the button handlers read it."""

    actions: list[Action] = Field(min_length=1)
    user: Who
    response_url: str
    team: Where | None = None
    channel: Where | None = None
    container: Container | None = None
    message: Message | None = None


class SlashCommand(_Part):
    command: str
    user_id: str
    response_url: str
    text: str = ""


class Event(_Part):
    type: str


class HomeOpened(Event):
    """``app_home_opened``, the one event the bot listens to: whose Home tab to publish."""

    user: str
    tab: str | None = None


class EventCallback(_Part):
    event: Event


class HomeOpenedCallback(_Part):
    event: HomeOpened


def payload_problem(body: Any) -> str | None:
    """Why ``body`` (Bolt's parsed request body) is not what Slack sends, or ``None``."""
    if not isinstance(body, dict):
        return None  # Bolt reads no field of it: it answers for itself
    model: type[_Part] | None = None
    if "command" in body:
        model = SlashCommand
    elif body.get("type") == "block_actions":
        model = BlockActions
    elif body.get("type") == "event_callback":
        event = body.get("event")
        # Only the event listened to is read field by field; others need an object and a type.
        home = isinstance(event, dict) and event.get("type") == "app_home_opened"
        model = HomeOpenedCallback if home else EventCallback
    if model is None:
        return None
    try:
        model.model_validate(body)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors()})
        return f"malformed {model.__name__} payload: {', '.join(fields)}"
    return None


__all__ = ["BlockActions", "payload_problem"]
