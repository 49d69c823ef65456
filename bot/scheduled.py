"""The scheduled sweep post: one sweep per interval, claimed by one replica, told to Slack.

Policy: the replicas claim each interval in Redis (a lease), so one of them sweeps and posts
it; with Redis down each falls back to its own role. A sweep's steps (follow-ups, the
period's parent and thread (``bot.digest``), collapse alerts, job-end DMs (``bot.notify``),
the deep-probe offers, cancel reconciliation) are independent: a failed channel post never
stops the alerts. The sweep's thread news is one reply (its collapse alerts, follow-ups and
changes, each job told once in it: ``bot.digest``), which the sweep's retry sends again when
Slack refused it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from bot import deep_probe
from bot.breaker import posting
from bot.config import Config
from bot.delivery import CountingWebClient
from bot.messages import collapse_line, config_refused_line
from bot.owners import slack_owner
from bot.refusals import refusal_news
from bot.scheduler import Scheduler
from bot.shared_sweep import holding
from bot.slash_answers import live_sweep
from bot.store import StoreUnavailable
from bot.sweep_result import SweepResult

if TYPE_CHECKING:
    from bot.app import Bot


log = structlog.get_logger(__name__)

UNTOLD_KEPT = 200
"""Collapse lines kept for the next thread reply by a replica sweeping alone (Redis down, no
thread of its own yet): the newest, should the outage last for days."""


async def scheduled_sweep(bot: Bot, interval: int, *, retry: bool = False) -> bool:
    """Interval ``interval``'s sweep: collapse DMs (first: the time-critical messages),
    follow-ups, the day's parent and thread (the alerts told in it), job-end DMs, deep
    probes, reconcile. False when it should be
    tried again soon (``bot.scheduler``; ``retry``: this is that try): a cluster could not be
    read, Redis could not serve the history, or Slack refused a thread reply, the parent's
    edit, a collapse alert, the alerts' thread reply or a job-end DM.

    Each step runs whatever happened to the one before: Slack refusing the channel post (bot
    not invited, rate-limited, message too long) must not silence a collapse alert. A hung
    Web API costs the sweep about one request's bound, not one per message: once a request
    timed out and the probe after it too, the sweep's other messages give up unsent
    (``bot.delivery.posting``) and its retry sends them; one slow call alone gives up nothing.
    """
    config = bot.config.current()
    async with holding(bot.store, config, bot.replica):  # /jobs elsewhere answers from it
        result = await live_sweep(bot)
    config = bot.config.current()
    if isinstance(bot.client, CountingWebClient):
        bot.client.bound(config.slack.api_timeout_seconds)  # re-read with the config
    with posting():
        unsent = await _tell_sweep(bot, result, config, interval, retry=retry)
    log.info("scheduled sweep done", interval=interval, jobs=len(result.report.jobs),
             fallback=bot.lease.fallback(interval), retry=retry)
    unread = [c.name for c in result.report.clusters if c.status == "unreachable"]
    return not (unread or result.degraded or unsent)


async def _tell_sweep(bot: Bot, result: SweepResult, config: Config, interval: int, *,
                      retry: bool) -> bool:
    """The sweep's messages, in :func:`scheduled_sweep`'s order; True when some were not
    delivered (kept for the retry)."""
    details = list(result.details.values())
    # Claimed without the lock by a replica that never saw who leads: alerts only, so an
    # outage neither silences a collapse nor doubles the channel thread (bot.lease).
    alone = bot.lease.fallback(interval) == "alone"
    # The collapse alerts first: they are the time-critical messages, and the period's full
    # tables (dozens of paced posts at thousands of jobs) must not hold them back a minute.
    told: list[str] = []
    alerted: set[tuple[str, str]] = set()
    for ref in await bot.alerter.process(details, config, facts=result.facts):
        cluster, _, job_id = ref.partition(":")
        job = result.details[(cluster, job_id)].report
        alerted.add((cluster, job_id))
        told.append(collapse_line(ref, job.user, name=job.name, by_dm=ref in bot.alerter.by_dm,
                                  mapped=slack_owner(config, cluster, job.user) is not None))
    if alone:  # no thread to tell them in yet: the next one this replica posts does
        bot.untold.extend(told)
        bot.untold = bot.untold[-UNTOLD_KEPT:]
        return bool(bot.alerter.undelivered)
    told, bot.untold = [*bot.untold, *told], []
    refused = await refusal_news(bot.config, bot.store)  # an edit refused
    if refused is not None:
        told.append(config_refused_line(refused))
    lines = await bot.followups.process(result, config)
    # One reply for the sweep: its alerts, follow-ups and changes (a job's own line standing
    # for its change bullet); a reply Slack refused is the digest's to send again.
    changes = await bot.digest.publish(result, config, [*told, *lines], retry=retry,
                                       interval=interval, told=alerted | bot.followups.told)
    await bot.notifier.process(changes, result, config, retry=retry)  # job-end DMs
    await deep_probe.after_sweep(bot, result, config)  # offer / auto-run, once per run
    await bot.actions.reconcile()
    return bool(bot.alerter.undelivered or bot.digest.undelivered or bot.notifier.undelivered)


async def claim_interval(bot: Bot, interval: int, ttl_s: float) -> bool:
    """The tick lock; while Redis is unreachable, the fallback of ``bot.lease`` decides.

    True means: run this interval's scheduled sweep (degraded, if ``bot.lease`` says so).
    """
    # What this replica told during an outage, written back before anyone reads it.
    await bot.digest.flush()
    await bot.alerter.flush()
    try:
        won = await bot.store.claim_tick(interval, ttl_s=ttl_s, owner=bot.replica)
    except StoreUnavailable as exc:
        bot.telemetry.store_errors.inc()
        role = bot.lease.unreachable(interval)
        log.warning("tick lock unavailable", interval=interval, fallback=role, error=str(exc))
        return role != "follow"
    bot.lease.decided(interval, won)
    if not won:
        bot.untold.clear()  # another replica leads: its thread is the channel's now
    return won


def make_scheduler(
    bot: Bot,
    *,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Scheduler:
    """Scheduled sweeps every ``slack.sweep_every_minutes`` (re-read with the config)."""

    async def claim(interval: int, ttl_s: float) -> bool:
        return await claim_interval(bot, interval, ttl_s)

    async def run(interval: int, retry: bool) -> bool:
        return await scheduled_sweep(bot, interval, retry=retry)

    return Scheduler(
        every_s=lambda: bot.config.current().slack.sweep_every_minutes * 60,
        claim=claim, run=run, clock=clock or bot.clock, sleep=sleep,
    )
