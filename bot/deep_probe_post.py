"""The deep probe's messages and Redis documents: posting, binding, remembering a run.

Policy (``bot.deep_probe``): a posted offer is bound to its run (``offer_key``), a posted KILL
verdict opens an episode of its own so its buttons act as a collapse alert's; a run is
remembered (``doc:deep_probe:{cluster}:{job}``) so no sweep, restart or replica handles it
twice, an array run once for its first task (``doc:deep_probe_run:{cluster}:{array}``); a
verdict with buttons asked from an ephemeral answer goes to the presser's DM. Redis being
unavailable is logged and degrades (an unbound offer, a run offered once this sweep); a Slack
failure is logged and reported as not delivered. A job is probed once at a time
(:func:`one_at_a_time`: a Redis lock across replicas, ``Bot.probing`` within one).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.alerts import episode_name, message_key
from bot.config import Config
from bot.deep_probe_blocks import (
    _has_buttons,
    _summary,
    offer_blocks,
    offers_blocks,
    offers_cancel,
    verdict_blocks,
)
from bot.delivery import NETWORK_ERRORS, dm_channel
from bot.messages import DEEP_PROBE
from bot.owners import slack_owner
from bot.slack_errors import Refusal, slack_error
from bot.store import StoreUnavailable
from probes.ids import scheduler_job
from report.chunks import mrkdwn_object
from report.models import JobDetail, JobReport

if TYPE_CHECKING:
    from bot.app import Bot

log = structlog.get_logger("bot.deep_probe")  # the logger these records had before the split

Respond = Callable[..., Awaitable[Any]]


def memory_name(cluster: str, job_id: str) -> str:
    return f"deep_probe:{cluster}:{job_id}"


async def _post(bot: Bot, channel: str, detail: JobDetail, config: Config,
                thread_ts: str | None = None, *,
                tasks: Sequence[str] = ()) -> dict[str, Any] | Refusal:
    job = detail.report
    text = _summary(detail)
    blocks = verdict_blocks(detail, config) if job.deep_probe else offer_blocks(detail, tasks)
    try:
        posted = await bot.client.chat_postMessage(channel=channel, text=text, blocks=blocks,
                                                   thread_ts=thread_ts)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:  # a hung API times out
        log.error("deep-probe message failed", ref=f"{job.cluster}:{job.job_id}",
                  error=slack_error(exc))
        return Refusal(slack_error(exc))
    data = dict(posted.data) if isinstance(posted.data, dict) else {}
    if job.deep_probe is None:
        await _bind_offer(bot, config, detail, str(data.get("channel") or channel),
                          str(data.get("ts") or ""))
    if job.deep_probe is not None and job.deep_probe.verdict == "KILL":
        await _open_episode(bot, config, detail, str(data.get("channel") or channel),
                            str(data.get("ts") or ""), can_cancel=offers_cancel(blocks))
    return data


def offer_key(channel: str, ts: str, ref: str | None = None) -> str:
    """The index from a posted offer (channel, ts) to the run it offers to probe; with
    ``ref`` (``cluster:job``), one run of a batched offer (the message's own key then marks
    it batched: a value naming none of its runs finds no run). Not an alert's
    ``message_key``: an offer has no episode, so its message takes no other button."""
    return f"deep_probe_offer:{channel}:{ts}" + (f":{ref}" if ref else "")


async def _bind_offer(bot: Bot, config: Config, detail: JobDetail, channel: str,
                      ts: str, *, batched: bool = False) -> None:
    if not (channel and ts):
        return
    job = detail.report
    # The run's instance too (a Kubernetes uid, a SLURM submit time): a press once the id
    # names a later job is refused as stale (``_another_instance``), as on an alert.
    uid, submitted = detail.instance
    ref = f"{job.cluster}:{job.job_id}" if batched else None
    try:
        await bot.store.put_doc(offer_key(channel, ts, ref),
                                {"cluster": job.cluster, "job_id": job.job_id,
                                 "uid": uid, "submitted": submitted, "job_name": job.name,
                                 "user": job.user},
                                ttl_s=config.redis.expire_hours * 3600)
    except StoreUnavailable as exc:
        log.warning("deep-probe offer not bound to its run", error=str(exc))


async def _open_episode(bot: Bot, config: Config, detail: JobDetail, channel: str,
                        ts: str, *, can_cancel: bool) -> None:
    """A KILL verdict's buttons act like a collapse alert's: they are bound to this message,
    through an episode of its own (one per verdict message).

    The cancel press is checked against the stored episode (cluster, job id, uid, message,
    whether the message offered Cancel), never against the button value alone
    (``bot.actions``).
    """
    job = detail.report
    # The job instance read (a Kubernetes uid, a SLURM submit time): a press after the job
    # was re-created, or its id given to a later job, is refused as stale (bot.actions).
    uid, submitted = detail.instance
    # Its own key, never the collapse alerter's: a verdict shown to whoever pressed must not
    # read as the owner's collapse alert already sent (which would then never be DMed).
    name = f"{episode_name(job.cluster, job.job_id, uid)}:deep-probe:{ts}"
    record = {"cluster": job.cluster, "job_id": job.job_id, "uid": uid,
              "submitted": submitted, "name": name, "job_name": job.name, "user": job.user,
              "state": "open", "kind": "deep-probe", "channel": channel, "ts": ts,
              "can_cancel": can_cancel, "last_step": job.step or 0,
              "deep_probe": job.deep_probe.model_dump(mode="json") if job.deep_probe else None,
              "at": bot.clock().isoformat()}
    ttl = config.redis.expire_hours * 3600
    try:
        await bot.store.put_doc(name, record, ttl_s=ttl)
        if channel and ts:
            await bot.store.put_doc(message_key(channel, ts), {"episode": name}, ttl_s=ttl)
    except StoreUnavailable as exc:
        log.warning("deep-probe episode not saved; its buttons will be refused", error=str(exc))


async def _answer_ephemeral(bot: Bot, config: Config, detail: JobDetail, user_id: str,
                            respond: Respond) -> None:
    blocks = verdict_blocks(detail, config)
    if _has_buttons(blocks) and user_id:
        channel = await dm_channel(bot.client, user_id)
        if channel is None:
            log.error("deep-probe DM failed", user=user_id)
        posted = await _post(bot, channel, detail, config) if channel is not None else None
        if isinstance(posted, dict):
            await respond(text=f"{_summary(detail)}. The verdict and its buttons are in your DM "
                               "with the bot.",
                          response_type="ephemeral", replace_original=False)
            return
        # No DM: show the verdict without buttons that no stored episode could honour.
        blocks = _without_buttons(blocks, "The verdict could not be sent to your DM, so it "
                                  "has no buttons here; press Deep-probe on a posted message "
                                  "to act on it.")
    await respond(text=_summary(detail), blocks=blocks, response_type="ephemeral",
                  replace_original=False)


async def _tell_unposted(config: Config, detail: JobDetail, respond: Respond) -> None:
    """A pressed probe's verdict Slack did not post in the thread (refused, or no answer):
    the presser, who waited for it, sees it here instead, ephemeral and without buttons (no
    episode is stored for a message that was never posted)."""
    note = ("The verdict could not be posted in this thread (Slack refused it or did not "
            "answer; the failure is logged), so only you see it, with no buttons. Press "
            "Deep-probe again to post it.")
    await respond(text=f"{_summary(detail)}. It could not be posted in the thread.",
                  blocks=_without_buttons(verdict_blocks(detail, config), note),
                  response_type="ephemeral", replace_original=False)


def _without_buttons(blocks: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    return [*(block for block in blocks if block.get("type") != "actions"),
            {"type": "context", "elements": [mrkdwn_object(note)]}]


async def _remember(bot: Bot, config: Config, detail: JobDetail, *, by: str,
                    only_new: bool = False) -> bool:
    job = detail.report
    doc = {"cluster": job.cluster, "job_id": job.job_id, "by": by,
           "at": bot.clock().isoformat(),
           "deep_probe": job.deep_probe.model_dump(mode="json") if job.deep_probe else None}
    try:
        return await bot.store.put_doc(memory_name(job.cluster, job.job_id), doc,
                                       ttl_s=config.redis.expire_hours * 3600, only_new=only_new)
    except StoreUnavailable as exc:
        log.warning("deep-probe verdict not remembered", error=str(exc))
        return not only_new


async def _known_as(bot: Bot, config: Config, job: JobReport,
                    renamed: Mapping[str, str]) -> bool:
    """Whether the run is remembered under an old name of its cluster (``renamed``: old ->
    new, :mod:`bot.cluster_names`); if so it is remembered under the new one too."""
    for old, new in renamed.items():
        if new != job.cluster:
            continue
        try:
            doc = await bot.store.get_doc(memory_name(old, job.job_id))
            if isinstance(doc, dict):
                await bot.store.put_doc(memory_name(job.cluster, job.job_id),
                                        {**doc, "cluster": job.cluster},
                                        ttl_s=config.redis.expire_hours * 3600,
                                        only_new=True)  # never over a newer verdict
                return True
        except StoreUnavailable as exc:
            log.warning("deep-probe memory under the old name unread", error=str(exc))
    return False


async def _forget(bot: Bot, cluster: str, job_id: str) -> None:
    try:
        await bot.store.delete_doc(memory_name(cluster, job_id))
    except StoreUnavailable as exc:
        log.warning("deep-probe claim not released", error=str(exc))


def _task_order(job_id: str) -> tuple[str, int, str]:
    """Sorts an array's tasks by number (``1056_2`` before ``1056_10``)."""
    task = job_id.partition("_")[2]
    return scheduler_job(job_id), int(task) if task.isdigit() else -1, job_id


