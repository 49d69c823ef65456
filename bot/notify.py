"""Job-end DMs to the job's owner: failed, completed, stalled / zombie; ``/jobs notify on|off``.

Policy: the DMs follow the scheduled sweep's changes (:func:`report.changes.diff`), which are
computed once per interval by the replica that won the tick, so each end is told once, also
across restarts and replicas. The owner comes from the one per-cluster owner lookup
(:func:`bot.owners.slack_owner`); a job without a mapped owner gets no DM (the day's thread
still has it). What each DM says (built by :func:`bot.alert_messages.job_end_dm`):

* ``failed``: the first real fault (traceback, OOM, ...; a time limit is not one), the trend
  line (for ``child-failed`` the first real traceback above the elastic summary), and the
  recommendation;
* ``finished``: the completion, and the recommendation, which names the cleanup routine;
* ``stalled``: stall or zombie, with the trend and the recommendation.

An array's (a hetjob's) completed tasks are told when none of its tasks is pending or running
any more, in one DM counting every task the sweep lists completed: a grid run in waves
completes once, not once a wave (a failure is told at once).
One owner's job ends of a sweep are one DM (split only past Slack's text limit, each job's
text whole): a grid's cells ending together ping once, not once each.
Tasks of one array (or components of one hetjob) that ended the same way are told as one (``×N``);
the faults of those among them that failed otherwise are quoted in it too, with their ids
(alike ones together, a few quoted, the rest counted): one DM per array, and no task's fault
hidden. Jobs that only share a name are told apart.
A job's stall is DMed once in :data:`STALL_DM_QUIET_HOURS` (``doc:notify:stalled:{cluster}:
{job}``): a run whose results trickle in reads stalled and recovered by turns, and each turn
is a change; the owner hears of it once, not at every turn (so does the day's thread:
``bot.repeats``).
Job-end DMs are asked for: only an owner who typed ``/jobs notify on`` gets them (the day's
thread tells every end; a ping nobody asked for is what gets a bot muted). The choice is kept
per Slack user in Redis (``doc:notify:{user}``, a year's TTL, renewed by every change of mind);
``off`` is the default, and while Redis cannot say, no DM goes (the thread still tells it). A
collapse alert is no job-end DM: it reaches the owner whatever they chose. A failed DM is
logged and counted once by the Web API client (:mod:`bot.delivery`) and never stops the
others; the day's thread already tells the change. A DM Slack will never take
(``bot.slack_errors.PERMANENT_ERRORS``: the DM closed to apps, the user deactivated) is
dropped at once. A DM Slack refused for now is kept
(:attr:`Notifier.undelivered`): the scheduler tries the sweep again soon (``bot.scheduler``),
and that retry sends it first; a DM the retry could not send either (Slack down across
both) is sent by the sweeps after it while it is younger than
``bot.digest_posting.UNDELIVERED_KEPT_S`` (kept in Redis, ``notify:undelivered``, for
whichever replica sweeps next): no later diff tells that end again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from bot.alert_messages import fault_kinds, job_end_dm, job_end_dms
from bot.config import Config
from bot.delivery import open_dm, post
from bot.digest_posting import UNDELIVERED_KEPT_S
from bot.landed import landed, post_key, tagged
from bot.owners import slack_owner
from bot.slack_errors import Refusal
from bot.store import RedisStore, StoreUnavailable
from bot.sweep_result import SweepResult
from probes.ids import scheduler_job
from probes.models import ACTIVE_STATES, JobState
from report.changes import Change
from report.grouping import pending_task_counts

log = structlog.get_logger(__name__)

TOLD = frozenset({"failed", "finished", "stalled"})
UNDELIVERED_DMS = "notify:undelivered"
"""The job-end DMs Slack refused, for the next sweep of any replica."""
PREF_TTL_S = 365 * 24 * 3600.0
STALL_DM_QUIET_HOURS = 24.0
"""A job's stall is DMed at most once in this long (the thread tells it as seldom:
``bot.repeats.QUIET_HOURS``)."""


def pref_name(user: str) -> str:
    return f"notify:{user}"


def _arrays_running(result: SweepResult) -> set[tuple[str, str]]:
    """The arrays (and hetjobs) with a task still pending or running in the sweep."""
    remainders = pending_task_counts(result.facts)  # an unsplit pending remainder: the id
    return {(j.cluster, scheduler_job(j.job_id)) for j in result.report.jobs
            if j.state in ACTIVE_STATES and (scheduler_job(j.job_id) != j.job_id
                                             or (j.cluster, j.job_id) in remainders)}


def _completed_tasks(result: SweepResult, change: Change) -> int:
    """How many tasks of ``change``'s array the sweep lists COMPLETED."""
    run = scheduler_job(change.job_id)
    return sum(1 for j in result.report.jobs if j.cluster == change.cluster
               and scheduler_job(j.job_id) == run and j.job_id != run
               and j.state is JobState.COMPLETED)


