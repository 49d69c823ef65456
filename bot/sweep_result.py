"""What one sweep (or one-job query) answers: the report, each job's detail and raw facts.

Policy: a :class:`SweepResult` is immutable and shared: the CLI renders it, the bot caches,
posts and alerts from it, buttons and ``/job`` look jobs up in it. A job is found by
``[cluster:]job_id``; an id on several clusters with none named is a usage error, never a
guess; an id not simply there (an array's tasks, an unreadable cluster beside it) is resolved
by ``bot.sweep_lookup``, imported only on those paths. A cached sweep keeps no raw facts, so
:meth:`SweepResult.job_facts` may answer ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from bot.errors import UsageError
from probes.models import ClusterFacts, JobFacts

if TYPE_CHECKING:
    from report.models import JobDetail, Report


@dataclass(frozen=True)
class SweepResult:
    report: Report
    details: dict[tuple[str, str], JobDetail]
    facts: tuple[ClusterFacts, ...]
    started_at: datetime
    duration_s: float
    degraded: str | None = None
    refused: Mapping[str, str] = field(default_factory=dict)
    """A one-job query's clusters that cannot hold its id (a name on SLURM), and why."""

    def find(self, cluster: str | None, job_id: str) -> JobDetail:
        """The job ``[cluster:]job_id``, or :class:`JobNotFoundError` (:class:`UsageError` when
        the id is on several clusters and none was named)."""
        hits = [d for (c, j), d in self.details.items()
                if j == job_id and (cluster is None or c == cluster)]
        if not hits or any(j.startswith((f"{job_id}_", f"{job_id}+")) for _, j in self.details):
            # An array's (hetjob's) own id: its worst task, its pending remainder among them.
            from bot.sweep_lookup import array_tasks, not_found

            hits = array_tasks(self.details, cluster, job_id, hits)
            if not hits:
                raise not_found(self, cluster, job_id)
        unread = [] if cluster else [c for c in self.report.clusters
                                     if c.status == "unreachable"]
        if len(hits) > 1:
            clusters = ", ".join(sorted(d.report.cluster for d in hits))
            also = "".join(f"; cluster {c.name!r} could not be read" for c in unread)
            raise UsageError(f"job {job_id} exists on several clusters ({clusters}{also}):"
                             f" use CLUSTER:{job_id}")
        if not unread:
            return hits[0]
        from bot.sweep_lookup import unread_beside

        return unread_beside(hits[0], job_id, unread)


    def job_facts(self, cluster: str, job_id: str) -> JobFacts | None:
        """The raw facts of one job (``None`` for a cached sweep, which keeps none)."""
        return job_facts(self.facts, cluster, job_id)


def job_facts(facts: Sequence[ClusterFacts], cluster: str, job_id: str) -> JobFacts | None:
    """The raw facts of job ``cluster:job_id`` among a sweep's clusters, if it is there."""
    for cluster_facts in facts:
        if cluster_facts.name == cluster:
            for job in cluster_facts.jobs:
                if job.record.job_id == job_id:
                    return job
    return None
