"""A collapse alert's episode: which job instance it is for, where it is kept, who may cancel.

Policy (see ``bot.alerts``): an episode is keyed by cluster, job id and (Kubernetes) uid
(:func:`episode_name`); a SLURM id given to a later job, or requeued, is another instance by
its submit time (:func:`same_instance`), so an old alert's buttons never act on it. A posted
message (channel, ts, and in a batch the job's ref) is indexed to its episode
(:func:`message_key`), which is what a press is checked against (:func:`pressed_episode`); a
batched message is marked as one too (:func:`batched_alert`), so a button value naming a job
outside it is refused, not taken for a press on a message with no alert.
Cancel is offered only where the config allows it (:func:`cancel_forbidden`: ``no_kill``, an
exempt job) and on the alert's own live job: a collapse on a walltime TIMEOUT whose chain
restart goes on with it is alerted (:func:`needs_alert`) naming the restart to cancel, as a
recommendation. A closed episode records who closed it, how and when.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.config import Config
from bot.messages import SNOOZE, SNOOZE_HOURS
from bot.store import RedisStore
from probes.models import ACTIVE_STATES, JobFacts
from report.models import JobDetail

UID_LABEL = "jobtables/uid"
"""Record label carrying a Kubernetes object's uid (probes.kubernetes.objects)."""


def job_ref(detail: JobDetail) -> str:
    return f"{detail.report.cluster}:{detail.report.job_id}"


def job_uid(facts: JobFacts | None) -> str | None:
    """The Kubernetes uid of the job, when the probe reported one (SLURM ids are not reused)."""
    return facts.record.labels.get(UID_LABEL) if facts is not None else None


def job_submitted(facts: JobFacts | None) -> str | None:
    """When the scheduler says the job was submitted (ISO), or None when it does not say: with
    the id, what tells one SLURM job from a later one given the same id (a controller whose
    job ids were reset or wrapped); an alert is bound to it."""
    if facts is None or facts.record.submit_time is None:
        return None
    return facts.record.submit_time.isoformat()


def same_instance(episode: dict[str, Any], facts: JobFacts | None) -> bool:
    """False when the live job under the episode's id is not provably the episode's: another
    Kubernetes uid, or another SLURM submit time (both compared only where both are known).

    SLURM gives a requeued job (preempted with ``--requeue``, its node failed, ``scontrol
    requeue``) a new submit time and counts the requeue (``restart_cnt``), but a later job given
    the id (ids reset or wrapped) of the same name and user, requeued once itself, shows exactly
    the same record: squeue and scontrol keep no first submit time, and a requeued log is
    truncated. So another submit time is another job, whatever the restart count says: a
    button acts only on the very job its alert was about, and a requeued run that still
    collapses is alerted again, its new message bound to it (``Alerter``)."""
    if facts is None:
        return True
    if episode.get("uid") != job_uid(facts):
        return False
    submitted, now = episode.get("submitted"), job_submitted(facts)
    if not submitted or now is None:
        return True
    try:
        return datetime.fromisoformat(str(submitted)) == datetime.fromisoformat(now)
    except (ValueError, TypeError):  # TypeError: one stamp without a zone
        return False


def episode_name(cluster: str, job_id: str, uid: str | None = None) -> str:
    """An episode's key: a Job re-created under the same name (new uid) is a new episode."""
    return f"episode:{cluster}:{job_id}" + (f":{uid}" if uid else "")


def message_key(channel: str, ts: str, ref: str | None = None) -> str:
    """The index from a posted alert (channel, ts) to its episode: what a press is checked on.
    A batched alert (several jobs' alerts in one message) indexes each job's episode under
    its own ``ref`` (``cluster:job``): a press finds the alert of the job its button names
    in that message, and no other (:func:`alert_index`)."""
    return f"message:{channel}:{ts}" + (f":{ref}" if ref else "")


