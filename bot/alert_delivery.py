"""Delivering a sweep's new collapse alerts: posted per recipient, recorded, or given back.

Policy: a sweep's new alerts are sent per recipient: one alone reads as ever; an owner's
several new collapses come as one batched DM (split only where Slack's limits force it), each
job with its evidence line and its own buttons; the channel fallback batches the same way. A
batched message indexes each job's episode under its own key (:func:`message_key` with the
job's ref), so each button is checked against its own job's alert, and is marked as a batch
(``BATCH_MARK``). The DM goes to the owner; when nobody is mapped, or the DM fails, the
alerts go to ``slack.channel`` naming the owner; an alert Slack took no message for gives
its claim back, so the next sweep (or this one's retry) tries again, as does one not yet
posted when the sweep is cancelled (a post in flight keeps its claim: Slack may have taken
it; one whose post timed out is looked for in its conversation at once, ``bot.landed``,
and found, counts as delivered there). A delivered alert's episode and its message's index
are written to Redis; while Redis is down the episode is kept in process memory until
:meth:`bot.alerts.Alerter.flush`.
:class:`AlertDelivery` is the delivering half of :class:`bot.alerts.Alerter` (its base), which
claims the episodes and holds the state used here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.alert_messages import collapse_batch_messages, collapse_message
from bot.config import Config
from bot.delivery import dm_channel, post
from bot.episodes import BATCH_MARK, alert_index, cancel_forbidden, job_ref, message_key
from bot.landed import landed, post_key, tagged
from bot.slack_errors import Refusal
from bot.store import RedisStore, StoreUnavailable
from report.models import JobDetail

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Pending:
    """A new episode claimed in this sweep, its alert not sent yet."""

    detail: JobDetail
    name: str
    claim: str
    step: int
    uid: str | None
    submitted: str | None
    evidence: Path | None
    can_cancel: bool
    owner: str | None

    @property
    def path(self) -> str | None:
        return str(self.evidence) if self.evidence else None


class AlertDelivery:
    """Posts and records a sweep's claimed alerts (the base of :class:`bot.alerts.Alerter`,
    whose ``__init__`` sets the state declared here)."""

    _store: RedisStore
    _client: AsyncWebClient
    _clock: Callable[[], datetime]
    _local: dict[str, dict[str, Any]]
    _unsaved: dict[str, float]
    undelivered: int
    by_dm: set[str]
    _remember: Callable[[str, Any], None]
    _ttl: Callable[[Config], float]

    async def _deliver(self, claimed: Sequence[_Pending], config: Config) -> set[str]:
        """Send each recipient's alerts (the owner's DM; the channel when the owner is
        unknown or the DM fails, naming the owner); record what was delivered; give back
        the claims of what was not. Returns the episode names delivered."""
        by_owner: dict[str | None, list[_Pending]] = {}
        for pending in claimed:
            by_owner.setdefault(pending.owner, []).append(pending)
        delivered: set[str] = set()
        # The alerts no post was sent for yet: if the sweep is cancelled (a SIGTERM during a
        # rollout) their claims are given back, or those collapses would stay unalerted for
        # the claim's lifetime. A post in flight keeps its claim (Slack may have taken it).
        unsent = {pending.name: pending for pending in claimed}
        refused: dict[str, Refusal] = {}  # why each alert's last post was refused
        try:
            for owner, group in by_owner.items():
                left = list(group)
                if owner is not None:
                    channel = await dm_channel(self._client, owner)  # None: the channel
                    if channel is not None:
                        left = await self._post(channel, left, config, delivered_for=None,
                                                done=delivered, unsent=unsent, refused=refused)
                        self.by_dm.update(job_ref(p.detail) for p in group
                                          if p.name in delivered)
                if left and config.slack.channel:
                    left = await self._post(config.slack.channel, left, config,
                                            delivered_for=owner, done=delivered, unsent=unsent,
                                            refused=refused)
                for pending in left:
                    # Nothing was delivered: give the claim back so the next sweep tries
                    # again, and this one's retry, soon, unless Slack refused it for good (the
                    # channel closed to the bot, the token refused: no retry within minutes
                    # passes that; the next sweep's read of the collapse tries once more).
                    why = refused.get(pending.name)
                    log.warning("collapse alert not delivered; retried next sweep",
                                ref=job_ref(pending.detail), error=why.error if why else None)
                    if why is None or not why.permanent:
                        self.undelivered += 1
                    await self._give_back(pending)
        except asyncio.CancelledError:
            for pending in unsent.values():
                await self._give_back(pending)
            raise
        return delivered

    async def _give_back(self, pending: _Pending) -> None:
        """``pending``'s claim released: the next sweep (or this one's retry) alerts it."""
        try:
            await self._store.delete_doc(pending.claim)
        except StoreUnavailable as exc:
            log.warning("alert claim kept; it expires by itself", error=str(exc))

    async def _post(self, channel: str, group: list[_Pending], config: Config, *,
                    delivered_for: str | None, done: set[str], unsent: dict[str, _Pending],
                    refused: dict[str, Refusal]) -> list[_Pending]:
        """Post ``group``'s alerts to ``channel`` (one alone as ever, several batched);
        record each delivered one in ``done``; return those Slack took no message for (why,
        in ``refused``). Each alert leaves ``unsent`` when its post is sent."""
        if len(group) == 1:
            (one,) = group
            message = collapse_message(one.detail, can_cancel=one.can_cancel,
                                       evidence_path=one.path, delivered_for=delivered_for)
            parts = [(message, [0])]
        else:
            parts = collapse_batch_messages(
                [(p.detail, p.can_cancel, p.path) for p in group], delivered_for=delivered_for)
        left: list[_Pending] = []
        for message, members in parts:
            for i in members:
                unsent.pop(group[i].name, None)
            key = post_key(message.text, message.blocks, self._clock())
            posted = await post(self._client, channel=channel, text=message.text,
                                blocks=message.blocks, metadata=tagged(key))
            # Sent, its answer never came: if it landed, its episode is bound to it (its
            # buttons answer) and it is not sent again, to the channel or the next sweep.
            if isinstance(posted, Refusal) and posted.unknown and (
                    ts := await landed(self._client, channel, key)):
                posted = {"channel": channel, "ts": ts}
            for i in members:
                if isinstance(posted, Refusal):
                    left.append(group[i])
                    refused[group[i].name] = posted
                else:
                    await self._record(group[i], posted, config,
                                       delivered_for=delivered_for, batched=len(group) > 1)
                    done.add(group[i].name)
            if not isinstance(posted, Refusal) and len(group) > 1:
                await self._mark_batch(posted, self._ttl(config))
        return left

    async def _mark_batch(self, posted: dict[str, Any], ttl_s: float, *,
                          only_new: bool = False) -> None:
        """Mark a posted batched alert as one (``BATCH_MARK``): a button value naming a job
        outside it is then refused (tampered), not read as a press on a message with no
        alert (a Deep-probe press probed that job and posted its verdict here)."""
        channel, ts = posted.get("channel"), posted.get("ts")
        if not (channel and ts):
            return
        try:
            await self._store.put_doc(message_key(str(channel), str(ts)), BATCH_MARK,
                                      ttl_s=ttl_s, only_new=only_new)
        except StoreUnavailable as exc:
            log.warning("batched alert not marked", channel=channel, ts=ts, error=str(exc))

    async def _record(self, pending: _Pending, posted: dict[str, Any], config: Config, *,
                      delivered_for: str | None, batched: bool) -> None:
        """The delivered alert's episode, and its message's index, written to Redis."""
        job = pending.detail.report
        record = {
            "state": "open", "first_step": pending.step, "last_step": pending.step,
            "opened_at": self._clock().isoformat(), "cluster": job.cluster, "job_id": job.job_id,
            "user": job.user, "owner": pending.owner, "channel": posted.get("channel"),
            "ts": posted.get("ts"), "can_cancel": pending.can_cancel, "evidence": pending.path,
            # Why it offered none (said to a forged cancel press: bot.actions).
            "no_cancel": None if pending.can_cancel else cancel_forbidden(pending.detail, config),
            "delivered_for": delivered_for, "batched": batched, "uid": pending.uid,
            "submitted": pending.submitted, "name": pending.name, "job_name": job.name,
            # The live restart the alert names, as the judge handed it over (never its prose).
            "restart": pending.detail.restart,
        }
        name = pending.name
        self._local[name] = record
        try:
            await self._store.put_doc(name, record, ttl_s=self._ttl(config))
            self._remember(name, record)
            if record.get("channel") and record.get("ts"):
                await self._store.put_doc(alert_index(record), {"episode": name},
                                          ttl_s=self._ttl(config))
        except StoreUnavailable as exc:
            self._unsaved[name] = self._ttl(config)
            log.warning("episode not saved", ref=job_ref(pending.detail), error=str(exc))