class Notifier:
    """Sends job-end DMs and keeps each user's on/off choice."""

    def __init__(self, *, store: RedisStore, client: AsyncWebClient,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self._pending: list[tuple[str, str, datetime]] = []
        """The DMs Slack refused: (owner, text, first refused), for the retry and the sweeps
        after it (:data:`~bot.digest_posting.UNDELIVERED_KEPT_S`), also kept in Redis."""
        self._unsaved = False
        """Whether :attr:`_pending` could not be written to Redis (Redis down)."""

    @property
    def undelivered(self) -> bool:
        """Whether the last :meth:`process` left a DM unsent (its retry sends it)."""
        return bool(self._pending)

    async def set_enabled(self, user: str, on: bool) -> str:
        """``/jobs notify on|off``: store the choice; the ephemeral answer."""
        try:
            await self._store.put_doc(pref_name(user), {"off": not on}, ttl_s=PREF_TTL_S)
        except StoreUnavailable as exc:
            log.warning("notify preference not saved", user=user, error=str(exc))
            return "⚠️ The bot's state store is unavailable; your choice was not saved."
        return ("Job-end DMs are *on*: you will hear when your jobs fail, complete or stall."
                if on else "Job-end DMs are *off*. `/jobs notify on` turns them back on.")

    async def enabled(self, user: str) -> bool:
        """Whether ``user`` asked for job-end DMs (``/jobs notify on``, not turned off since)."""
        try:
            doc = await self._store.get_doc(pref_name(user))
        except StoreUnavailable:
            return False  # the thread tells every end; a DM is for those known to want it
        return isinstance(doc, dict) and doc.get("off") is False

    async def process(self, changes: Sequence[Change], result: SweepResult,
                      config: Config, *, retry: bool = False) -> int:
        """DM the owners of jobs that failed, completed or stalled; returns the DMs sent.
        ``retry``: the sweep tries a failed one again: the DMs Slack refused go first."""
        now = self._clock()
        pending, self._pending = self._pending, []
        if not retry:  # what any replica (this one before a restart too) left in Redis
            stored = await self._stored_undelivered()
            if stored is not None and not self._unsaved:
                pending = stored  # an entry gone from it was delivered since
            else:
                pending = list({(u, t, a.isoformat()): (u, t, a) for u, t, a in
                                [*pending, *(stored or [])]}.values())
        kept = [(user, text, at) for user, text, at in pending
                if retry or (now - at).total_seconds() <= UNDELIVERED_KEPT_S]
        sent = 0
        for user, text, at in kept:
            sent += await self._send(user, text, refused_at=at)
        try:
            sent += await self._process(changes, result, config)
        finally:
            await self._save_undelivered()
        return sent

    async def _stored_undelivered(self) -> list[tuple[str, str, datetime]] | None:
        """The DMs kept in Redis; ``None`` while Redis cannot say."""
        try:
            doc = await self._store.get_doc(UNDELIVERED_DMS)
        except StoreUnavailable:
            return None
        kept: list[tuple[str, str, datetime]] = []
        for entry in doc if isinstance(doc, list) else []:
            with suppress(KeyError, TypeError, ValueError):
                kept.append((str(entry["owner"]), str(entry["text"]),
                             datetime.fromisoformat(entry["at"])))
        return kept

    async def _save_undelivered(self) -> None:
        """The DMs still refused, in Redis for whichever replica sweeps next."""
        entries = [{"owner": owner, "text": text, "at": at.isoformat()}
                   for owner, text, at in self._pending]
        try:
            if entries:
                await self._store.put_doc(UNDELIVERED_DMS, entries, ttl_s=UNDELIVERED_KEPT_S)
            else:
                await self._store.delete_doc(UNDELIVERED_DMS)
        except StoreUnavailable as exc:
            self._unsaved = True
            log.warning("undelivered DMs kept in process memory only", error=str(exc))
        else:
            self._unsaved = False

    async def _process(self, changes: Sequence[Change], result: SweepResult,
                       config: Config) -> int:
        """This sweep's own job-end DMs (:meth:`process`)."""
        sent = 0
        groups: dict[tuple[str, str, str, str], list[Change]] = {}
        running = _arrays_running(result)
        for change in changes:
            detail = result.details.get((change.cluster, change.job_id))
            owner = (slack_owner(config, change.cluster, detail.report.user) if detail
                     else None)
            if change.kind in TOLD and owner:
                if change.kind == "stalled" and not await self._stall_untold(change):
                    continue
                if change.kind == "finished" and (
                        change.cluster, scheduler_job(change.job_id)) in running:
                    continue  # told once the array's last task is done
                key = (owner, change.kind, change.cluster, scheduler_job(change.job_id))
                groups.setdefault(key, []).append(change)
        told: dict[str, list[str]] = {}
        for (owner, _, _, _), members in groups.items():
            first = members[0]
            detail = result.details[(first.cluster, first.job_id)]
            kinds = fault_kinds([result.details[(m.cluster, m.job_id)] for m in members])
            count = sum(m.tasks for m in members)  # an unsplit array remainder: its tasks
            if first.kind == "finished":  # an array's tasks done in earlier waves too
                count = max(count, _completed_tasks(result, first))
            told.setdefault(owner, []).append(
                job_end_dm(first, detail, count, others=kinds[1:]).text)
        for owner, texts in told.items():
            if not await self.enabled(owner):
                continue
            for text in job_end_dms(texts):  # one ping per owner and sweep
                sent += await self._send(owner, text)
        return sent

    async def _stall_untold(self, change: Change) -> bool:
        """Whether ``change``'s stall is DMed: not when the job's last stall DM is younger
        than :data:`STALL_DM_QUIET_HOURS` (the clock's time, kept in Redis); marked now."""
        name = f"notify:stalled:{change.cluster}:{change.job_id}"
        now = self._clock()
        try:
            marked = _marked_at(await self._store.get_doc(name))
            if marked is not None and now - marked < timedelta(hours=STALL_DM_QUIET_HOURS):
                return False
            await self._store.put_doc(name, {"at": now.isoformat()},
                                      ttl_s=STALL_DM_QUIET_HOURS * 3600 * 2)
        except StoreUnavailable:
            return True  # a DM too many beats a silent stall
        return True

    async def _send(self, owner: str, text: str, *, refused_at: datetime | None = None) -> int:
        at = refused_at or self._clock()
        key = post_key(text, None, at)  # in its metadata: found if it landed unanswered
        channel = await open_dm(self._client, owner)
        if not isinstance(channel, Refusal) and refused_at is not None and \
                await landed(self._client, channel, key):
            return 1  # sent on an earlier try whose answer never came
        sent = channel if isinstance(channel, Refusal) else await post(
            self._client, channel=channel, text=text, metadata=tagged(key))
        if not isinstance(sent, Refusal):
            return 1
        # Logged and counted by the Web API client (bot.delivery): kept for the retry, unless
        # Slack will never take it (the DM closed to apps, the user deactivated, the token).
        if sent.permanent:
            log.warning("job-end DM dropped: Slack will not take it", owner=owner,
                        error=sent.error)
        else:
            self._pending.append((owner, text, at))
        return 0


def _marked_at(doc: object) -> datetime | None:
    """A stall mark's time, or None when the document holds no aware ISO time (written by
    hand, by another version, cut): no mark then, so the stall is told and marked anew
    rather than the sweep's job-end DMs failing on it."""
    at = doc.get("at") if isinstance(doc, dict) else None
    try:
        marked = datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        return None
    return marked if marked is not None and marked.tzinfo is not None else None
