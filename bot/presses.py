"""A button press as the handlers see it: the payload model, refusals, the checked press.

Policy: the payload is reduced to what the handlers read (``ActionPress``); the button value is
parsed (``parse_value``) only as an id to look up, never as authority. A press that is not
carried out raises :class:`Refused`, whose ``outcome`` is what the audit records.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import UserError
from bot.payloads import BlockActions, Container
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref
from probes.models import JobFacts
from report.models import JobDetail


class ActionPress(BaseModel):
    """One ``block_actions`` payload, reduced to what the handlers read."""

    model_config = ConfigDict(frozen=True)

    action_id: str
    value: str
    user_id: str
    team_id: str | None = None
    channel_id: str | None = None
    message_ts: str | None = None
    message_blocks: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ActionPress:
        """The press of a ``block_actions`` body (its shape checked before dispatch,
        ``bot.payloads``; checked again here, so a ``ValidationError`` if it is not)."""
        payload = BlockActions.model_validate(body)
        action = payload.actions[0]
        container = payload.container or Container()
        return cls(
            action_id=action.action_id,
            value=action.value,
            user_id=payload.user.id,
            team_id=payload.team.id if payload.team else None,
            channel_id=container.channel_id or (payload.channel.id if payload.channel else None),
            message_ts=container.message_ts or (payload.message.ts if payload.message else None),
            message_blocks=(payload.message.blocks if payload.message else None) or [],
        )


class Refused(UserError):
    """A press that is not carried out; ``outcome`` is what the audit records."""

    def __init__(self, outcome: str, reply: str, detail: str = "") -> None:
        super().__init__(reply)
        self.outcome = outcome
        self.detail = detail


class Checked(BaseModel):
    """A press that passed the checks: its episode and the job as the scheduler sees it now."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    cluster: str
    job_id: str
    episode: dict[str, Any]
    detail: JobDetail | None
    facts: JobFacts | None


def parse_value(value: str) -> tuple[str, str]:
    try:
        cluster, job_id = split_job_ref(value)
    except InvalidJobIdError as exc:
        raise Refused("rejected", "That button carries no valid job reference.",
                      "malformed button value") from exc
    if cluster is None:
        raise Refused("rejected", "That button carries no valid job reference.",
                      "button value lacks a cluster")
    return cluster, job_id
