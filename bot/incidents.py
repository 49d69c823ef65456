"""Incident records: salvage evidence before a cancel, and dated entries for genuine failures.

Policy: an incident is one JSON file under ``slack.incident_dir/<YYYY-MM-DD>/`` written
atomically (temp file, then rename), and the same document in Redis. A salvage record holds
what disappears when a job is terminated (log tail, metric window, banked step, scheduler
record) and is written before the cancel is sent. A genuine failure (verdict ``failed``) gets
one entry per job with its diagnosis and the judge's failure signature
(:class:`report.models.FailureSignature`, the same model the sweep memory keeps). The entry is
``recurring`` exactly when the judge flagged ``recurring-failure`` (:mod:`report.memory` decides
it, once), and ``previous`` then lists the incidents of the earlier attempts it repeats.
Completed jobs are not incidents: they get their cleanup routine named.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict

from bot.cluster_names import remembered, renames
from bot.config import Config
from bot.store import RedisStore, StoreUnavailable
from probes.ids import scheduler_job
from probes.models import JobFacts, MetricPoint, SchedulerRecord
from report.cells import one_line
from report.chunks import no_backticks, unformatted
from report.models import (
    FailureSignature,
    JobDetail,
    JobReport,
    Recommendation,
    SignalEvidence,
)

if TYPE_CHECKING:
    from bot.sweep_result import SweepResult

log = structlog.get_logger(__name__)

LOG_TAIL_LINES = 400
"""Log lines kept in a salvage record: enough to see the collapse and the trace after it. They
come from the lines a job keeps of its tail (``LogFetch.text``: the last 400 within 16 KiB,
``probes.logs.excerpt``), so long lines give fewer."""


class IncidentRecord(BaseModel):
    """One incident file's content."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: Literal["salvage", "failure"]
    at: datetime
    cluster: str
    job_id: str
    name: str
    user: str | None
    bucket: str
    state: str
    actor: str | None = None
    """Slack user id that asked for the cancel (salvage records); ``None`` when the bot
    captured the evidence itself because a no-kill rule leaves the job running."""
    diagnosis: str | None = None
    signature: FailureSignature | None = None
    """The judge's signature of this failure (failure records)."""
    recurring: bool = False
    """The judge flagged ``recurring-failure``: the same failure as the previous attempt."""
    previous: tuple[str, ...] = ()
    """Incident ids of the earlier attempts this one repeats, oldest first."""
    flags: tuple[str, ...] = ()
    recommendation: Recommendation | None = None
    banked_step: int | None = None
    collapse_step: int | None = None
    log_path: str | None = None
    log_tail: str = ""
    metric_window: tuple[MetricPoint, ...] = ()
    evidence: tuple[SignalEvidence, ...] = ()
    scheduler_record: SchedulerRecord | None = None


def incident_id(kind: str, cluster: str, job_id: str, at: datetime) -> str:
    """The incident's id, also its file's name: a JobSet's qualified id ``jobset/<name>``
    is written ``jobset_<name>`` there (no Kubernetes name or SLURM id holds ``_`` after a
    letter), so the file stays in the day's directory."""
    return f"{at:%Y%m%dT%H%M%SZ}-{cluster}-{job_id.replace('/', '_')}-{kind}"


def log_tail(facts: JobFacts | None, detail: JobDetail) -> str:
    """The last lines of the log the sweep read (the detail's excerpt if the facts have none)."""
    text = facts.log.text if facts and facts.log and facts.log.text else detail.log_excerpt
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def salvage_record(
    detail: JobDetail,
    facts: JobFacts | None,
    *,
    history: tuple[MetricPoint, ...],
    actor: str | None,
    at: datetime,
) -> IncidentRecord:
    """Everything that would be lost at termination, captured just before the cancel (or, under
    no-kill, when the collapse is reported: nobody will cancel, so nobody would salvage it)."""
    job = detail.report
    return IncidentRecord(
        **_job_fields("salvage", detail, facts, at),
        actor=actor,
        diagnosis=job.recommendation.why if job.recommendation else None,
        collapse_step=detail.collapse_step,
        metric_window=history or detail.history,
        evidence=detail.evidence,
    )


def _job_fields(kind: str, detail: JobDetail, facts: JobFacts | None, at: datetime,
                ) -> dict[str, Any]:
    """What every incident records about its job, whatever the kind."""
    job = detail.report
    return {
        "id": incident_id(kind, job.cluster, job.job_id, at), "kind": kind, "at": at,
        "cluster": job.cluster, "job_id": job.job_id, "name": job.name, "user": job.user,
        "bucket": job.bucket, "state": str(job.state), "flags": tuple(job.flags),
        "recommendation": job.recommendation, "banked_step": job.banked_step,
        "log_path": job.log_path, "log_tail": log_tail(facts, detail),
        "scheduler_record": facts.record if facts else None,
    }