def alert_index(record: dict[str, Any]) -> str:
    """The message index a posted alert's ``record`` is found under (:func:`message_key`)."""
    ref = f"{record.get('cluster')}:{record.get('job_id')}" if record.get("batched") else None
    return message_key(str(record["channel"]), str(record["ts"]), ref)


BATCH_MARK: dict[str, Any] = {"batched": True}
"""What a batched alert's message holds under its message-level index (:func:`message_key`
without a ref): no episode, so a press whose value names a job outside the message finds none
to act on (:func:`pressed_episode`), and yet the message reads as an alert, not as one with no
alert (:func:`batched_alert`)."""


async def batched_alert(store: RedisStore, channel: str, ts: str) -> bool:
    """Whether message (channel, ts) is a batched alert (:data:`BATCH_MARK`). Raises
    ``StoreUnavailable``."""
    mark = await store.get_doc(message_key(channel, ts))
    return isinstance(mark, dict) and mark.get("batched") is True


async def pressed_episode(store: RedisStore, channel: str, ts: str,
                          ref: str) -> dict[str, Any] | None:
    """The stored episode a press on message (channel, ts) whose button names ``ref`` is
    checked against: that job's own alert in a batched message, else the message's alert.
    Raises ``StoreUnavailable``."""
    index = await store.get_doc(message_key(channel, ts, ref))
    if not isinstance(index, dict):
        index = await store.get_doc(message_key(channel, ts))
    if not isinstance(index, dict) or not index.get("episode"):
        return None
    episode = await store.get_doc(str(index["episode"]))
    return dict(episode) if isinstance(episode, dict) else None


def cancel_forbidden(detail: JobDetail | None, config: Config) -> str | None:
    """Why the run must never be cancelled from Slack (``no_kill``, a ``no-kill`` or
    ``ablation-exempt`` run, or a collapse whose run goes on in its chain restart: a button
    acts only on the job its alert was raised for, which has ended), or None when it may be."""
    if config.slack.no_kill:
        return "no_kill is set"
    flags = [f for f in ("no-kill", "ablation-exempt")
             if detail is not None and f in detail.report.flags]
    if flags:
        return f"the run is {', '.join(flags)}"
    if detail is not None and chain_restart_collapse(detail):
        return (f"the run goes on as its restart {restart_of(detail)}: cancel that job "
                "yourself")
    return None


def cancel_allowed(detail: JobDetail, config: Config) -> bool:
    """False when the run must never be cancelled from Slack (:func:`cancel_forbidden`)."""
    return cancel_forbidden(detail, config) is None


def needs_alert(detail: JobDetail) -> bool:
    """A collapse on a live run, or on an ended one whose chain restart goes on with it."""
    job = detail.report
    return "collapse" in job.flags and (job.state in ACTIVE_STATES
                                        or chain_restart_collapse(detail))


def chain_restart_collapse(detail: JobDetail) -> bool:
    """An ended run's collapse that its live restart resumes: the judge hands the restart
    over with the row (``JobDetail.restart``: ``report.judge_rl.chain_collapse_rule`` for a
    walltime TIMEOUT, cancel it, or for an ablation leave it; ``report.job_rules.
    cancelled_rule`` for a cancel that released its ``afterany`` restart), and hands none
    once the restart ended or judges itself. Never read from the recommendation's words: a
    ``why`` may quote a job name or a log line."""
    job = detail.report
    return (job.state not in ACTIVE_STATES and "collapse" in job.flags
            and job.recommendation is not None and restart_of(detail) is not None)


def restart_of(detail: JobDetail) -> str | None:
    """The live restart an ended run goes on in, as the judge named it (``JobDetail.restart``),
    or None."""
    return detail.restart


def closed_episode(doc: dict[str, Any], *, action: str, actor: str, at: datetime) -> dict[str, Any]:
    """The episode record after someone acted on it."""
    closed = {**doc, "state": "closed", "action": action, "closed_by": actor,
              "closed_at": at.isoformat()}
    if action == SNOOZE:
        closed["snoozed_until"] = (at + timedelta(hours=SNOOZE_HOURS)).isoformat()
    return closed
