"""The "Share to channel" button on ephemeral ``/job`` answers.

Policy: an ephemeral answer is seen by one person; the button posts the same job detail into
the channel the command was typed in, saying who shared it. The button's ``value`` is only a
job reference, parsed again (:func:`bot.presses.parse_value`) and looked up as ``/job`` looks
it up (:func:`bot.slash_answers.job_answer`: from a fresh cached sweep, the worker decodes it
and sends that one job; else that job only is asked for, never a sweep), never trusted as
content: what is posted is the bot's own record of that job, which the sharer could already
read. The messages are built by :func:`bot.messages.shared_job_messages` (its one escape;
the one mention is the sharer, from the signed payload's user id) and posted through
:func:`bot.delivery.post`; a refused post (the bot is not in that channel, say) is logged and
counted once by the Web API client and told to the sharer ephemerally.

A job is shared into a channel once per :data:`SHARE_WINDOW_S` (a Redis lock, SET NX, on the
channel and job): a double click, or two people pressing the same answer, post it once, and
the other presser is told who just shared it. A share that posted nothing (no such job,
the bot not in the channel) does not hold the window. Without Redis a share goes ahead (no lock to
take; a lost share is worse than a rare twin).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp

from bot.commands import JobQuery
from bot.delivery import post
from bot.errors import UserError
from bot.messages import SHARE, code, error_text, shared_job_messages, sweep_header
from bot.presses import ActionPress, parse_value
from bot.slack_errors import Refusal
from bot.store import StoreUnavailable

if TYPE_CHECKING:
    from bot.app import Bot

Respond = Callable[..., Awaitable[Any]]

SHARE_WINDOW_S = 60.0
"""How long a job shared into a channel is not shared there again (presses that close
together are one share; a later one, with the job moved on, posts again)."""


def share_lock(channel: str, cluster: str, job_id: str) -> str:
    return f"share:{channel}:{cluster}:{job_id}"


def register(app: AsyncApp, bot: Bot) -> None:
    async def on_share(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                       respond: Respond) -> None:
        await ack()
        press = ActionPress.from_body(body)
        # Not run for Slack's retry of a press already run (bot.app).
        bot.spawn_once(body, lambda: share_job(bot, press, bot.responder(respond, SHARE)),
                       name="share")

    app.action(SHARE)(on_share)


async def share_job(bot: Bot, press: ActionPress, respond: Respond) -> None:
    """Post the job's detail into the channel the ephemeral answer was shown in."""
    try:
        cluster, job_id = parse_value(press.value)
        if not press.channel_id:
            raise UserError("There is no channel to share into.")
    except UserError as exc:  # a Refused from parse_value is one too
        await respond(text=error_text(str(exc)), response_type="ephemeral",
                      replace_original=False)
        return
    if not await _first_share(bot, press, respond, cluster, job_id):
        return
    refusal = await _post_share(bot, press, respond, cluster, job_id)
    if refusal is not None:
        # Nothing was posted (no such job, the bot not in the channel): the window is not
        # used up, and is freed before the presser is told, so the press the refusal asks
        # for ("invite the bot first") posts however soon it comes.
        await _forget_share(bot, share_lock(str(press.channel_id), cluster, job_id))
        await respond(text=refusal, response_type="ephemeral", replace_original=False)


async def _post_share(bot: Bot, press: ActionPress, respond: Respond, cluster: str,
                      job_id: str) -> str | None:
    """Post the job's detail into the press's channel and say so; else the refusal to tell
    (nothing posted)."""
    from bot.slash_answers import job_answer  # bot.app registers this module

    try:
        result, age, detail = await job_answer(bot, JobQuery(cluster=cluster, job_id=job_id))
    except UserError as exc:
        return error_text(str(exc))
    width = bot.config.current().report.width
    messages = await asyncio.to_thread(shared_job_messages, detail, width=width,
                                       header=sweep_header(result, age_s=age),
                                       sharer=press.user_id)
    ref = code(f"{detail.report.cluster}:{detail.report.job_id}")
    for message in messages:
        posted = await post(bot.client, channel=press.channel_id, text=message.text,
                            blocks=message.blocks)
        if isinstance(posted, Refusal):
            if posted.error in ("not_in_channel", "channel_not_found"):
                return (f"⚠️ Could not post `{ref}` in this channel; invite the bot to it "
                        "first (`/invite @jobtables`).")
            return (f"⚠️ Slack did not take `{ref}` in this channel "
                    f"({'it will not' if posted.permanent else 'try again shortly'}: "
                    f"`{code(posted.error)}`).")
    await respond(text=f"Shared `{ref}` to the channel.", response_type="ephemeral",
                  replace_original=False)
    return None


async def _forget_share(bot: Bot, lock: str) -> None:
    # Without Redis its TTL ends it: a press within the window is told it was shared.
    with contextlib.suppress(StoreUnavailable):
        await bot.store.release(lock)


async def _first_share(bot: Bot, press: ActionPress, respond: Respond, cluster: str,
                       job_id: str) -> bool:
    """Claim this channel's share of the job; False (the presser told) if it was just shared."""
    lock = share_lock(str(press.channel_id), cluster, job_id)
    try:
        if await bot.store.acquire(lock, {"by": press.user_id}, ttl_s=SHARE_WINDOW_S):
            return True
        holder = await bot.store.holder(lock) or {}
    except StoreUnavailable:
        return True
    by = str(holder.get("by") or "")
    who = f" by <@{by}>" if by.isalnum() else ""  # only a Slack user id is made a mention
    await respond(text=f"`{code(f'{cluster}:{job_id}')}` was shared to this channel{who} "
                       "less than a minute ago; nothing posted.",
                  response_type="ephemeral", replace_original=False)
    return False
