"""The App Home tab: the user's own jobs, their open collapse episodes and their snoozes.

Policy: Slack sends ``app_home_opened`` whenever someone opens the bot's Home tab; the bot
answers with ``views.publish`` for that user. "Own" goes through the one per-cluster owner
lookup (:func:`bot.owners.slack_owner`), exactly as ``/jobs mine`` does. The jobs come from the
current sweep (the cache when it is fresh, else a live sweep), as tables with arrays grouped; the
episodes are the alert records in Redis (``bot.alerts``): open ones, and snoozes still in
force. A Home view holds at most 100 blocks and each section 3,000 characters; cluster text is
escaped with :mod:`bot.messages`' one escape, whose block builders are used here. Without Redis
the view still shows the jobs and says episodes are unknown. A failed ``views.publish`` is
logged and counted once by the Web API client (:mod:`bot.delivery`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.alerts import SNOOZE, episode_name, job_uid
from bot.config import Config
from bot.messages import code, context, esc, grouped, section, sweep_header
from bot.owners import slack_owner
from bot.store import StoreUnavailable
from bot.sweep import SweepResult
from report.chunks import slack_messages
from report.models import JobReport
from report.render import render_tables

if TYPE_CHECKING:
    from bot.app import Bot

log = structlog.get_logger(__name__)

MAX_BLOCKS = 100
"""Slack's limit for a Home tab view."""


def register(app: AsyncApp, bot: Bot) -> None:
    async def on_home_opened(event: dict[str, Any]) -> None:
        # Bolt acknowledges events itself; the work is tracked like every other handler's.
        if event.get("tab", "home") == "home" and event.get("user"):
            bot.tasks.spawn(publish_home(bot, str(event["user"])), name="app home")

    app.event("app_home_opened")(on_home_opened)


def own_jobs(result: SweepResult, user: str, config: Config) -> list[JobReport]:
    return [j for j in result.report.jobs if slack_owner(config, j.cluster, j.user) == user]


def episode_lines(episodes: Sequence[dict[str, Any]], now: datetime) -> tuple[list[str],
                                                                             list[str]]:
    """(open collapse episodes, snoozes in force) as one line each."""
    opened, snoozed = [], []
    for doc in episodes:
        ref = code(f"{doc.get('cluster')}:{doc.get('job_id')}")
        if doc.get("state") == "open":
            # A Redis document is escaped like cluster text: it may be stale or edited.
            since = esc(str(doc.get("opened_at", ""))[11:16])
            opened.append(f"🚨 `{ref}` collapse since {since or '?'}Z, step "
                          f"{esc(str(doc.get('first_step', '?')))}: waiting for a button in "
                          "your DM")
        elif doc.get("action") == SNOOZE and doc.get("snoozed_until"):
            try:
                until = datetime.fromisoformat(str(doc["snoozed_until"]))
            except ValueError:
                continue  # not a time the bot wrote
            if until > now:
                snoozed.append(f"💤 `{ref}` snoozed until {until:%Y-%m-%d %H:%M}Z")
    return opened, snoozed


def home_view(result: SweepResult, user: str, config: Config, *, age_s: float | None,
              episodes: Sequence[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    """The Home tab for ``user``."""
    mine = own_jobs(result, user, config)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your jobs"}},
        context(esc(sweep_header(result, age_s=age_s))),
    ]
    if not mine:
        blocks.append(section("No jobs of yours in the current report (jobs are yours through "
                               "the `owners` mapping of the config)."))
    else:
        keys = {(j.cluster, j.job_id) for j in mine}
        report, details = grouped(result, lambda j: (j.cluster, j.job_id) in keys, grid=False)
        tables = render_tables(report, details, width=min(config.report.width, 80))
        for message in slack_messages(tables, max_blocks=MAX_BLOCKS):
            blocks.extend(message.blocks)
    blocks.append({"type": "header", "text": {"type": "plain_text",
                                              "text": "Collapse episodes and snoozes"}})
    if episodes is None:
        blocks.append(section("Episodes are unknown right now (the state store is down)."))
    else:
        opened, snoozed = episode_lines(episodes, now)
        blocks.append(section("\n".join(opened) or "No open collapse episodes."))
        blocks.append(section("\n".join(snoozed) or "Nothing snoozed."))
    if len(blocks) > MAX_BLOCKS:  # tables first to go: the episodes are what needs a human
        blocks = [*blocks[:2], section("(tables cut to fit the Home tab: use `/jobs mine`)"),
                  *blocks[-3:]]
    return {"type": "home", "blocks": blocks}


async def _episodes(bot: Bot, result: SweepResult,
                    jobs: Sequence[JobReport]) -> list[dict[str, Any]] | None:
    # A Kubernetes episode is keyed by the Job's uid too (bot.alerts), known from live facts.
    names = [episode_name(j.cluster, j.job_id, job_uid(result.job_facts(j.cluster, j.job_id)))
             for j in jobs]
    try:
        docs = [await bot.store.get_doc(name) for name in names]
    except StoreUnavailable as exc:
        log.warning("episodes unavailable for the Home tab", error=str(exc))
        return None
    return [d for d in docs if isinstance(d, dict)]


async def publish_home(bot: Bot, user: str) -> None:
    """Build and publish ``user``'s Home tab."""
    from bot.app import current_sweep  # bot.app registers this module

    config = bot.config.current()
    result, age = await current_sweep(bot)
    episodes = await _episodes(bot, result, own_jobs(result, user, config))
    view = await asyncio.to_thread(home_view, result, user, config, age_s=age,
                                   episodes=episodes, now=bot.clock())
    with contextlib.suppress(SlackApiError, SlackClientError):  # logged and counted once by
        await bot.client.views_publish(user_id=user, view=view)  # the client (bot.delivery)
