"""The "Share to channel" button on ephemeral ``/job`` answers.

Policy: an ephemeral answer is seen by one person; the button posts the same job detail into
the channel the command was typed in, saying who shared it. The button's ``value`` is only a
job reference, parsed again (:func:`bot.presses.parse_value`) and looked up as ``/job`` looks
it up (:func:`bot.app.job_answer`: from a fresh cached sweep, the worker decodes it and sends
that one job; else that job only is asked for, never a sweep), never trusted as content: what
is posted is the bot's own record of that job, which the sharer could already read. The
messages are built by :func:`bot.messages.shared_job_messages` (its one escape; the one mention
is the sharer, from the signed payload's user id) and posted through :func:`bot.delivery.post`;
a refused post (the bot is not in that channel, say) is logged and counted once by the Web API
client and told to the sharer ephemerally.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.commands import JobQuery
from bot.delivery import post
from bot.errors import UserError
from bot.messages import SHARE, code, error_text, shared_job_messages, sweep_header
from bot.presses import ActionPress, parse_value

if TYPE_CHECKING:
    from bot.app import Bot

Respond = Callable[..., Awaitable[Any]]


def register(app: AsyncApp, bot: Bot) -> None:
    async def on_share(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                       respond: Respond) -> None:
        await ack()
        press = ActionPress.from_body(body)
        bot.tasks.spawn(share_job(bot, press, bot.responder(respond, SHARE)), name="share")

    app.action(SHARE)(on_share)


async def share_job(bot: Bot, press: ActionPress, respond: Respond) -> None:
    """Post the job's detail into the channel the ephemeral answer was shown in."""
    from bot.app import job_answer  # bot.app registers this module

    try:
        cluster, job_id = parse_value(press.value)
        if not press.channel_id:
            raise UserError("There is no channel to share into.")
        result, age, detail = await job_answer(bot, JobQuery(cluster=cluster, job_id=job_id))
    except UserError as exc:  # a Refused from parse_value is one too
        await respond(text=error_text(str(exc)), response_type="ephemeral",
                      replace_original=False)
        return
    width = bot.config.current().report.width
    messages = await asyncio.to_thread(shared_job_messages, detail, width=width,
                                       header=sweep_header(result, age_s=age),
                                       sharer=press.user_id)
    ref = code(f"{detail.report.cluster}:{detail.report.job_id}")
    for message in messages:
        if await post(bot.client, channel=press.channel_id, text=message.text,
                      blocks=message.blocks) is None:
            await respond(text=f"⚠️ Could not post `{ref}` in this channel; invite the bot "
                               "to it first (`/invite @jobtables`).",
                          response_type="ephemeral", replace_original=False)
            return
    await respond(text=f"Shared `{ref}` to the channel.", response_type="ephemeral",
                  replace_original=False)
