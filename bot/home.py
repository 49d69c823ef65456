"""The App Home tab: the user's own jobs, their open collapse episodes and their snoozes.

Policy: Slack sends ``app_home_opened`` whenever someone opens the bot's Home tab; the bot
answers with ``views.publish`` for that user. "Own" goes through the owners mapping
(``bot.actions.owner_of``), exactly as ``/jobs mine`` does. The jobs come from the current
sweep (the cache when it is fresh, else a live sweep), as tables with arrays grouped; the
episodes are the alert records in Redis (``bot.alerts``): open ones, and snoozes still in
force. A Home view holds at most 100 blocks and each section 3,000 characters; cluster text is
escaped for mrkdwn. Without Redis the view still shows the jobs and says episodes are unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.actions import owner_of
from bot.alerts import SNOOZE, episode_name
from bot.commands import sweep_header
from bot.config import Config
from bot.store import StoreUnavailable
from bot.sweep import SweepResult
from report.chunks import escape_mrkdwn, slack_messages
from report.grouping import group_report, pending_task_counts
from report.models import JobReport
from report.tables import render_tables

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
    return [j for j in result.report.jobs if owner_of(j.user, config) == user]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def episode_lines(episodes: Sequence[dict[str, Any]], now: datetime) -> tuple[list[str],
                                                                             list[str]]:
    """(open collapse episodes, snoozes in force) as one line each."""
    opened, snoozed = [], []
    for doc in episodes:
        ref = escape_mrkdwn(f"{doc.get('cluster')}:{doc.get('job_id')}")
        if doc.get("state") == "open":
            since = str(doc.get("opened_at", ""))[11:16]
            opened.append(f"🚨 `{ref}` collapse since {since or '?'}Z, step "
                          f"{doc.get('first_step', '?')}: waiting for a button in your DM")
        elif doc.get("action") == SNOOZE and doc.get("snoozed_until"):
            until = datetime.fromisoformat(str(doc["snoozed_until"]))
            if until > now:
                snoozed.append(f"💤 `{ref}` snoozed until {until:%Y-%m-%d %H:%M}Z")
    return opened, snoozed


def home_view(result: SweepResult, user: str, config: Config, *, age_s: float | None,
              episodes: Sequence[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    """The Home tab for ``user``."""
    mine = own_jobs(result, user, config)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your jobs"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": escape_mrkdwn(
            sweep_header(result, age_s=age_s))[:2000]}]},
    ]
    if not mine:
        blocks.append(_section("No jobs of yours in the current report (jobs are yours through "
                               "the `owners` mapping of the config)."))
    else:
        report = result.report.model_copy(update={"jobs": mine, "grid": []})
        keys = {(j.cluster, j.job_id) for j in mine}
        grouped, details = group_report(report, {k: d for k, d in result.details.items()
                                                 if k in keys},
                                        pending_tasks=pending_task_counts(result.facts))
        tables = render_tables(grouped, details, width=min(config.report.width, 80))
        for message in slack_messages(tables, max_blocks=MAX_BLOCKS):
            blocks.extend(message.blocks)
    blocks.append({"type": "header", "text": {"type": "plain_text",
                                              "text": "Collapse episodes and snoozes"}})
    if episodes is None:
        blocks.append(_section("Episodes are unknown right now (the state store is down)."))
    else:
        opened, snoozed = episode_lines(episodes, now)
        blocks.append(_section("\n".join(opened) or "No open collapse episodes."))
        blocks.append(_section("\n".join(snoozed) or "Nothing snoozed."))
    if len(blocks) > MAX_BLOCKS:  # tables first to go: the episodes are what needs a human
        blocks = [*blocks[:2], _section("(tables cut to fit the Home tab: use `/jobs mine`)"),
                  *blocks[-3:]]
    return {"type": "home", "blocks": blocks}


async def _episodes(bot: Bot, jobs: Sequence[JobReport]) -> list[dict[str, Any]] | None:
    try:
        docs = [await bot.store.get_doc(episode_name(j.cluster, j.job_id)) for j in jobs]
    except StoreUnavailable as exc:
        log.warning("episodes unavailable for the Home tab", error=str(exc))
        return None
    return [d for d in docs if isinstance(d, dict)]


async def publish_home(bot: Bot, user: str) -> None:
    """Build and publish ``user``'s Home tab."""
    from bot.app import current_sweep  # bot.app registers this module

    config = bot.sweeper.config()
    result, age = await current_sweep(bot)
    episodes = await _episodes(bot, own_jobs(result, user, config))
    view = await asyncio.to_thread(home_view, result, user, config, age_s=age,
                                   episodes=episodes, now=bot.clock())
    try:
        await bot.client.views_publish(user_id=user, view=view)
    except (SlackApiError, SlackClientError) as exc:
        log.error("views.publish failed", user=user, error=str(exc))
