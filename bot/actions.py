"""Button presses on collapse messages: checked against the stored alert, then exactly once.

Policy, for every press (each one is audited, whatever its outcome):

1. The press is checked against the *stored episode* of the message it came from (the index
   ``message:{channel}:{ts}`` written when the alert was posted), never against the button
   value alone: a value naming another job than the episode's is refused as tampered. A press
   on a message the bot has no episode for is refused too.
2. The job is re-read through its cluster's probe (a sweep of that cluster) and the permission
   is decided on that fresh scheduler record (bot.owners): the owner mapped on *that* cluster,
   or an operator. A stored document's ``user`` is never authority. An episode whose Kubernetes
   uid or SLURM submit time differs from the live job's is stale (the name or id was reused,
   or the SLURM job requeued: :func:`bot.alerts.same_instance`) and is refused. A cluster the
   sweep could not read refuses the press for now: nothing is decided on a read that failed.
3. ``cancel_salvage`` runs exactly once: a Redis lock (SET NX) on the job instance,
   ``cluster:job:cancel_salvage`` (``cluster:job:uid:cancel_salvage`` for a Kubernetes Job,
   ``cluster:job:submitted:cancel_salvage`` for a SLURM job with a submit time: one re-created
   or run again under the name or id is another job, which the first one's lock must not
   answer),
   turns a double click or two people racing into one cancel. The lock record walks
   ``in progress`` -> ``salvaged`` -> ``cancelling`` -> ``done``; the evidence (log tail, metric
   window, banked step, scheduler record) is written before the audit records the *intent*,
   then ``scancel``/delete runs, then the audit records the *outcome*. Without Redis there is
   no lock, so the cancel is refused rather than risked twice.
4. A cancel interrupted at any await (crash, SIGTERM during a rollout) is reconciled by
   :meth:`ActionHandler.reconcile` at start-up and after each scheduled sweep: for a lock not
   ``done`` and untouched for :data:`RECONCILE_AFTER_S`, the job's true state is re-read; a job
   that is no longer running (or whose name now belongs to a re-created Job) completes the
   lock, one still running releases it, and the message is updated either way. Released, the
   message is rebuilt as its episode posted it (a collapse alert or a deep-probe verdict) with
   its buttons back; Cancel among them only when the episode offered it and the run may be
   cancelled now (not ``no_kill``, not exempt), else the recommendation's ``acknowledge``.

``keep_running``, ``snooze`` and ``acknowledge`` close the episode and change nothing on the
cluster; by default only the owner and the operators may press them (``slack.keep_snooze_by``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from pydantic import ValidationError
from slack_sdk.web.async_client import AsyncWebClient

from bot.alert_messages import collapse_message, outcome_blocks, with_job_buttons
from bot.alerts import (
    cancel_forbidden,
    closed_episode,
    job_submitted,
    job_uid,
    pressed_episode,
    same_instance,
)
from bot.cluster_names import renamed_to
from bot.config import Config
from bot.config_source import ConfigSource
from bot.deep_probe import memory_name, verdict_blocks
from bot.delivery import update
from bot.errors import UserError
from bot.incidents import salvage_record, write_incident
from bot.messages import CANCEL, code, esc, mention
from bot.owners import may_press
from bot.presses import ActionPress, Checked, Refused, parse_value
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import SweepResult
from bot.telemetry import Telemetry
from probes.errors import ProbeError
from probes.models import JobFacts, JobState
from report.chunks import inert, public_reason
from report.models import DeepProbe, JobDetail

log = structlog.get_logger(__name__)

LOCK_HOURS = 24.0
"""How long a finished cancel's lock (and its "done by" record) answers late clicks."""
RECONCILE_AFTER_S = 120.0
"""A cancel lock untouched this long is taken as interrupted (a live cancel takes seconds)."""
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