async def _new_run(bot: Bot, config: Config, cluster: str, job_id: str,
                   offered: set[tuple[str, str]]) -> bool:
    """Whether ``job_id``'s run gets an offer now. An array task is one cell of a run in
    waves: the run is offered once, for its first task (the later tasks of this sweep and of
    later waves are not: one DM per run, not one per task), claimed in Redis so that no
    later sweep, restart or replica offers it again. Any other job is its own run."""
    run = scheduler_job(job_id)
    if run == job_id:
        return True
    if (cluster, run) in offered:
        return False
    offered.add((cluster, run))
    try:
        return await bot.store.put_doc(f"deep_probe_run:{cluster}:{run}", {"first": job_id},
                                       ttl_s=config.redis.expire_hours * 3600, only_new=True)
    except StoreUnavailable as exc:
        log.warning("deep-probe run claim unavailable; offered once this sweep", error=str(exc))
        return True


async def _forget_run(bot: Bot, cluster: str, job_id: str) -> None:
    """An array run's claim released (its first task's auto-probe failed): retried."""
    if scheduler_job(job_id) != job_id:
        try:
            await bot.store.delete_doc(f"deep_probe_run:{cluster}:{scheduler_job(job_id)}")
        except StoreUnavailable as exc:
            log.warning("deep-probe run claim not released", error=str(exc))


