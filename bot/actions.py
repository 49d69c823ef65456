"""Button presses on collapse messages: permission, exactly-once, salvage, then cancel.

Policy for ``cancel_salvage`` (the only destructive button):

1. Only ``slack.operators`` and the job's owner (``slack.owners``) may press it; anyone else gets
   an ephemeral refusal, and the attempt is audited.
2. It runs exactly once: a Redis lock on ``cluster:job:cancel_salvage`` (SET NX) turns a double
   click or two people racing into one cancel; the loser is told who is already on it. Without
   Redis there is no lock, so the cancel is refused rather than risked twice.
3. The job's state is re-read (a fresh sweep of its cluster): a job that already ended is not
   cancelled. The evidence that termination destroys (log tail, metric window, banked step,
   scheduler record) is written to an incident file and to Redis *before* the cancel is sent.
4. The cancel goes through the Sweeper (``scancel`` / Kubernetes delete). The message is then
   updated (``chat.update``) with who did what and when, and its buttons are gone. A failed
   cancel releases the lock and puts the buttons back, with the error.

``keep_running``, ``snooze`` and ``acknowledge`` close the episode (no more DMs for it) and are
audited; they change nothing on the cluster, so anyone who can see the message may press them.
The button's ``value`` is only an id to look up, never authority.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from pydantic import BaseModel, ConfigDict, Field
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.alerts import CANCEL, closed_episode, episode_name
from bot.config import Config
from bot.errors import JobNotFoundError, UserError
from bot.incidents import salvage_record, write_incident
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import SweepResult
from bot.telemetry import Telemetry
from probes.errors import InvalidJobIdError, ProbeError
from probes.ids import split_job_ref
from probes.models import ACTIVE_STATES, JobFacts
from report.models import JobDetail

log = structlog.get_logger(__name__)

Respond = Callable[..., Awaitable[Any]]
LOCK_HOURS = 24.0
"""How long a finished cancel's lock (and its "done by" record) answers late clicks."""


class SweepEngine(Protocol):
    """What the buttons need from :class:`bot.sweep.Sweeper`."""

    async def sweep(self, *, clusters: Sequence[str] | None = None) -> SweepResult: ...
    async def cancel(self, cluster: str, job_id: str) -> None: ...
    def config(self) -> Config: ...


class ActionPress(BaseModel):
    """One ``block_actions`` payload, reduced to what the handlers read."""

    model_config = ConfigDict(frozen=True)

    action_id: str
    value: str
    user_id: str
    team_id: str | None = None
    channel_id: str | None = None
    message_ts: str | None = None
    message_blocks: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ActionPress:
        action = body["actions"][0]
        container = body.get("container") or {}
        return cls(
            action_id=action["action_id"],
            value=action.get("value", ""),
            user_id=body["user"]["id"],
            team_id=(body.get("team") or {}).get("id"),
            channel_id=container.get("channel_id") or (body.get("channel") or {}).get("id"),
            message_ts=container.get("message_ts") or (body.get("message") or {}).get("ts"),
            message_blocks=(body.get("message") or {}).get("blocks") or [],
        )


def owner_of(user: str | None, config: Config) -> str | None:
    return config.slack.owners.get(user) if user else None


def may_cancel(slack_user: str, job_user: str | None, config: Config) -> bool:
    """Operators, and the job's owner as mapped in ``slack.owners``."""
    return slack_user in config.slack.operators or slack_user == owner_of(job_user, config)


def _outcome_blocks(press: ActionPress, line: str, *, keep_buttons: bool) -> list[dict[str, Any]]:
    kept = [b for b in press.message_blocks if keep_buttons or b.get("type") != "actions"]
    kept = [b for b in kept if b.get("block_id") != "outcome"]
    return [*kept, {"type": "context", "block_id": "outcome",
                    "elements": [{"type": "mrkdwn", "text": line[:2000]}]}]