def _locked_job(lock: str, holder: dict[str, Any]) -> tuple[str, str, str | None]:
    """(cluster, job id, uid) of a cancel lock: from its record, or (a lock taken before the
    record named them) from the name ``cluster:job:cancel_salvage``."""
    if holder.get("cluster") and holder.get("job_id"):
        return str(holder["cluster"]), str(holder["job_id"]), holder.get("uid") or None
    cluster, job_id, _ = lock.rsplit(":", 2)
    return cluster, job_id, None


def _another_job(cluster: str, job_id: str, facts: JobFacts | None) -> str:
    """Why a press was refused because the job under its id is not the alert's: a requeue
    (counted in the record) is said as a possibility, never taken as proof (a later job given
    the id and requeued itself looks the same: ``bot.alerts.same_instance``)."""
    text = (f"This alert was for an earlier job named {cluster}:{job_id}; the job under that id "
            "now is another one")
    if facts is not None and job_uid(facts) is None and facts.record.restarts > 0 \
            and facts.record.submit_time is not None:  # a SLURM job (a Kubernetes one has a uid)
        text += (f" (submitted {facts.record.submit_time:%Y-%m-%d %H:%M:%S} UTC, requeued "
                 f"{facts.record.restarts}x: SLURM's record cannot tell whether it is this "
                 "alert's job requeued or a later job given its id)")
    return f"{text}. Nothing was done; this attempt was logged."


class Reply(Protocol):
    """Bolt's ``respond()`` as wrapped by :class:`bot.delivery.Responder`."""

    async def __call__(self, **kwargs: Any) -> bool: ...


class SweepEngine(Protocol):
    """What the buttons need from :class:`bot.sweep.Sweeper`."""

    async def sweep(self, *, clusters: list[str] | None = None) -> SweepResult: ...
    async def cancel(self, cluster: str, job_id: str, *, uid: str | None = None) -> None: ...
    async def job(self, cluster: str | None, job_id: str) -> SweepResult: ...