async def _offer(bot: Bot, config: Config, shown: JobDetail, user: str | None,
                 tasks: Sequence[str]) -> bool | Refusal:
    """Post the offer (or auto verdict) to the owner's DM (``user``: the sweep's owner of the
    run), else (none, or the DM refused it) the channel: True when posted, False with
    nowhere to post, else why the last place refused it."""
    owner = slack_owner(config, shown.report.cluster, user)
    told: bool | Refusal = False
    if owner:
        dm = await dm_channel(bot.client, owner)
        if dm is None:
            log.error("deep-probe DM failed", owner=owner)
        else:
            told = _told(await _post(bot, dm, shown, config, tasks=tasks))
    # A DM that timed out may have landed: not sent to the channel as well.
    if told is not True and config.slack.channel and not (
            isinstance(told, Refusal) and told.unknown):
        told = _told(await _post(bot, config.slack.channel, shown, config, tasks=tasks))
    return told


def _told(posted: dict[str, Any] | Refusal) -> bool | Refusal:
    return posted if isinstance(posted, Refusal) else True


def refused_for_good(told: bool | Refusal) -> bool:
    """Whether an offer's (or auto verdict's) post met a refusal no later sweep passes: it is
    not offered again (``bot.deep_probe.after_sweep``), where a passing one is."""
    return isinstance(told, Refusal) and told.permanent


Offer = tuple[JobDetail, str | None, Sequence[str]]
"""A run to offer the deep probe for: its row, its owner (cluster user), its array's tasks."""