def diagnose(detail: JobDetail) -> str:
    """One line saying why the job failed: the recommendation, else the first fault, else trend."""
    rec = detail.report.recommendation
    if rec is not None and rec.action == "diagnose" and rec.why:
        return rec.why
    if detail.faults:
        return detail.faults[0]
    return detail.report.trend or f"{detail.report.state} with no diagnosis in the log"


def failure_record(
    detail: JobDetail,
    facts: JobFacts | None,
    *,
    at: datetime,
    previous: tuple[str, ...] = (),
) -> IncidentRecord:
    return IncidentRecord(
        **_job_fields("failure", detail, facts, at),
        diagnosis=diagnose(detail),
        signature=detail.failure,
        recurring="recurring-failure" in detail.report.flags,
        previous=previous,
        metric_window=detail.history,
    )


def write_incident(record: IncidentRecord, directory: Path) -> Path:
    """Write ``record`` as ``<directory>/<date>/<id>.json`` atomically; return the path."""
    day = directory / f"{record.at:%Y-%m-%d}"
    day.mkdir(parents=True, exist_ok=True)
    target = day / f"{record.id}.json"
    fd, tmp = tempfile.mkstemp(dir=day, prefix=".incident-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(record.model_dump_json(indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def cleanup_line(job: JobReport) -> str | None:
    """``<job> completed: run <routine>`` for a completed job with a cleanup recommendation."""
    rec = job.recommendation
    if job.state != "COMPLETED" or rec is None or rec.action != "cleanup":
        return None
    # Escaped for mrkdwn where they are sent; no backtick of theirs may pair with a span.
    return (f"✅ `{no_backticks(one_line(f'{job.cluster}:{job.job_id}'))}` "
            f"{unformatted(one_line(job.name))} completed: {unformatted(rec.why)}")


def failure_line(job: JobReport, diagnosis: str | None, again: str, path: str) -> str:
    """``🔥 <ref> <job> failed: <diagnosis> · <incident file>`` for the sweep thread. Escaped
    for mrkdwn where it is sent; the name, diagnosis and path carry no backtick that could
    pair with the line's own spans (a job named ``a`b``, a fault quoting ```x``)."""
    ref = no_backticks(one_line(f"{job.cluster}:{job.job_id}"))
    return (f"🔥 `{ref}` {unformatted(one_line(job.name))} failed: "
            f"{unformatted(f'{diagnosis}{again}')} · `{no_backticks(one_line(path))}`")


@dataclass(frozen=True)
class _Entry:
    """A follow-up: a failure filed (its diagnosis and incident file) or a cleanup (None)."""

    job: JobReport
    diagnosis: str | None
    path: str | None


FOLD_IDS_SHOWN = 3


def _task_order(job_id: str) -> tuple[str, int, str]:
    """An array's tasks by number (``7000_2`` before ``7000_10``), other ids as they sort."""
    task = job_id.partition("_")[2]
    return scheduler_job(job_id), int(task) if task.isdigit() else -1, job_id


def folded_lines(entries: Sequence[_Entry]) -> list[str]:
    """One line per follow-up, the tasks of one array (one hetjob) with the same name and the
    same diagnosis (or cleanup) folded into one: 60 shards dying of one full disk are one line
    naming how many and a few ids, not 60 lines over three thread replies."""
    groups: dict[tuple[str, str, str, str | None, str | None], list[_Entry]] = {}
    for entry in sorted(entries, key=lambda e: (e.job.cluster, *_task_order(e.job.job_id))):
        job = entry.job
        why = job.recommendation.why if job.recommendation else None
        key = (job.cluster, scheduler_job(job.job_id), one_line(job.name), entry.diagnosis,
               None if entry.diagnosis is not None else why)
        groups.setdefault(key, []).append(entry)
    lines = []
    for members in groups.values():
        first = members[0]
        if first.diagnosis is None:
            line = cleanup_line(first.job) or ""
        else:
            line = failure_line(first.job, first.diagnosis, "", first.path or "")
        if len(members) > 1:
            ids = [m.job.job_id for m in members]
            shown = ", ".join(ids[:FOLD_IDS_SHOWN]) + (
                f" +{len(ids) - FOLD_IDS_SHOWN} more" if len(ids) > FOLD_IDS_SHOWN else "")
            name = no_backticks(one_line(first.job.name))
            line = line.replace(f" {name} ", f" {name} ×{len(members)} ({shown}) ", 1)
            if first.path:
                line += f" (+{len(members) - 1} more incident files beside it)"
        lines.append(line)
    return lines


class FollowUps:
    """After a scheduled sweep: file new failures (once per job) and name cleanups (once)."""

    def __init__(self, *, store: RedisStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock
        self.told: set[tuple[str, str]] = set()
        """The jobs (cluster, id) the last :meth:`process` gave a line (the thread's change
        reply then leaves out their 'failed' or 'finished' bullet, which says less)."""

    async def process(self, result: SweepResult, config: Config) -> list[str]:
        """Lines for the sweep thread; empty while Redis is down (they come on a later sweep).
        Tasks of one array that failed alike (or completed with one routine) share a line
        (:func:`folded_lines`): each still has its own incident file."""
        ttl = config.redis.expire_hours * 3600
        entries: list[_Entry] = []
        renamed = renames(await remembered(self._store), config)
        try:
            for (cluster, job_id), detail in sorted(result.details.items()):
                olds = [old for old, new in renamed.items() if new == cluster]
                if detail.report.verdict == "failed":
                    if await self._store.get_doc(_filed_key(cluster, job_id)) is None and (
                        not await self._carried(_filed_key, cluster, job_id, olds, ttl * 4)
                    ) and (filed := await self._file_failure(
                            detail, result.job_facts(cluster, job_id), config)):
                        entries.append(_Entry(detail.report, *filed))
                elif cleanup_line(detail.report) and not await self._carried(
                    _done_key, cluster, job_id, olds, ttl
                ) and await self._store.put_doc(
                    _done_key(cluster, job_id), True, ttl_s=ttl, only_new=True
                ):
                    entries.append(_Entry(detail.report, None, None))
        except StoreUnavailable as exc:
            log.warning("follow-ups postponed: Redis unavailable", error=str(exc))
        self.told = {(e.job.cluster, e.job.job_id) for e in entries}
        return folded_lines(entries)

    async def _carried(self, key: Callable[[str, str], str], cluster: str, job_id: str,
                       olds: Sequence[str], ttl_s: float) -> bool:
        """Whether the job's follow-up was told under an old name of its cluster (renamed in
        the config, :mod:`bot.cluster_names`); if so it is marked under the new name too."""
        for old in olds:
            told = await self._store.get_doc(key(old, job_id))
            if told is not None:
                await self._store.put_doc(key(cluster, job_id), told, ttl_s=ttl_s,
                                          only_new=True)
                return True
        return False

    async def _file_failure(self, detail: JobDetail, facts: JobFacts | None,
                            config: Config) -> tuple[str, str] | None:
        """File the failure once: its diagnosis (recurrence said) and incident file; ``None``
        when another replica filed it first."""
        ttl = config.redis.expire_hours * 3600
        job = detail.report
        previous = await self._previous(job, detail.repeats) if detail.repeats else ()
        record = failure_record(detail, facts, at=self._clock(), previous=previous)
        # Filed once per job: the key names this job's incident, which a later attempt that
        # repeats this failure reads to point back at it. It outlives one run's TTL because
        # recurrence spans attempts.
        if not await self._store.put_doc(_filed_key(job.cluster, job.job_id), record.id,
                                         ttl_s=ttl * 4, only_new=True):
            return None
        path = await asyncio.to_thread(write_incident, record, Path(config.slack.incident_dir))
        await self._store.put_doc(f"incident:{record.id}", record.model_dump(mode="json"),
                                  ttl_s=ttl * 4)
        again = f" — recurring-failure (same as {previous[-1]})" if record.recurring and previous \
            else (" — recurring-failure" if record.recurring else "")
        return f"{record.diagnosis}{again}", str(path)

    async def _previous(self, job: JobReport, repeats: FailureSignature) -> tuple[str, ...]:
        """The incident chain of the attempt ``job`` repeats (empty if it was never filed)."""
        earlier = await self._store.get_doc(_filed_key(job.cluster, repeats.job_id))
        if not isinstance(earlier, str):
            return ()  # that attempt failed before the bot watched it, or a pre-upgrade entry
        doc = await self._store.get_doc(f"incident:{earlier}")
        chain = doc.get("previous") if isinstance(doc, dict) else None
        before = tuple(str(i) for i in chain) if isinstance(chain, list) else ()
        return (*before, earlier)


def _done_key(cluster: str, job_id: str) -> str:
    """The Redis doc marking a job's cleanup line as told."""
    return f"seen-done:{cluster}:{job_id}"


def _filed_key(cluster: str, job_id: str) -> str:
    """The Redis doc holding the id of the failure incident filed for a job."""
    return f"seen-failure:{cluster}:{job_id}"