class ActionHandler:
    """Handles the collapse-message buttons and reconciles interrupted cancels."""

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

    async def handle(self, press: ActionPress, respond: Reply) -> None:
        """Run one button press (after ``ack()``); refusals become ephemeral replies."""
        cluster = job_id = "?"
        try:
            cluster, job_id = parse_value(press.value)
            checked = await self._check(press, cluster, job_id)
            if press.action_id == CANCEL:
                await self._cancel(press, checked)
            else:
                await self._close(press, checked)
        except Refused as exc:
            await self._audit(press, cluster, job_id, exc.outcome, exc.detail)
            await respond(text=inert(str(exc)), response_type="ephemeral", replace_original=False)
        except UserError as exc:
            await self._audit(press, cluster, job_id, "refused", str(exc))
            await respond(text=inert(str(exc)), response_type="ephemeral", replace_original=False)
        except Exception:
            ref = uuid.uuid4().hex[:8]
            log.exception("button failed", ref=ref, action=press.action_id)
            await self._audit(press, cluster, job_id, "error", f"reference {ref}")
            await respond(text=f"Something went wrong (reference `{ref}`); it has been logged.",
                          response_type="ephemeral", replace_original=False)

    # -- checks ----------------------------------------------------------------------------------

    async def _check(self, press: ActionPress, cluster: str, job_id: str) -> Checked:
        episode = await self._episode_of(press, f"{cluster}:{job_id}")
        if (episode.get("cluster"), episode.get("job_id")) != (cluster, job_id):
            raise Refused("tampered", "That button does not belong to this alert; the attempt "
                          "was logged.", f"episode is {episode.get('cluster')}:"
                                         f"{episode.get('job_id')}")
        if episode.get("channel") and episode.get("ts") and (
                episode["channel"], episode["ts"]) != (press.channel_id, press.message_ts):
            raise Refused("stale", f"A newer alert about {cluster}:{job_id} replaced this one; "
                          "use its buttons. This attempt was logged.", "not the episode's message")
        if episode.get("state") != "open":
            # Settled (kept running, snoozed, acknowledged, cancelled): its buttons were taken
            # off the message, so a press now is a stale client or a replay; it does nothing.
            verb = VERBS.get(str(episode.get("action")), "cancelled")
            raise Refused("rejected", f"This alert about {cluster}:{job_id} was already settled "
                          f"({verb}); nothing was done. This attempt was logged.",
                          f"episode {episode.get('state')}: {episode.get('action')}")
        if press.action_id == CANCEL and episode.get("can_cancel") is False:
            raise Refused("refused", f"This alert about {cluster}:{job_id} offered no cancel "
                          "(a no-kill run); nothing was done. This attempt was logged.",
                          "the alert had no cancel button")
        config = self._config.current()
        if all(c.name != cluster for c in config.clusters):
            # Renamed in the config since the alert (bot.cluster_names): its job is there now.
            cluster = await renamed_to(self._store, config, cluster) or cluster
        cluster_cfg = config.cluster(cluster)
        result = await self._sweeper.sweep(clusters=[cluster])
        read = [c for c in result.report.clusters if c.name == cluster]
        if not read or read[0].status != "ok":
            # Not read (an SSH blip): the job is not "no longer reported", nor its owner
            # unknown; nothing is decided on a read that did not happen.
            unread = read[0].detail if read and read[0].detail else "not read"
            raise Refused("refused", f"{cluster} could not be read just now "
                          f"({public_reason(unread)}), so "
                          f"{cluster}:{job_id} was not checked. Nothing was done; try again "
                          "shortly. This attempt was logged.", f"cluster not read: {unread}")
        facts = result.job_facts(cluster, job_id)
        detail = result.details.get((cluster, job_id))
        if not same_instance(episode, facts):
            # A re-created Kubernetes Job (new uid), or a SLURM id given to a later job (new
            # submit time): the alert's job has ended, and a button acts only on its own job.
            raise Refused("stale", _another_job(cluster, job_id, facts),
                          "uid changed" if episode.get("uid") != job_uid(facts)
                          else "submit time changed")
        allowed = facts is not None and may_press(config, cluster_cfg, facts.record,
                                                  press.action_id, press.user_id)
        if not allowed and not (facts is None and press.user_id in config.slack.operators):
            self._telemetry.cancels.labels(cluster=cluster, outcome="refused").inc()
            raise Refused("refused", f"Only the job's owner or an operator may press this on "
                          f"{cluster}:{job_id}; this attempt was logged.",
                          "not an operator or the owner")
        why = cancel_forbidden(detail, config) if press.action_id == CANCEL else None
        if why is not None:
            # The alert's button predates a no-kill instruction, or the run reads as one now
            # (``no-kill``, ``ablation-exempt``): the rule gates a recommendation, never a kill.
            raise Refused("refused", f"{cluster}:{job_id} is not cancelled from Slack: {why}. "
                          "Cancel it yourself if you mean to; this attempt was logged.", why)
        return Checked(cluster=cluster, job_id=job_id, episode=episode, detail=detail,
                       facts=facts)

    async def _episode_of(self, press: ActionPress, ref: str) -> dict[str, Any]:
        """The alert the press is checked on: its message's (a batched message's alert of the
        job ``ref`` its button names: a value naming a job that message did not alert on
        finds none)."""
        if not (press.channel_id and press.message_ts):
            raise Refused("rejected", "That button is not on an alert message.", "no message")
        try:
            episode = await pressed_episode(self._store, press.channel_id, press.message_ts, ref)
        except StoreUnavailable as exc:
            raise UserError("The bot's state store is unavailable, so this press cannot be "
                            "checked against its alert. Try again shortly.") from exc
        if not episode:
            raise Refused("rejected", "The bot has no record of an alert in this message.",
                          "no episode for the message")
        return episode

    # -- keep running / snooze / acknowledge -------------------------------------------------------

    async def _close(self, press: ActionPress, checked: Checked) -> None:
        now = self._clock()
        config = self._config.current()
        name = str(checked.episode["name"])
        closed = closed_episode(checked.episode, action=press.action_id, actor=press.user_id,
                                at=now)
        try:
            await self._store.put_doc(name, closed, ttl_s=config.redis.expire_hours * 3600)
        except StoreUnavailable as exc:
            log.warning("episode not closed in Redis", error=str(exc))
        verb = VERBS.get(press.action_id, press.action_id)
        await self._audit(press, checked.cluster, checked.job_id, verb)
        await self._update(press.channel_id, press.message_ts, press.message_blocks,
                           f"{verb.capitalize()} by {mention(press.user_id)} at {now:%H:%M} UTC.",
                           keep_buttons=False, ref=f"{checked.cluster}:{checked.job_id}")

    # -- cancel ------------------------------------------------------------------------------------

    async def _cancel(self, press: ActionPress, checked: Checked) -> None:
        cluster, job_id = checked.cluster, checked.job_id
        uid = checked.episode.get("uid") or None
        submitted = checked.episode.get("submitted") or None
        lock = cancel_lock(cluster, job_id, uid, submitted)
        holder = {"user": press.user_id, "at": self._clock().isoformat(), "status": "in progress",
                  "channel": press.channel_id, "ts": press.message_ts,
                  "episode": checked.episode.get("name"), "cluster": cluster, "job_id": job_id,
                  "uid": uid, "submitted": submitted}
        if checked.episode.get("batched"):
            # The message holds other jobs' alerts too: a restart's reconcile edits this job's
            # part of it only, from the message as it was pressed.
            holder["blocks"] = press.message_blocks
        try:
            won = await self._store.acquire(lock, holder, ttl_s=LOCK_HOURS * 3600)
            current = None if won else await self._store.holder(lock)
        except StoreUnavailable as exc:
            raise UserError("The bot's state store is unavailable, so a cancel cannot be "
                            "guaranteed to run once. Try again shortly.") from exc
        if not won:
            who = (current or {}).get("user")
            raise Refused("duplicate", f"Cancel of {cluster}:{job_id} is already "
                          f"{(current or {}).get('status', 'in progress')} (by {who}).",
                          str({k: v for k, v in (current or {}).items() if k != "blocks"}))
        await self._update(press.channel_id, press.message_ts, press.message_blocks,
                           f"⏳ Cancel requested by {mention(press.user_id)}: salvaging "
                           "evidence first…", keep_buttons=False, ref=f"{cluster}:{job_id}")
        try:
            await self._salvage_and_cancel(press, checked, lock, holder)
        except (ProbeError, UserError, StoreUnavailable, OSError) as exc:
            await self._release(lock)
            self._telemetry.cancels.labels(cluster=cluster, outcome="failed").inc()
            await self._audit(press, cluster, job_id, "cancel failed", str(exc))
            await self._update(press.channel_id, press.message_ts, press.message_blocks,
                               f"❌ Cancel by {mention(press.user_id)} failed: "
                               f"{inert(public_reason(str(exc)))}",
                               keep_buttons=True, ref=f"{cluster}:{job_id}")

    async def _salvage_and_cancel(self, press: ActionPress, checked: Checked, lock: str,
                                  holder: dict[str, Any]) -> None:
        cluster, job_id, detail = checked.cluster, checked.job_id, checked.detail
        now = self._clock()
        if detail is None or checked.facts is None or detail.report.state not in STILL_RUNNING:
            state = detail.report.state if detail is not None else "no longer reported"
            await self._audit(press, cluster, job_id, "not cancelled", str(state))
            await self._update(press.channel_id, press.message_ts, press.message_blocks,
                               f"`{code(f'{cluster}:{job_id}')}` already ended ({state}); nothing "
                               f"cancelled. Checked for {mention(press.user_id)} at "
                               f"{now:%H:%M} UTC.", keep_buttons=False,
                               ref=f"{cluster}:{job_id}")
            await self._finish(lock, holder, "already ended")
            return
        path = await self._salvage(press, detail, checked.facts, now)
        await self._store.update_lock(lock, {**holder, "status": "salvaged", "path": str(path),
                                             "at": self._clock().isoformat()},
                                      ttl_s=LOCK_HOURS * 3600)
        await self._audit(press, cluster, job_id, "cancel requested", str(path))
        await self._store.update_lock(lock, {**holder, "status": "cancelling", "path": str(path),
                                             "at": self._clock().isoformat()},
                                      ttl_s=LOCK_HOURS * 3600)
        # The uid checked at the press rides with the delete: a Job re-created under the
        # name meanwhile is not the one alerted on (CONTRACT: a button acts only on its job).
        await self._sweeper.cancel(cluster, job_id, uid=checked.episode.get("uid"))
        self._telemetry.cancels.labels(cluster=cluster, outcome="cancelled").inc()
        await self._audit(press, cluster, job_id, "cancelled", str(path))
        await self._close_episode(checked.episode, press.user_id)
        banked = detail.report.banked_step
        await self._update(press.channel_id, press.message_ts, press.message_blocks, (
            f"🛑 Cancelled by {mention(press.user_id)} at {now:%Y-%m-%d %H:%M} UTC. Evidence "
            f"saved to `{code(str(path))}`; banked checkpoint: "
            f"{banked if banked is not None else 'none'}."), keep_buttons=False,
            ref=f"{cluster}:{job_id}")
        # Marked done only once the message says so: a crash before this point leaves a lock
        # that reconcile completes, updating the message again.
        await self._finish(lock, {**holder, "path": str(path)}, "cancelled")

    async def _salvage(self, press: ActionPress, detail: JobDetail, facts: JobFacts,
                       now: datetime) -> Path:
        config = self._config.current()
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

    # -- shared ------------------------------------------------------------------------------------

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

    # -- reconciliation ----------------------------------------------------------------------------

    async def reconcile(self) -> list[str]:
        """Settle cancels a crash interrupted; return the locks settled. Reconciliation never
        sends a cancel: it only reads the job's state and settles the lock and the message."""
        async with self._reconciling:
            return await self._reconcile_all()

    async def _reconcile_all(self) -> list[str]:
        try:
            locks = await self._store.locks(f"*:{CANCEL}")
        except StoreUnavailable as exc:
            log.warning("cancel reconciliation postponed: Redis unavailable", error=str(exc))
            return []
        settled = []
        for name, holder in locks:
            at = datetime.fromisoformat(str(holder.get("at")))
            if holder.get("status") == "done" or (self._clock() - at).total_seconds() < \
                    RECONCILE_AFTER_S:
                continue
            try:
                await self._reconcile_one(name, holder)
            except (ProbeError, UserError, StoreUnavailable, OSError) as exc:
                log.warning("cancel not reconciled yet", lock=name, error=str(exc))
                continue
            settled.append(name)
        return settled

    async def _reconcile_one(self, lock: str, holder: dict[str, Any]) -> None:
        cluster, job_id, uid = _locked_job(lock, holder)
        result = await self._sweeper.sweep(clusters=[cluster])
        read = [c for c in result.report.clusters if c.name == cluster]
        if not read or read[0].status != "ok":
            # Not read (unreachable, inactive): its job is not "no longer reported"; the lock,
            # the episode and the buttons stay as they are until a pass can read it.
            reason = read[0].detail if read and read[0].detail else "not read"
            raise ProbeError(f"cluster {cluster!r} not read: {reason}")
        detail = result.details.get((cluster, job_id))
        facts = result.job_facts(cluster, job_id)
        if uid and facts is not None and job_uid(facts) != uid:
            detail = None  # the name is a re-created Job's now: the one being cancelled is gone
        submitted = holder.get("submitted")
        if submitted and facts is not None and job_submitted(facts) != submitted:
            detail = None  # the SLURM id names another instance now (requeued or reused)
        state = detail.report.state if detail is not None else None
        actor, channel, ts = str(holder.get("user")), holder.get("channel"), holder.get("ts")
        audit = {"actor": actor, "channel": str(channel or ""), "ts": str(ts or "")}
        episode_name = holder.get("episode")
        found = await self._store.get_doc(str(episode_name)) if episode_name else None
        episode = dict(found) if found else None
        config = self._config.current()
        ref = f"{cluster}:{job_id}"
        batch = holder.get("blocks") if episode and episode.get("batched") else None
        if state in STILL_RUNNING and detail is not None:
            await self._store.release(lock)
            await self._audit(None, cluster, job_id, "cancel interrupted; released",
                              str(holder.get("status")), **audit)
            # The buttons come back as the episode offered them, and Cancel only if it may be
            # pressed now: a no_kill set (or an exemption read) since makes it a recommendation.
            if episode is None:
                why: str | None = "its alert's record is gone"
            elif episode.get("can_cancel") is False:
                why = "the alert offered no cancel"
            else:
                why = cancel_forbidden(detail, config)
            blocks = (with_job_buttons(batch, detail, can_cancel=why is None)
                      if isinstance(batch, list) else
                      await self._episode_blocks(episode, detail, config, can_cancel=why is None))
            line = (f"⚠️ The cancel requested by {mention(actor)} was interrupted before it took "
                    "effect; the job is still running. ")
            line += "Press again to retry." if why is None else (
                f"It is not cancelled from Slack now ({inert(why)}): this is a recommendation.")
            # Without its episode a press is refused anyway: no buttons that cannot be honoured.
            await self._update(channel, ts, blocks, line, keep_buttons=episode is not None,
                               ref=ref)
            return
        shown = state.value if state is not None else "no longer reported"
        outcome = "cancelled" if holder.get("status") == "cancelling" else "ended"
        await self._finish(lock, holder, f"{outcome} (reconciled)")
        if episode:
            await self._close_episode(episode, actor)
        await self._audit(None, cluster, job_id, f"{outcome} (reconciled)", shown, **audit)
        if isinstance(batch, list):  # the other jobs of the message keep their parts
            blocks = batch
        else:
            blocks = (await self._episode_blocks(episode, detail, config, can_cancel=False)
                      if detail is not None else [])
        await self._update(channel, ts, blocks, f"🛑 Cancel requested by {mention(actor)}: "
                           f"settled after a restart; the job is {esc(shown)}.",
                           keep_buttons=False, ref=ref)

    async def _episode_blocks(self, episode: dict[str, Any] | None, detail: JobDetail,
                              config: Config, *, can_cancel: bool) -> list[dict[str, Any]]:
        """The message the episode posted, rebuilt on the job's fresh row: a deep-probe KILL
        verdict stays a verdict (its stored verdict; else the run's remembered one), a collapse
        alert a collapse alert (its evidence file and channel note kept)."""
        episode = episode or {}
        if episode.get("kind") == "deep-probe":
            stored = episode.get("deep_probe")
            if stored is None:
                memory = await self._store.get_doc(memory_name(detail.report.cluster,
                                                               detail.report.job_id))
                stored = (memory or {}).get("deep_probe")
            try:
                verdict = DeepProbe.model_validate(stored) if stored is not None else None
            except ValidationError:  # a stored document that does not validate: as none
                verdict = None
            if verdict is None:
                return []  # nothing to rebuild the verdict from: no buttons to offer
            shown = detail.model_copy(update={"report": detail.report.model_copy(
                update={"deep_probe": verdict})})
            return verdict_blocks(shown, config, can_cancel=can_cancel)
        return collapse_message(detail, can_cancel=can_cancel,
                                evidence_path=episode.get("evidence"),
                                delivered_for=episode.get("delivered_for")).blocks
