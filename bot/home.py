"""The App Home tab: the user's own jobs, their open collapse episodes and their snoozes.

Policy: Slack sends ``app_home_opened`` whenever someone opens the bot's Home tab; the bot
answers with ``views.publish`` for that user. "Own" goes through the one per-cluster owner
lookup (:func:`bot.owners.slack_owner`), exactly as ``/jobs mine`` does. The jobs come from the
current sweep (the cache when it is fresh, else a live sweep), as tables with arrays grouped,
rendered off the loop (for a big cached sweep in the worker process, ``bot.cached.apply``); the
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
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.alerts import SNOOZE, episode_name, job_uid
from bot.cluster_names import remembered, renames
from bot.config import Config
from bot.delivery import NETWORK_ERRORS
from bot.messages import code, context, esc, grouped, section, sweep_header
from bot.owners import slack_owner
from bot.store import StoreUnavailable
from bot.sweep_result import SweepResult
from report.chunks import escape_mrkdwn, slack_messages
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


@dataclass(frozen=True)
class HomeJobs:
    """The jobs part of a Home tab: the user's jobs (for their episodes) and their tables."""

    refs: list[tuple[str, str, str | None]]
    """(cluster, job id, Kubernetes uid or None) of each of the user's jobs."""
    blocks: list[dict[str, Any]]


def home_jobs(result: SweepResult, user: str, config: Config) -> HomeJobs:
    """``user``'s jobs as Home tab blocks: the CPU part, run off the loop (``bot.cached``:
    in the worker process, from the cache's text, for a big sweep)."""
    mine = own_jobs(result, user, config)
    refs = [(j.cluster, j.job_id, job_uid(result.job_facts(j.cluster, j.job_id))) for j in mine]
    if not mine:
        return HomeJobs(refs, [section("No jobs of yours in the current report (jobs are yours "
                                       "through the `owners` mapping of the config).")])
    keys = {(j.cluster, j.job_id) for j in mine}
    report, details = grouped(result, lambda j: (j.cluster, j.job_id) in keys, grid=False)
    tables = render_tables(report, details, width=min(config.report.width, 80))
    blocks: list[dict[str, Any]] = []
    for message in slack_messages(tables, max_blocks=MAX_BLOCKS):
        blocks.extend(message.blocks)
    return HomeJobs(refs, blocks)


def home_view(result: SweepResult, user: str, config: Config, *, age_s: float | None,
              episodes: Sequence[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    """The Home tab for ``user``."""
    return assemble_view(result, home_jobs(result, user, config), age_s=age_s,
                         episodes=episodes, now=now)


def assemble_view(head: SweepResult, jobs: HomeJobs, *, age_s: float | None,
                  episodes: Sequence[dict[str, Any]] | None, now: datetime) -> dict[str, Any]:
    """The Home tab from its jobs' blocks and the episodes (``head``: the sweep's header)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your jobs"}},
        context(escape_mrkdwn(sweep_header(head, age_s=age_s))),
        *jobs.blocks,
    ]
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


async def _episodes(bot: Bot, refs: Sequence[tuple[str, str, str | None]]
                    ) -> list[dict[str, Any]] | None:
    # A Kubernetes episode is keyed by the Job's uid too (bot.alerts), known from live facts.
    # One opened before its cluster was renamed in the config goes on under the old name
    # (bot.cluster_names); it is shown under the name /job takes now.
    try:
        renamed = renames(await remembered(bot.store), bot.config.current())
        docs = []
        for cluster, job_id, uid in refs:
            olds = [old for old, new in renamed.items() if new == cluster]
            for name in (cluster, *olds):
                doc = await bot.store.get_doc(episode_name(name, job_id, uid))
                if isinstance(doc, dict):
                    docs.append({**doc, "cluster": cluster})
                    break
    except StoreUnavailable as exc:
        log.warning("episodes unavailable for the Home tab", error=str(exc))
        return None
    return docs


async def publish_home(bot: Bot, user: str) -> None:
    """Build and publish ``user``'s Home tab: from the cache's document when it is fresh
    (its jobs rendered in the worker: the parent never decodes a big sweep), else live."""
    from bot.slash_answers import live_sweep  # bot.app registers this module

    config = bot.config.current()
    fresh = await bot.cache.fresh(config.slack.cache_seconds)
    if fresh is not None:
        doc, age = fresh
        head = doc.head
        jobs = await bot.cache.apply(doc, home_jobs, user, config)
    else:
        head, age = await live_sweep(bot), None
        jobs = await asyncio.to_thread(home_jobs, head, user, config)
    episodes = await _episodes(bot, jobs.refs)
    view = assemble_view(head, jobs, age_s=age, episodes=episodes, now=bot.clock())
    # Logged and counted once by the client (bot.delivery); a hung API times out.
    with contextlib.suppress(SlackApiError, SlackClientError, *NETWORK_ERRORS):
        await bot.client.views_publish(user_id=user, view=view)