class ActionHandler:
    """Handles the four collapse-message buttons."""

    def __init__(
        self,
        *,
        sweeper: SweepEngine,
        store: RedisStore,
        client: AsyncWebClient,
        telemetry: Telemetry,
        clock: Callable[[], datetime],
    ) -> None:
        self._sweeper = sweeper
        self._store = store
        self._client = client
        self._telemetry = telemetry
        self._clock = clock

    async def handle(self, press: ActionPress, respond: Respond) -> None:
        """Run one button press (after ``ack()``); user errors become ephemeral replies."""
        try:
            cluster, job_id = split_job_ref(press.value)
            if cluster is None:
                raise InvalidJobIdError("button value lacks a cluster")
        except InvalidJobIdError:
            await self._audit(press, "?", "?", "rejected", "malformed button value")
            await respond(text="That button carries no valid job reference.",
                          response_type="ephemeral", replace_original=False)
            return
        try:
            if press.action_id == CANCEL:
                await self._cancel(press, cluster, job_id, respond)
            else:
                await self._close(press, cluster, job_id)
        except UserError as exc:
            await respond(text=str(exc), response_type="ephemeral", replace_original=False)
        except Exception:
            ref = uuid.uuid4().hex[:8]
            log.exception("button failed", ref=ref, action=press.action_id, value=press.value)
            await respond(text=f"Something went wrong (reference `{ref}`); it has been logged.",
                          response_type="ephemeral", replace_original=False)

    async def _close(self, press: ActionPress, cluster: str, job_id: str) -> None:
        now = self._clock()
        name = episode_name(cluster, job_id)
        config = self._sweeper.config()
        try:
            doc = await self._store.get_doc(name) or {"cluster": cluster, "job_id": job_id}
            closed = closed_episode(doc, action=press.action_id, actor=press.user_id, at=now)
            await self._store.put_doc(name, closed, ttl_s=config.redis.expire_hours * 3600)
        except StoreUnavailable as exc:
            log.warning("episode not closed in Redis", error=str(exc))
        verb = {"keep_running": "kept running", "snooze": "snoozed",
                "acknowledge": "acknowledged"}.get(press.action_id, press.action_id)
        await self._audit(press, cluster, job_id, verb)
        await self._update(press, f"{verb.capitalize()} by <@{press.user_id}> at {now:%H:%M} UTC.",
                           keep_buttons=False)

    async def _cancel(
        self, press: ActionPress, cluster: str, job_id: str, respond: Respond
    ) -> None:
        config = self._sweeper.config()
        job_user = await self._job_user(cluster, job_id)
        if not may_cancel(press.user_id, job_user, config):
            await self._audit(press, cluster, job_id, "refused", "not an operator or the owner")
            self._telemetry.cancels.labels(cluster=cluster, outcome="refused").inc()
            raise UserError(
                f"Only the job's owner or an operator may cancel `{cluster}:{job_id}`; "
                "this attempt was logged."
            )
        lock = f"{cluster}:{job_id}:{CANCEL}"
        holder = {"user": press.user_id, "at": self._clock().isoformat(), "status": "in progress"}
        try:
            won = await self._store.acquire(lock, holder, ttl_s=LOCK_HOURS * 3600)
            current = None if won else await self._store.holder(lock)
        except StoreUnavailable as exc:
            raise UserError("The bot's state store is unavailable, so a cancel cannot be "
                            "guaranteed to run once. Try again shortly.") from exc
        if not won:
            await self._audit(press, cluster, job_id, "duplicate", str(current))
            who = (current or {}).get("user", "someone")
            raise UserError(f"Cancel of `{cluster}:{job_id}` is already "
                            f"{(current or {}).get('status', 'in progress')} (by <@{who}>).")
        await self._run_cancel(press, cluster, job_id, lock, holder)

    async def _run_cancel(self, press: ActionPress, cluster: str, job_id: str, lock: str,
                          holder: dict[str, Any]) -> None:
        config = self._sweeper.config()
        await self._update(press, f"⏳ Cancel requested by <@{press.user_id}>: salvaging "
                                  "evidence first…", keep_buttons=False)
        try:
            outcome = await self._salvage_and_cancel(press, cluster, job_id, config)
        except (ProbeError, JobNotFoundError, StoreUnavailable, OSError) as exc:
            await self._store_release(lock)
            self._telemetry.cancels.labels(cluster=cluster, outcome="failed").inc()
            self._telemetry.probe_errors.labels(cluster=cluster).inc()
            await self._audit(press, cluster, job_id, "cancel failed", str(exc))
            await self._update(press, f"❌ Cancel by <@{press.user_id}> failed: {exc}",
                               keep_buttons=True)
            return
        try:
            await self._store.update_lock(lock, {**holder, "status": "done", "outcome": outcome},
                                          ttl_s=LOCK_HOURS * 3600)
        except StoreUnavailable as exc:
            # The lock still says "in progress" and expires by itself: late clicks stay refused.
            log.warning("cancel lock not marked done", lock=lock, error=str(exc))

    async def _salvage_and_cancel(self, press: ActionPress, cluster: str, job_id: str,
                                  config: Config) -> str:
        result = await self._sweeper.sweep(clusters=[cluster])
        detail = result.find(cluster, job_id)
        now = self._clock()
        if detail.report.state not in ACTIVE_STATES:
            line = (f"`{cluster}:{job_id}` already ended ({detail.report.state}); nothing "
                    f"cancelled. Checked for <@{press.user_id}> at {now:%H:%M} UTC.")
            await self._audit(press, cluster, job_id, "not cancelled", str(detail.report.state))
            await self._update(press, line, keep_buttons=False)
            return "already ended"
        path = await self._salvage(press, detail, result.job_facts(cluster, job_id),
                                   config, now)
        await self._sweeper.cancel(cluster, job_id)
        self._telemetry.cancels.labels(cluster=cluster, outcome="cancelled").inc()
        await self._close_episode(press, cluster, job_id, config)
        await self._audit(press, cluster, job_id, "cancelled", str(path))
        banked = detail.report.banked_step
        await self._update(press, (
            f"🛑 Cancelled by <@{press.user_id}> at {now:%Y-%m-%d %H:%M} UTC. Evidence saved to "
            f"`{path}`; banked checkpoint: {banked if banked is not None else 'none'}."
        ), keep_buttons=False)
        return "cancelled"

    async def _salvage(self, press: ActionPress, detail: JobDetail, facts: JobFacts | None,
                       config: Config, now: datetime) -> Path:
        try:
            history = tuple(await self._store.load_history(detail.report.cluster,
                                                           detail.report.job_id))
        except StoreUnavailable:
            history = ()
        record = salvage_record(detail, facts, history=history, actor=press.user_id, at=now)
        # The file write blocks; it is small, but a slow disk must not stall the event loop.
        path = await asyncio.to_thread(write_incident, record, Path(config.slack.incident_dir))
        await self._store.put_doc(f"incident:{record.id}", record.model_dump(mode="json"),
                                  ttl_s=config.redis.expire_hours * 3600)
        return path

    async def _close_episode(self, press: ActionPress, cluster: str, job_id: str,
                             config: Config) -> None:
        name = episode_name(cluster, job_id)
        doc = await self._store.get_doc(name) or {"cluster": cluster, "job_id": job_id}
        await self._store.put_doc(name, closed_episode(doc, action=CANCEL, actor=press.user_id,
                                                       at=self._clock()),
                                  ttl_s=config.redis.expire_hours * 3600)

    async def _job_user(self, cluster: str, job_id: str) -> str | None:
        """The job's cluster user: from the episode record, else from a sweep."""
        try:
            doc = await self._store.get_doc(episode_name(cluster, job_id))
        except StoreUnavailable:
            doc = None
        if doc and doc.get("user"):
            return str(doc["user"])
        result = await self._sweeper.sweep(clusters=[cluster])
        return result.find(cluster, job_id).report.user

    async def _store_release(self, lock: str) -> None:
        try:
            await self._store.release(lock)
        except StoreUnavailable as exc:
            log.error("cancel lock not released; it expires by itself", lock=lock, error=str(exc))

    async def _update(self, press: ActionPress, line: str, *, keep_buttons: bool) -> None:
        if not (press.channel_id and press.message_ts):
            return
        try:
            await self._client.chat_update(
                channel=press.channel_id, ts=press.message_ts, text=line,
                blocks=_outcome_blocks(press, line, keep_buttons=keep_buttons),
            )
        except (SlackApiError, SlackClientError) as exc:
            log.error("chat.update failed", error=str(exc))

    async def _audit(self, press: ActionPress, cluster: str, job_id: str, outcome: str,
                     detail: str = "") -> None:
        entry = {"actor": press.user_id, "team": press.team_id or "", "action": press.action_id,
                 "cluster": cluster, "job_id": job_id, "outcome": outcome, "detail": detail,
                 "channel": press.channel_id or ""}
        log.info("audit", **entry)
        try:
            await self._store.audit(entry)
        except StoreUnavailable as exc:
            log.warning("audit entry kept in the log only", error=str(exc))

