"""Collapse warnings: one DM per collapse episode, with the evidence and the action buttons.

Policy: a job flagged ``collapse`` opens an *episode* (``cluster:job`` plus the first collapse
step). The episode lives in Redis, so a restarted bot or another replica sends no second DM;
it stays open until someone presses a button. After ``keep_running``/``acknowledge`` the
collapse that was answered goes on quietly: while every sweep still finds the run collapsing
(seen again within :data:`CONTINUED_SWEEPS` sweep intervals), its later steps only move the
episode's ``last_step``, as they do for an open episode; the tables keep showing it. Only a
collapse on a later step after the run stopped collapsing for that long opens a new episode,
so a kept run is not DMed again every sweep. ``snooze`` silences the job for
:data:`SNOOZE_HOURS`, whatever happens; once it lapses a later step alerts again. The DM
goes to the owner (bot.owners maps the cluster user to a Slack id per cluster, opened with
``conversations.open``); when nobody is mapped, or the DM
fails (``user_not_found``, ``not_in_channel``, 429 after retries), the alert goes to
``slack.channel`` naming the owner; if that fails too the episode is not opened, so the next
sweep tries again. An episode is keyed by cluster, job id and (Kubernetes) uid, so a Job
re-created under the same name alerts again; a SLURM id given to a later job (another submit
time, a requeue included: SLURM's record cannot tell the two apart) opens a new episode in
the old one's place; the posted message (channel, ts) is indexed to its
episode, which is what a button press is checked against. Buttons carry the job ref in
``value`` for readers, never as authority (``action_id`` is the same on every message). With
``no_kill``, or for an ``ablation-exempt`` / ``no-kill`` run, there is no cancel button: the
message is a recommendation with an ``acknowledge`` button, and (seed: "capture the evidence
that disappears at termination, record it, report it, and leave the job running") the evidence
a cancel would have salvaged is written as an incident before the DM, which names its file.
While Redis is down, a process
remembers its own episodes so it does not repeat itself; it cannot know about other replicas.
Alerts are evaluated after every scheduled sweep (the monitor), not after ``/jobs`` queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config
from bot.delivery import dm_channel, post
from bot.incidents import salvage_record, write_incident
from bot.messages import ACKNOWLEDGE, CANCEL, KEEP, SNOOZE, SNOOZE_HOURS, collapse_message
from bot.owners import slack_owner
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import job_facts
from probes.models import ACTIVE_STATES, ClusterFacts, JobFacts
from report.models import JobDetail

__all__ = ["ACKNOWLEDGE", "CANCEL", "KEEP", "SNOOZE", "Alerter", "closed_episode",
           "episode_name", "job_submitted", "job_uid", "message_key", "same_instance"]

log = structlog.get_logger(__name__)

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


def message_key(channel: str, ts: str) -> str:
    """The index from a posted alert (channel, ts) to its episode: what a press is checked on."""
    return f"message:{channel}:{ts}"


def cancel_forbidden(detail: JobDetail | None, config: Config) -> str | None:
    """Why the run must never be cancelled from Slack (``no_kill``, a ``no-kill`` or
    ``ablation-exempt`` run), or None when it may be."""
    if config.slack.no_kill:
        return "no_kill is set"
    flags = [f for f in ("no-kill", "ablation-exempt")
             if detail is not None and f in detail.report.flags]
    return f"the run is {', '.join(flags)}" if flags else None


def cancel_allowed(detail: JobDetail, config: Config) -> bool:
    """False when the run must never be cancelled from Slack (:func:`cancel_forbidden`)."""
    return cancel_forbidden(detail, config) is None


def needs_alert(detail: JobDetail) -> bool:
    return "collapse" in detail.report.flags and detail.report.state in ACTIVE_STATES


CONTINUED_SWEEPS = 3
"""How many sweep intervals a kept collapse may go unseen and still be the same collapse (a
sweep that failed, or a cluster unreachable once, does not make it a new one)."""

KNOWN_KEPT = 1000
"""How many episode records :class:`Alerter` remembers as last seen in Redis."""


class Alerter:
    """Sends collapse DMs for new episodes found in a sweep."""

    def __init__(
        self,
        *,
        store: RedisStore,
        client: AsyncWebClient,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self._local: dict[str, dict[str, Any]] = {}
        """Episodes this process opened, for when Redis is unavailable."""
        self._unsaved: dict[str, float] = {}
        """Episodes (with their TTLs) opened while Redis was down, kept here only: written
        back when it answers (:meth:`flush`), else the next sweep would DM them again and
        their buttons would find no episode."""
        self._known: dict[str, Any] = {}
        """Each episode record as this process last read it in Redis (what a write-back may
        replace): one another replica wrote or a press answered since is kept."""
        self.undelivered = 0
        """Collapses of the last :meth:`process` that Slack took no alert for (neither the
        DM nor the channel): their claims were given back, and the scheduler tries the
        sweep again soon (``bot.scheduler``)."""

    async def flush(self) -> None:
        """Write back the episodes opened while Redis was down, with their messages' index;
        called before each tick is claimed and each sweep's alerts; quiet while it is down.

        An episode goes back only over the record this process last saw (or none): one that
        another replica opened since Redis answered, and its owner perhaps answered, is
        newer; reopening it would silence the run's later collapses."""
        for name, ttl_s in list(self._unsaved.items()):
            record = self._local[name]
            try:
                written = await self._store.put_doc_if(name, record,
                                                       expected=self._known.get(name),
                                                       ttl_s=ttl_s)
                if record.get("channel") and record.get("ts"):
                    # This DM's buttons act on the job's episode, whichever record won.
                    await self._store.put_doc(message_key(record["channel"], record["ts"]),
                                              {"episode": name}, ttl_s=ttl_s, only_new=True)
            except StoreUnavailable:
                return
            self._unsaved.pop(name, None)
            if written:
                self._remember(name, record)
            else:
                self._known.pop(name, None)
                log.info("episode written since by another replica; kept", name=name)

    async def process(self, details: list[JobDetail], config: Config, *,
                      facts: Sequence[ClusterFacts] = ()) -> list[str]:
        """DM every new collapse episode in ``details``; return the refs alerted.

        ``facts`` (the sweep's raw facts) give a no-kill evidence record its full log tail.
        """
        await self.flush()
        sent = []
        self.undelivered = 0
        for detail in details:
            if needs_alert(detail) and await self._open_episode(detail, config, facts):
                sent.append(job_ref(detail))
        return sent

    async def _open_episode(self, detail: JobDetail, config: Config,
                            facts: Sequence[ClusterFacts]) -> bool:
        job = detail.report
        step = detail.collapse_step if detail.collapse_step is not None else (job.step or 0)
        live = job_facts(facts, job.cluster, job.job_id)
        uid = job_uid(live)
        name = episode_name(job.cluster, job.job_id, uid)
        claim = f"{name}:{step}"
        try:
            doc = await self._store.get_doc(name)
            self._remember(name, doc)
            if doc is not None and not same_instance(doc, live):
                # The id now names a later SLURM job (ids reset or wrapped): the episode was
                # another job's, so this collapse is a new one, claimed per instance (its
                # step may be the old one's). Its record replaces the old: the old alert's
                # buttons are then refused as replaced, as for a newer alert.
                doc, claim = None, f"{name}:{job_submitted(live)}:{step}"
            if doc is not None and self._continues(doc, config):
                # The answered collapse goes on: remembered as seen, nobody DMed again.
                seen = {**doc, "last_step": max(step, int(doc.get("last_step", step))),
                        "seen_at": self._clock().isoformat()}
                await self._store.put_doc(name, seen, ttl_s=self._ttl(config))
                self._remember(name, seen)
                return False
            if not self._is_new(doc, step):
                if doc and doc.get("state") == "open" and step > doc.get("last_step", step):
                    moved = {**doc, "last_step": step}
                    await self._store.put_doc(name, moved, ttl_s=self._ttl(config))
                    self._remember(name, moved)
                return False
            claimed = await self._store.put_doc(claim, {"by": "alerter"},
                                                ttl_s=self._ttl(config), only_new=True)
            if not claimed:
                return False
        except StoreUnavailable as exc:
            log.warning("episode state unavailable; using process memory", error=str(exc))
            doc = self._local.get(name)
            if doc is not None and not same_instance(doc, live):
                doc = None  # another job under the id (above)
            if not self._is_new(doc, step):
                return False
        evidence = None
        if not cancel_allowed(detail, config):
            evidence = await self._record_evidence(detail, facts, config)
        record = await self._send(detail, config, step, evidence)
        if record is None:
            # Nothing was delivered: give the claim back so the next sweep (or this one's
            # retry, soon) tries again.
            self.undelivered += 1
            try:
                await self._store.delete_doc(claim)
            except StoreUnavailable as exc:
                log.warning("alert claim kept; it expires by itself", error=str(exc))
            return False
        record = {**record, "uid": uid, "submitted": job_submitted(live), "name": name,
                  "job_name": detail.report.name}
        self._local[name] = record
        try:
            await self._store.put_doc(name, record, ttl_s=self._ttl(config))
            self._remember(name, record)
            if record.get("channel") and record.get("ts"):
                await self._store.put_doc(message_key(record["channel"], record["ts"]),
                                          {"episode": name}, ttl_s=self._ttl(config))
        except StoreUnavailable as exc:
            self._unsaved[name] = self._ttl(config)
            log.warning("episode not saved", ref=job_ref(detail), error=str(exc))
        return True

    def _remember(self, name: str, doc: Any) -> None:
        """``doc`` is what Redis holds for episode ``name`` now (the newest :data:`KNOWN_KEPT`
        names kept; one forgotten is written back only where Redis has none)."""
        self._known.pop(name, None)
        self._known[name] = doc
        if len(self._known) > KNOWN_KEPT:
            del self._known[next(iter(self._known))]

    def _continues(self, doc: dict[str, Any], config: Config) -> bool:
        """A kept or acknowledged episode whose run was still collapsing one of the last
        :data:`CONTINUED_SWEEPS` sweep intervals ago (seen by a sweep, or answered then)."""
        if doc.get("state") == "open" or doc.get("action") not in (KEEP, ACKNOWLEDGE):
            return False
        seen = doc.get("seen_at") or doc.get("closed_at")
        try:
            at = datetime.fromisoformat(str(seen))
        except ValueError:
            return False
        window = timedelta(minutes=CONTINUED_SWEEPS * config.slack.sweep_every_minutes)
        return bool(self._clock() - at <= window)

    def _is_new(self, doc: dict[str, Any] | None, step: int) -> bool:
        if doc is None:
            return True
        if doc.get("state") == "open":
            return False
        if doc.get("action") == SNOOZE:
            until = datetime.fromisoformat(doc.get("snoozed_until", "1970-01-01T00:00:00+00:00"))
            if self._clock() < until:
                return False
        return bool(step > int(doc.get("last_step", -1)))

    @staticmethod
    def _ttl(config: Config) -> float:
        return config.redis.expire_hours * 3600

    async def _record_evidence(self, detail: JobDetail, facts: Sequence[ClusterFacts],
                               config: Config) -> Path | None:
        """No cancel will salvage this run: write its evidence now (file, then Redis)."""
        job = detail.report
        record = salvage_record(detail, job_facts(facts, job.cluster, job.job_id),
                                history=detail.history, actor=None, at=self._clock())
        try:
            path = await asyncio.to_thread(write_incident, record,
                                           Path(config.slack.incident_dir))
        except OSError as exc:
            log.error("no-kill evidence not written", ref=job_ref(detail), error=str(exc))
            return None
        try:
            await self._store.put_doc(f"incident:{record.id}", record.model_dump(mode="json"),
                                      ttl_s=self._ttl(config))
        except StoreUnavailable as exc:
            log.warning("no-kill evidence kept on disk only", path=str(path), error=str(exc))
        return path

    async def _send(self, detail: JobDetail, config: Config, step: int,
                    evidence: Path | None = None) -> dict[str, Any] | None:
        """DM the owner; if that fails (or nobody is mapped), the channel, naming the owner."""
        job = detail.report
        owner = slack_owner(config, job.cluster, job.user)
        can_cancel = cancel_allowed(detail, config)
        path = str(evidence) if evidence else None
        posted = None
        delivered_for = None
        if owner is not None:
            channel = await dm_channel(self._client, owner)  # None: the channel gets it
            if channel is not None:
                message = collapse_message(detail, can_cancel=can_cancel, evidence_path=path)
                posted = await post(self._client, channel=channel, text=message.text,
                                    blocks=message.blocks)
        if posted is None and config.slack.channel:
            delivered_for = owner
            message = collapse_message(detail, can_cancel=can_cancel, evidence_path=path,
                                       delivered_for=owner)
            posted = await post(self._client, channel=config.slack.channel, text=message.text,
                                blocks=message.blocks)
        if posted is None:
            log.warning("collapse alert not delivered; retried next sweep", ref=job_ref(detail))
            return None
        return {
            "state": "open", "first_step": step, "last_step": step,
            "opened_at": self._clock().isoformat(), "cluster": job.cluster, "job_id": job.job_id,
            "user": job.user, "owner": owner, "channel": posted.get("channel"),
            "ts": posted.get("ts"), "can_cancel": can_cancel, "evidence": path,
            "delivered_for": delivered_for,
        }


def closed_episode(doc: dict[str, Any], *, action: str, actor: str, at: datetime) -> dict[str, Any]:
    """The episode record after someone acted on it."""
    closed = {**doc, "state": "closed", "action": action, "closed_by": actor,
              "closed_at": at.isoformat()}
    if action == SNOOZE:
        closed["snoozed_until"] = (at + timedelta(hours=SNOOZE_HOURS)).isoformat()
    return closed
