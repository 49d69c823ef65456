"""What a button press leaves behind: its audit entry, cancel lock, closed episode, message.

Policy (see ``bot.actions`` for the whole of it): every press is audited, in Redis and in the
log (the log alone while Redis is down). A cancel holds one lock per job instance
(:func:`cancel_lock`), ``done`` once settled and kept :data:`LOCK_HOURS` to answer late
clicks. The message pressed on is updated to its outcome; in a batched alert only the
pressed job's part, every other part shown as its own episode stands, so two presses close
together never put back buttons the first took off. :class:`ActionRecords` holds these for
the button handler (``bot.actions.ActionHandler``) and the reconciler (``bot.reconcile``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.alert_messages import outcome_blocks
from bot.alerts import closed_episode, pressed_episode
from bot.config_source import ConfigSource
from bot.delivery import update
from bot.messages import CANCEL, mention
from bot.presses import ActionPress
from bot.store import RedisStore, StoreUnavailable
from bot.sweep_result import SweepResult
from bot.telemetry import Telemetry
from probes.models import JobState

log = structlog.get_logger(__name__)

LOCK_HOURS = 24.0
"""How long a finished cancel's lock (and its "done by" record) answers late clicks."""
STILL_RUNNING = frozenset({JobState.PENDING, JobState.RUNNING})
VERBS = {"keep_running": "kept running", "snooze": "snoozed", "acknowledge": "acknowledged"}
CANCELLING = frozenset({"in progress", "salvaged", "cancelling"})
"""A cancel lock's statuses while its cancel is under way (``done`` once settled)."""


def cancel_lock(cluster: str, job_id: str, uid: str | None = None,
                submitted: str | None = None) -> str:
    """The cancel lock of one job instance: a Kubernetes Job re-created under the same name has
    a new uid, and a SLURM job run again under its id (``scontrol requeue`` of the cancelled
    job, or the id given to a later job) a new submit time, so its cancel is not answered by
    the old instance's (done) lock."""
    instance = uid or submitted
    return f"{cluster}:{job_id}:{instance}:{CANCEL}" if instance else f"{cluster}:{job_id}:{CANCEL}"


class SweepEngine(Protocol):
    """What the buttons need from :class:`bot.sweep.Sweeper`."""

    async def sweep(self, *, clusters: list[str] | None = None) -> SweepResult: ...
    async def cancel(self, cluster: str, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None: ...
    async def job(self, cluster: str | None, job_id: str) -> SweepResult: ...


class ActionRecords:
    """A button handler's state, and what a press leaves behind: the audit entry, the cancel
    lock settled, the episode closed, the message updated to its outcome."""

    def __init__(self, *, config: ConfigSource, sweeper: SweepEngine, store: RedisStore,
                 client: AsyncWebClient, telemetry: Telemetry,
                 clock: Callable[[], datetime]) -> None:
        self._config = config
        self._sweeper = sweeper
        self._store = store
        self._client = client
        self._telemetry = telemetry
        self._clock = clock
        self._reconciling = asyncio.Lock()
        """Start-up and the first scheduled sweep must not settle the same lock twice."""

    async def _close_episode(self, episode: dict[str, Any], actor: str) -> None:
        config = self._config.current()
        await self._store.put_doc(str(episode["name"]), closed_episode(
            episode, action=CANCEL, actor=actor, at=self._clock()),
            ttl_s=config.redis.expire_hours * 3600)

    async def _finish(self, lock: str, holder: dict[str, Any], outcome: str) -> None:
        try:
            await self._store.update_lock(lock, {**holder, "status": "done", "outcome": outcome,
                                                 "at": self._clock().isoformat()},
                                          ttl_s=LOCK_HOURS * 3600)
        except StoreUnavailable as exc:
            # The lock still says "in progress": reconcile completes it once Redis is back.
            log.warning("cancel lock not marked done", lock=lock, error=str(exc))

    async def _release(self, lock: str) -> None:
        try:
            await self._store.release(lock)
        except StoreUnavailable as exc:
            log.error("cancel lock not released; reconcile will", lock=lock, error=str(exc))

    async def _update(self, channel: str | None, ts: str | None,
                      blocks: list[dict[str, Any]], line: str, *, keep_buttons: bool,
                      ref: str | None = None) -> None:
        """The message with ``line`` as its outcome; in a batched alert, ``ref``'s part only
        (``outcome_blocks``): the other jobs keep their buttons."""
        if channel and ts:
            if ref is not None:
                blocks = await self._settled_parts(channel, ts, blocks, ref)
            await update(self._client, channel=channel, ts=ts, text=line,
                         blocks=outcome_blocks(blocks, line, keep_buttons=keep_buttons,
                                               ref=ref))

    async def _settled_parts(self, channel: str, ts: str, blocks: list[dict[str, Any]],
                             ref: str) -> list[dict[str, Any]]:
        """A batched alert's blocks with every other job's part as its episode stands (a
        settled one's outcome, a cancel under way said so): a press's blocks are the message
        as the presser's client last saw it, so two presses on one message close together
        would otherwise put back the buttons the first took off."""
        for block in list(blocks):
            block_id = str(block.get("block_id", ""))
            other = block_id.removeprefix("collapse_actions:")
            if other in (block_id, ref):  # not a batched job's buttons, or this job's
                continue
            try:
                episode = await pressed_episode(self._store, channel, ts, other)
            except StoreUnavailable:
                return blocks
            if episode is None or (episode.get("channel"), episode.get("ts")) != (channel, ts):
                continue
            if episode.get("state") != "closed":
                # Open, but its cancel may be under way (salvaging, cancelling): its buttons
                # stay off, or a press on them would settle a job being cancelled.
                try:
                    holder = await self._store.holder(cancel_lock(
                        str(episode.get("cluster")), str(episode.get("job_id")),
                        episode.get("uid") or None, episode.get("submitted") or None))
                except StoreUnavailable:
                    return blocks
                if holder is not None and holder.get("status") in CANCELLING:
                    blocks = outcome_blocks(
                        blocks, f"⏳ Cancel requested by {mention(str(holder.get('user') or ''))}"
                        ": salvaging evidence first…", keep_buttons=False, ref=other)
                continue
            action = str(episode.get("action"))
            try:
                at = f" at {datetime.fromisoformat(str(episode.get('closed_at'))):%H:%M} UTC"
            except ValueError:
                at = ""
            who = mention(str(episode.get("closed_by") or ""))
            line = (f"🛑 Cancelled by {who}{at}." if action == CANCEL else
                    f"{VERBS.get(action, action).capitalize()} by {who}{at}.")
            blocks = outcome_blocks(blocks, line, keep_buttons=False, ref=other)
        return blocks

    async def _audit(self, press: ActionPress | None, cluster: str, job_id: str, outcome: str,
                     detail: str = "", *, actor: str = "", channel: str = "", ts: str = ""
                     ) -> None:
        entry = {"actor": press.user_id if press else actor,
                 "team": (press.team_id if press else None) or "",
                 "action": press.action_id if press else CANCEL, "cluster": cluster,
                 "job_id": job_id, "outcome": outcome, "detail": detail,
                 "channel": (press.channel_id if press else channel) or "",
                 "ts": (press.message_ts if press else ts) or ""}
        log.info("audit", **entry)
        try:
            await self._store.audit(entry)
        except StoreUnavailable as exc:
            log.warning("audit entry kept in the log only", error=str(exc))
