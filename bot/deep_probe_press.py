"""A Deep-probe press checked and audited before (or instead of) its probe.

Policy: the press checks of :func:`bot.deep_probe.on_button`, which runs the probe itself.
Every press is audited (who pressed, which job, what came of it), because anyone who sees the
message may press Deep-probe and the trail is what shows who did; an unreachable store keeps
the entry in the log only and never stops the press. A press on a stored alert or a posted
offer is refused (audited ``tampered``) when its value names another job than the message's,
and (``stale``) when the id now names a later job; a ``/job`` answer binds nothing. A press
while the job's probe runs is told where that probe's verdict goes, audited ``duplicate``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from bot.alerts import pressed_episode, same_instance
from bot.deep_probe_blocks import code
from bot.deep_probe_post import offer_key
from bot.episodes import batched_alert
from bot.errors import UserError
from bot.messages import DEEP_PROBE
from bot.store import StoreUnavailable
from probes.errors import ProbeError

if TYPE_CHECKING:
    from bot.app import Bot
    from bot.presses import ActionPress

log = structlog.get_logger(__name__)

Respond = Callable[..., Awaitable[Any]]


def _where(press: ActionPress) -> str:
    return f"{press.channel_id or ''}:{press.message_ts or press.user_id}"


async def _already_running(bot: Bot, press: ActionPress, cluster: str, job_id: str,
                           respond: Respond) -> None:
    """A press while the job's probe runs: told so (where its verdict goes), audited
    ``duplicate``; nothing more is read."""
    holder: dict[str, Any] = {}
    try:
        holder = await bot.store.holder(f"{cluster}:{job_id}:{DEEP_PROBE}") or {}
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": "duplicate",
            "detail": f"a probe asked by {holder.get('user')} is running",
            "channel": press.channel_id or "", "ts": press.message_ts or ""})
    except StoreUnavailable as exc:
        log.warning("deep-probe duplicate press kept in the log only", user=press.user_id,
                    cluster=cluster, job_id=job_id, error=str(exc))
    ref = code(f"{cluster}:{job_id}")
    where = ("for this message; its verdict comes here once" if holder.get("where") ==
             _where(press) else "(asked from another message; its verdict goes there). Press "
             "again once it is done for a verdict here")
    await respond(text=f"A deep probe of `{ref}` is already running {where}. This press was "
                       "logged.", response_type="ephemeral", replace_original=False)


async def _audit(bot: Bot, press: ActionPress, cluster: str, job_id: str, outcome: str, *,
                 detail: str) -> None:
    """One press in the audit trail (who probed which job, what it said, or why nothing
    ran): anyone who sees the message may press Deep-probe, so the trail is what shows who did."""
    try:
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": outcome, "detail": detail,
            "channel": press.channel_id or "", "ts": press.message_ts or ""})
    except StoreUnavailable as exc:
        log.warning("deep-probe press kept in the log only", error=str(exc), actor=press.user_id,
                    cluster=cluster, job_id=job_id, outcome=outcome)


async def _alert_refusal(bot: Bot, press: ActionPress, cluster: str, job_id: str
                         ) -> str | None:
    """Why the press may not probe (audited), or None. Refused: a press on a stored alert
    (collapse DM, KILL verdict) or a posted offer about another job than its value names (a
    button acts only on its message's job, whatever its value says; a batched alert's on one
    of its jobs, ``bot.episodes.batched_alert``), and one whose job's id now names a later job
    (another SLURM submit time, another Kubernetes uid). A ``/job`` answer binds nothing
    (anyone may ask for any job); nor does an unreachable store: the probe only reads."""
    if not (press.channel_id and press.message_ts):
        return None
    try:
        # A batched alert's press finds the alert of the job its button names (bot.alerts).
        episode = await pressed_episode(bot.store, press.channel_id, press.message_ts,
                                        f"{cluster}:{job_id}") or (
            # A batched offer's run (its own key), else the message's offer (or batch mark).
            await bot.store.get_doc(offer_key(press.channel_id, press.message_ts,
                                              f"{cluster}:{job_id}"))) or (
            await bot.store.get_doc(offer_key(press.channel_id, press.message_ts)))
        if not episode:
            if not await batched_alert(bot.store, press.channel_id, press.message_ts):
                return None
            # A batched alert without an alert of the job the value names: not one of its jobs.
            outcome, detail = "tampered", "not a job of this batched alert"
            reply = "That button does not belong to this alert; the attempt was logged."
        elif (episode.get("cluster"), episode.get("job_id")) != (cluster, job_id):
            outcome, detail = "tampered", (f"episode is {episode.get('cluster')}:"
                                           f"{episode.get('job_id')}")
            reply = "That button does not belong to this alert; the attempt was logged."
        elif await _another_instance(bot, episode, cluster, job_id):
            outcome, detail = "stale", "the id names a later job"
            reply = (f"This alert was for an earlier job named `{code(f'{cluster}:{job_id}')}`; "
                     "the job under that id now is another one. Nothing was probed; this "
                     "attempt was logged.")
        else:
            return None
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": outcome, "detail": detail,
            "channel": press.channel_id, "ts": press.message_ts})
    except StoreUnavailable as exc:
        log.warning("deep-probe press not checked against its alert", error=str(exc))
        return None
    log.warning("deep-probe press refused", why=outcome, value=press.value, user=press.user_id)
    return reply


async def _another_instance(bot: Bot, episode: dict[str, Any], cluster: str,
                            job_id: str) -> bool:
    """Whether the job now under the alert's id is provably another (``same_instance``), read
    by the one-job query; a job not found or a cluster not read leaves it to the probe."""
    if not (episode.get("submitted") or episode.get("uid")):
        return False
    try:
        result = await bot.sweeper.job(cluster, job_id)
    except (ProbeError, UserError):
        return False
    return not same_instance(episode, result.job_facts(cluster, job_id))
