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
   :meth:`ActionHandler.reconcile` (``bot.reconcile``) at start-up and after each scheduled
   sweep: for a lock not ``done`` and untouched for :data:`bot.reconcile.RECONCILE_AFTER_S`,
   the job's true state is re-read; a job
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
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog

from bot.action_records import LOCK_HOURS, STILL_RUNNING, VERBS, cancel_lock
from bot.alert_messages import salvage_text
from bot.alerts import cancel_forbidden, closed_episode, job_uid, pressed_episode, same_instance
from bot.cluster_names import renamed_to
from bot.errors import UserError
from bot.incidents import salvage_record, write_incident
from bot.messages import CANCEL, code, mention
from bot.owners import may_press
from bot.presses import ActionPress, Checked, Refused, parse_value
from bot.reconcile import CancelReconciler
from bot.store import StoreUnavailable
from bot.sweep_result import SweepResult
from probes.errors import ProbeError
from probes.models import JobFacts
from report.chunks import inert, public_reason
from report.models import JobDetail

log = structlog.get_logger(__name__)


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
    """Bolt's ``respond()`` as wrapped by :class:`bot.responder.Responder`."""

    async def __call__(self, **kwargs: Any) -> bool: ...


class ActionHandler(CancelReconciler):
    """Handles the collapse-message buttons and reconciles interrupted cancels (the
    reconciliation in ``bot.reconcile``, the records a press leaves in ``bot.action_records``)."""

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
        """The press checked on its alert and on the job read afresh; ``Refused`` (logged by
        the caller) for a press on another alert, a settled one, another instance of the job,
        by someone who may not press it, or a cancel the run's rules forbid."""
        episode = await self._episode_of(press, f"{cluster}:{job_id}")
        _check_episode(episode, press, cluster, job_id)
        config = self._config.current()
        if all(c.name != cluster for c in config.clusters):
            # Renamed in the config since the alert (bot.cluster_names): its job is there now.
            cluster = await renamed_to(self._store, config, cluster) or cluster
        cluster_cfg = config.cluster(cluster)
        result = await self._read_cluster(cluster, job_id)
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

    async def _read_cluster(self, cluster: str, job_id: str) -> SweepResult:
        """A fresh sweep of ``cluster``; ``Refused`` if it could not be read (``job_id`` is
        the job the press was for, named in the reply)."""
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
        return result

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
        # The uid checked at the press rides with the delete, and the owner with scancel: a
        # Job re-created under the name meanwhile, or a SLURM id given to another user's job,
        # is not the one alerted on (CONTRACT: a button acts only on its job).
        await self._sweeper.cancel(cluster, job_id, uid=checked.episode.get("uid"),
                                   owner=checked.facts.record.user)
        self._telemetry.cancels.labels(cluster=cluster, outcome="cancelled").inc()
        await self._audit(press, cluster, job_id, "cancelled", str(path))
        await self._close_episode(checked.episode, press.user_id)
        banked = detail.report.banked_step
        salvage = (f"banked checkpoint: {banked if banked is not None else 'none'}"
                   if detail.collapse_onset is None else salvage_text(detail))
        await self._update(press.channel_id, press.message_ts, press.message_blocks, (
            f"🛑 Cancelled by {mention(press.user_id)} at {now:%Y-%m-%d %H:%M} UTC. Evidence "
            f"saved to `{code(str(path))}`; {salvage}."), keep_buttons=False,
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


def _check_episode(episode: dict[str, Any], press: ActionPress, cluster: str,
                   job_id: str) -> None:
    """``Refused`` unless the press is on this job's open alert, from its own message, and
    (for a cancel) an alert that offered one."""
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
        why = episode.get("no_cancel") or "a recommendation only"  # e.g. the run is exempt
        raise Refused("refused", f"This alert about {cluster}:{job_id} offered no cancel "
                      f"({why}); nothing was done. This attempt was logged.",
                      "the alert had no cancel button")
