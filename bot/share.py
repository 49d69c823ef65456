"""The "Share to channel" button on ephemeral ``/job`` answers.

Policy: an ephemeral answer is seen by one person; the button posts the same job detail into
the channel the command was typed in, saying who shared it. The button's ``value`` is only a
job reference, parsed again (:func:`probes.ids.split_job_ref`) and looked up in the current
sweep (cached or live), never trusted as content. Cluster text is escaped for mrkdwn; the one
mention is the sharer, built here from the payload's user id. A failed post (the bot is not in
that channel, say) is told to the sharer ephemerally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.actions import ActionPress
from bot.commands import code_blocks, sweep_header
from bot.errors import UserError
from probes.errors import InvalidJobIdError
from probes.ids import split_job_ref
from report.chunks import escape_mrkdwn
from report.models import JobDetail
from report.render import render_job_detail

if TYPE_CHECKING:
    from bot.app import Bot

log = structlog.get_logger(__name__)

SHARE = "share_to_channel"


def share_actions(detail: JobDetail) -> dict[str, Any]:
    """The actions block with the Share button for one job."""
    ref = f"{detail.report.cluster}:{detail.report.job_id}"
    return {"type": "actions", "block_id": "share_actions", "elements": [{
        "type": "button", "action_id": SHARE, "value": ref[:2000],
        "text": {"type": "plain_text", "text": "Share to channel"}}]}


def register(app: AsyncApp, bot: Bot) -> None:
    async def on_share(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                       respond: Callable[..., Awaitable[Any]]) -> None:
        await ack()
        press = ActionPress.from_body(body)
        bot.tasks.spawn(share_job(bot, press, respond), name="share")

    app.action(SHARE)(on_share)


async def share_job(bot: Bot, press: ActionPress, respond: Callable[..., Awaitable[Any]]
                    ) -> None:
    """Post the job's detail into the channel the ephemeral answer was shown in."""
    from bot.app import current_sweep  # bot.app registers this module

    try:
        cluster, job_id = split_job_ref(press.value)
        if not press.channel_id:
            raise UserError("There is no channel to share into.")
        result, age = await current_sweep(bot)
        detail = result.find(cluster, job_id)
    except InvalidJobIdError:
        await respond(text="That button carries no valid job reference.",
                      response_type="ephemeral", replace_original=False)
        return
    except UserError as exc:
        await respond(text=f"⚠️ {exc}", response_type="ephemeral", replace_original=False)
        return
    width = bot.sweeper.config().report.width
    text = await asyncio.to_thread(render_job_detail, detail, width=width)
    head = f"Shared by <@{press.user_id}> · {escape_mrkdwn(sweep_header(result, age_s=age))}"
    blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": head[:2000]}]},
              *code_blocks(escape_mrkdwn(text))][:50]
    ref = escape_mrkdwn(f"{detail.report.cluster}:{detail.report.job_id}")
    try:
        await bot.client.chat_postMessage(channel=press.channel_id, blocks=blocks,
                                          text=f"{ref} {escape_mrkdwn(detail.report.name)}")
    except (SlackApiError, SlackClientError) as exc:
        log.error("share failed", channel=press.channel_id, error=str(exc))
        await respond(text=f"Could not post in this channel ({exc}); invite the bot first.",
                      response_type="ephemeral", replace_original=False)
        return
    await respond(text=f"Shared `{ref}` to the channel.", response_type="ephemeral",
                  replace_original=False)
