"""Collapse warnings: one alert per collapse episode, with the evidence and the action buttons.

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
An episode's keys, its job instance and its closing live in ``bot.episodes``; how a sweep's
alerts are batched per recipient, posted and recorded, in ``bot.alert_delivery`` (the
:class:`Alerter`'s base). The scheduler sends them before the period's tables
(``bot.scheduled.scheduled_sweep``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.alert_delivery import AlertDelivery, _Pending
from bot.cluster_names import note_names
from bot.config import Config
from bot.episodes import (  # and what importers read from here (__all__)
    UID_LABEL,
    alert_index,
    cancel_allowed,
    cancel_forbidden,
    closed_episode,
    episode_name,
    job_ref,
    job_submitted,
    job_uid,
    message_key,
    needs_alert,
    pressed_episode,
    same_instance,
)
from bot.incidents import salvage_record, write_incident
from bot.messages import ACKNOWLEDGE, CANCEL, KEEP, SNOOZE
from bot.owners import slack_owner
from bot.store import RedisStore, StoreUnavailable
from bot.sweep_result import job_facts
from probes.models import ClusterFacts, JobFacts
from report.models import JobDetail, JobReport

__all__ = ["ACKNOWLEDGE", "CANCEL", "KEEP", "SNOOZE", "UID_LABEL", "Alerter", "alert_index",
           "cancel_allowed", "cancel_forbidden", "closed_episode", "episode_name",
           "job_submitted", "job_uid", "message_key", "pressed_episode", "same_instance"]


log = structlog.get_logger(__name__)


CONTINUED_SWEEPS = 3
"""How many sweep intervals a kept collapse may go unseen and still be the same collapse (a
sweep that failed, or a cluster unreachable once, does not make it a new one)."""

KNOWN_KEPT = 1000
"""How many episode records :class:`Alerter` remembers as last seen in Redis."""


class Alerter(AlertDelivery):
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
        self.by_dm: set[str] = set()
        """The refs of the last :meth:`process` whose alert reached the owner as a DM (the
        others went to the channel): the thread line then names them without a ping."""

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
                    await self._store.put_doc(alert_index(record), {"episode": name},
                                              ttl_s=ttl_s, only_new=True)
                    if record.get("batched"):
                        await self._mark_batch(record, ttl_s, only_new=True)
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

        Each new episode is claimed first (one alert per episode, across replicas and
        retries); then each recipient's new alerts of the sweep are sent together: one alert
        alone as ever, several as one batched message (split where Slack's limits force it,
        :func:`bot.alert_messages.collapse_batch_messages`), each job with its own buttons, bound to
        its own episode. ``facts`` (the sweep's raw facts) give a no-kill evidence record its
        full log tail.
        """
        await self.flush()
        self.undelivered = 0
        self.by_dm = set()
        claimed: list[_Pending] = []
        renamed = await note_names(self._store, config)
        try:
            for detail in details:
                if needs_alert(detail):
                    pending = await self._claim(detail, config, facts, renamed)
                    if pending is not None:
                        claimed.append(pending)
        except asyncio.CancelledError:  # none sent yet: the next sweep alerts them
            for pending in claimed:
                await self._give_back(pending)
            raise
        delivered = await self._deliver(claimed, config)
        return [job_ref(p.detail) for p in claimed if p.name in delivered]

    async def _claim(self, detail: JobDetail, config: Config, facts: Sequence[ClusterFacts],
                     renamed: Mapping[str, str] | None = None) -> _Pending | None:
        """The new episode of ``detail``'s collapse, claimed (and its no-kill evidence
        written), or None when there is none to alert."""
        job = detail.report
        step = detail.collapse_step if detail.collapse_step is not None else (job.step or 0)
        live = job_facts(facts, job.cluster, job.job_id)
        uid = job_uid(live)
        name = episode_name(job.cluster, job.job_id, uid)
        claim = f"{name}:{step}"
        try:
            doc = await self._store.get_doc(name)
            if doc is None and renamed:
                # The cluster was renamed in the config: the episode goes on under the name
                # it was opened with (its alert's buttons name it), not as a new one.
                name, doc = await self._opened_as(name, job, uid, live, renamed)
                claim = f"{name}:{step}"
            self._remember(name, doc)
            if doc is not None and not same_instance(doc, live):
                # The id now names a later SLURM job (ids reset or wrapped): the episode was
                # another job's, so this collapse is a new one, claimed per instance (its
                # step may be the old one's). Its record replaces the old: the old alert's
                # buttons are then refused as replaced, as for a newer alert.
                doc, claim = None, f"{name}:{job_submitted(live)}:{step}"
            if await self._known_episode(name, doc, step, config):
                return None
            claimed = await self._store.put_doc(claim, {"by": "alerter"},
                                                ttl_s=self._ttl(config), only_new=True)
            if not claimed:
                return None
        except StoreUnavailable as exc:
            log.warning("episode state unavailable; using process memory", error=str(exc))
            doc = self._local.get(name)
            if doc is not None and not same_instance(doc, live):
                doc = None  # another job under the id (above)
            if not self._is_new(doc, step):
                return None
        evidence = None
        if not cancel_allowed(detail, config):
            evidence = await self._record_evidence(detail, facts, config)
        return _Pending(detail=detail, name=name, claim=claim, step=step, uid=uid,
                        submitted=job_submitted(live), evidence=evidence,
                        can_cancel=cancel_allowed(detail, config),
                        owner=slack_owner(config, job.cluster, job.user))

    async def _known_episode(self, name: str, doc: dict[str, Any] | None, step: int,
                             config: Config) -> bool:
        """True when the stored episode ``doc`` already covers the collapse at ``step`` (an
        answered one going on, or one alerted at that step or later): its record brought up
        to date, nothing to alert."""
        if doc is not None and self._continues(doc, config):
            # The answered collapse goes on: remembered as seen, nobody DMed again.
            seen = {**doc, "last_step": max(step, int(doc.get("last_step", step))),
                    "seen_at": self._clock().isoformat()}
            await self._store.put_doc(name, seen, ttl_s=self._ttl(config))
            self._remember(name, seen)
            return True
        if not self._is_new(doc, step):
            if doc and doc.get("state") == "open" and step > doc.get("last_step", step):
                moved = {**doc, "last_step": step}
                await self._store.put_doc(name, moved, ttl_s=self._ttl(config))
                self._remember(name, moved)
            return True
        return False

    async def _opened_as(self, name: str, job: JobReport, uid: str | None,
                         live: JobFacts | None, renamed: Mapping[str, str]) -> tuple[str, Any]:
        """This job's episode under an old name of its cluster (``renamed``: old -> new), if
        one is stored for the same instance; else ``name`` and no episode."""
        for old, new in renamed.items():
            if new == job.cluster:
                before = episode_name(old, job.job_id, uid)
                doc = await self._store.get_doc(before)
                if isinstance(doc, dict) and same_instance(doc, live):
                    return before, doc
        return name, None

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