async def _offers(bot: Bot, config: Config, offers: Sequence[Offer]
                  ) -> tuple[set[str], set[str]]:
    """A sweep's offers, one message per destination (the owner's DM, else the channel), as
    an owner's collapses are one DM: a single run's offer reads as before; several are one
    message (split only past Slack's limits), each run's button bound to that run. Returns
    the runs (``cluster:job``) whose offer Slack took, and those whose offer it refused for
    good (:func:`refused_for_good`)."""
    groups: dict[str | None, list[Offer]] = {}
    for offer in offers:
        detail, user, _ = offer
        groups.setdefault(slack_owner(config, detail.report.cluster, user), []).append(offer)
    delivered: set[str] = set()
    dropped: set[str] = set()
    for owner, group in groups.items():
        refs = [f"{d.report.cluster}:{d.report.job_id}" for d, _, _ in group]
        if len(group) == 1:
            detail, user, tasks = group[0]
            told = await _offer(bot, config, detail, user, tasks)
            (delivered if told is True else dropped if refused_for_good(told) else set()
             ).update(refs)
            continue
        channel = await dm_channel(bot.client, owner) if owner else None
        channel = channel or config.slack.channel
        if not channel:
            continue
        at = 0
        for blocks in offers_blocks([(d, tasks) for d, _, tasks in group]):
            shown = group[at:at + sum(1 for b in blocks if b["type"] == "actions")]
            at += len(shown)
            told = await _post_batch(bot, config, channel, [d for d, _, _ in shown], blocks)
            (delivered if told is True else dropped if refused_for_good(told) else set()
             ).update(f"{d.report.cluster}:{d.report.job_id}" for d, _, _ in shown)
    return delivered, dropped


async def _post_batch(bot: Bot, config: Config, channel: str, details: Sequence[JobDetail],
                      blocks: list[dict[str, Any]]) -> bool | Refusal:
    """One batched offer message, each run bound to it (``offer_key`` with its ref)."""
    try:
        posted = await bot.client.chat_postMessage(
            channel=channel, text=f"Deep-probe {len(details)} new RL runs?", blocks=blocks)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:
        log.error("deep-probe offers failed", runs=len(details), error=slack_error(exc))
        return Refusal(slack_error(exc))
    data = dict(posted.data) if isinstance(posted.data, dict) else {}
    where, ts = str(data.get("channel") or channel), str(data.get("ts") or "")
    for detail in details:
        await _bind_offer(bot, config, detail, where, ts, batched=True)
    with suppress(StoreUnavailable):
        await bot.store.put_doc(offer_key(where, ts), {"batch": len(details)},
                                ttl_s=config.redis.expire_hours * 3600)
    return True


PRESS_LOCK_S = 900.0
"""How long a running probe's claim holds at most (a probe reads under its own deadlines)."""


@asynccontextmanager
async def one_at_a_time(bot: Bot, cluster: str, job_id: str, *, user: str,
                        where: str) -> AsyncIterator[bool]:
    """Whether this caller (a press, or the scheduler's auto-probe) may probe the job now:
    one probe of a job at a time, whichever message's button was pressed (the alert, an
    offer, each ``/job`` answer carry one). A Redis lock across replicas, recording who and
    where; ``Bot.probing`` within this replica (all there is while Redis is down)."""
    ref, name = f"{cluster}:{job_id}", f"{cluster}:{job_id}:{DEEP_PROBE}"
    if ref in bot.probing:
        yield False
        return
    bot.probing.add(ref)  # before the Redis call: a caller arriving meanwhile finds it taken
    locked: bool | None = None  # None: Redis could not say
    # The token makes this claim's record its own: a probe outliving PRESS_LOCK_S releases
    # nothing another press took after the expiry (release by holder, not by name).
    holder = {"user": user, "where": where, "at": bot.clock().isoformat(),
              "token": secrets.token_hex(8)}
    try:
        try:
            locked = await bot.store.acquire(name, holder, ttl_s=PRESS_LOCK_S)
        except StoreUnavailable as exc:
            log.warning("deep probe not deduplicated across replicas", error=str(exc))
        yield locked is not False
    finally:
        bot.probing.discard(ref)
        if locked:
            try:
                if not await bot.store.release(name, holder=holder):
                    log.warning("deep-probe lock expired while probing; another holds it now",
                                ref=ref)
            except StoreUnavailable as exc:
                log.warning("deep-probe lock not released; it expires", error=str(exc))
