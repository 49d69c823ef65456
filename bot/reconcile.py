"""Cancels a crash or a restart interrupted, settled without ever sending a cancel again.

Policy (``bot.actions``, point 4): at start-up and after each scheduled sweep, every cancel
lock not ``done`` and untouched for :data:`RECONCILE_AFTER_S` has its job re-read. A job no
longer running (or whose name or id now belongs to another instance) completes the lock; one
still running releases it, its buttons back as its episode offered them (Cancel only if it
may be pressed now). The message is updated either way; a cluster that cannot be read leaves
the lock for a later pass, and so does one read in part (its JobSet or PyTorchJob list
failed) that is missing the job: it may be one of those, running on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
from pydantic import ValidationError

from bot.action_records import STILL_RUNNING, ActionRecords
from bot.alert_messages import collapse_message, with_job_buttons
from bot.alerts import cancel_forbidden, job_submitted, job_uid
from bot.config import Config
from bot.deep_probe import memory_name, verdict_blocks
from bot.errors import UserError
from bot.messages import CANCEL, esc, mention
from bot.store import StoreUnavailable
from probes.errors import ProbeError
from report.chunks import inert
from report.models import DeepProbe, JobDetail
from report.render import read_in_part

log = structlog.get_logger(__name__)

RECONCILE_AFTER_S = 120.0
"""A cancel lock untouched this long is taken as interrupted (a live cancel takes seconds)."""


def _locked_job(lock: str, holder: dict[str, Any]) -> tuple[str, str, str | None]:
    """(cluster, job id, uid) of a cancel lock: from its record, or (a lock taken before the
    record named them) from the name ``cluster:job:cancel_salvage``."""
    if holder.get("cluster") and holder.get("job_id"):
        return str(holder["cluster"]), str(holder["job_id"]), holder.get("uid") or None
    cluster, job_id, _ = lock.rsplit(":", 2)
    return cluster, job_id, None


def _audit_fields(holder: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The lock's actor, and the audit fields (actor, channel, ts) of its record."""
    actor = str(holder.get("user"))
    channel, ts = holder.get("channel"), holder.get("ts")
    return actor, {"actor": actor, "channel": str(channel or ""), "ts": str(ts or "")}


class CancelReconciler(ActionRecords):
    """Settles the cancels a crash or a restart interrupted (:meth:`reconcile`)."""

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
        """Settle one interrupted cancel: released if its job still runs, else completed."""
        cluster, job_id, uid = _locked_job(lock, holder)
        detail = await self._locked_detail(cluster, job_id, uid, holder)
        episode_name = holder.get("episode")
        found = await self._store.get_doc(str(episode_name)) if episode_name else None
        episode = dict(found) if found else None
        config = self._config.current()
        if detail is not None and detail.report.state in STILL_RUNNING:
            await self._release_interrupted(lock, holder, (cluster, job_id), detail=detail,
                                            episode=episode, config=config)
        else:
            await self._settle_ended(lock, holder, (cluster, job_id), detail=detail,
                                     episode=episode, config=config)

    async def _locked_detail(self, cluster: str, job_id: str, uid: str | None,
                             holder: dict[str, Any]) -> JobDetail | None:
        """The locked job's fresh detail, ``None`` if the cluster no longer reports it (or the
        name or id is another instance's now); a cluster not read, or read in part and missing
        the job, raises ``ProbeError``."""
        result = await self._sweeper.sweep(clusters=[cluster])
        read = [c for c in result.report.clusters if c.name == cluster]
        if not read or read[0].status != "ok":
            # Not read (unreachable, inactive): its job is not "no longer reported"; the lock,
            # the episode and the buttons stay as they are until a pass can read it.
            reason = read[0].detail if read and read[0].detail else "not read"
            raise ProbeError(f"cluster {cluster!r} not read: {reason}")
        detail = result.details.get((cluster, job_id))
        if detail is None and (partial := read_in_part(read[0])):
            # Read in part (its JobSet or PyTorchJob list failed): a job missing from it may
            # be one of those, running on; settling it would close its episode unseen.
            raise ProbeError(f"cluster {cluster!r} read in part: {partial}")
        facts = result.job_facts(cluster, job_id)
        if uid and facts is not None and job_uid(facts) != uid:
            detail = None  # the name is a re-created Job's now: the one being cancelled is gone
        submitted = holder.get("submitted")
        if submitted and facts is not None and job_submitted(facts) != submitted:
            detail = None  # the SLURM id names another instance now (requeued or reused)
        return detail

    async def _release_interrupted(self, lock: str, holder: dict[str, Any], job: tuple[str, str],
                                   *, detail: JobDetail, episode: dict[str, Any] | None,
                                   config: Config) -> None:
        """Release the lock of a job still running, its buttons back as its episode offered
        them, and say so on the message."""
        cluster, job_id = job
        actor, audit = _audit_fields(holder)
        batch = holder.get("blocks") if episode and episode.get("batched") else None
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
        await self._update(holder.get("channel"), holder.get("ts"), blocks, line,
                           keep_buttons=episode is not None, ref=f"{cluster}:{job_id}")

    async def _settle_ended(self, lock: str, holder: dict[str, Any], job: tuple[str, str], *,
                            detail: JobDetail | None, episode: dict[str, Any] | None,
                            config: Config) -> None:
        """Complete the lock of a job no longer running (or reported), close its episode, and
        say so on the message."""
        cluster, job_id = job
        actor, audit = _audit_fields(holder)
        batch = holder.get("blocks") if episode and episode.get("batched") else None
        state = detail.report.state if detail is not None else None
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
        await self._update(holder.get("channel"), holder.get("ts"), blocks,
                           f"🛑 Cancel requested by {mention(actor)}: "
                           f"settled after a restart; the job is {esc(shown)}.",
                           keep_buttons=False, ref=f"{cluster}:{job_id}")

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
