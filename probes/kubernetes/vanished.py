"""Jobs gone from the Kubernetes API since a sweep saw them active: a silent wedge.

Policy (seed: a record that disappeared is terminal): a workload active last sweep that no
object of its kind and name answers for now is reported once as :data:`VANISHED` (FAILED, zero
pods, the ``jobtables/silent-wedge`` marker), and kept in the report as it was first reported
until ``recent_hours`` after that end, as a terminated job stays; one that ended first
(garbage-collected by ``ttlSecondsAfterFinished``) or was cancelled through the bot is no
wedge; a name listed again is a new job. :class:`VanishedJobs` is the half of
:class:`probes.kubernetes.probe.KubernetesProbe` that keeps this bookkeeping, and hands it to a
probe in another process (:meth:`VanishedJobs.remembered`, :meth:`VanishedJobs.recall`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from probes.config import KubernetesCluster
from probes.kubernetes.markers import KIND_LABEL, WEDGE_LABEL
from probes.models import TERMINAL_STATES, JobFacts, JobState, SchedulerRecord

VANISHED = "vanished"


class VanishedJobs:
    """The vanished-job bookkeeping of a Kubernetes probe (its state is the probe's own)."""

    _cluster: KubernetesCluster
    _seen: dict[str, SchedulerRecord]
    _gone: dict[str, SchedulerRecord]
    _cancelled: set[str]
    _vanished: set[str]

    # -- vanished jobs -------------------------------------------------------------------------

    def _vanished_facts(self, present: set[str], alive: set[tuple[str, str]],
                        now: datetime) -> list[JobFacts]:
        """Jobs active last sweep and gone now, as vanished (found once: :meth:`_gone_facts`
        keeps them). A workload is gone when no object of its kind and name is listed: a
        JobSet whose id went back to its bare name (its namesake Job gone) is still there."""
        facts = []
        for job_id, last in self._seen.items():
            if job_id in present or job_id in self._cancelled or job_id in self._vanished:
                continue
            if (last.labels.get(KIND_LABEL, "Job"), last.name) in alive:
                continue
            if last.state in TERMINAL_STATES:
                continue  # finished and garbage-collected (ttlSecondsAfterFinished): not a wedge
            self._vanished.add(job_id)
            facts.append(vanished_job(last, now))
        return facts

    def _gone_facts(self, found: list[JobFacts], present: set[str],
                    now: datetime) -> list[JobFacts]:
        """The vanished jobs to report: those ``found`` now and those found by earlier sweeps,
        each as it was first reported (FAILED, its end the sweep that found it gone) until
        ``recent_hours`` after that end, as a terminated job stays in the report (the seed: a
        record that disappeared is terminal). A name listed again is a new job: forgotten."""
        cutoff = now - timedelta(hours=self._cluster.recent_hours)
        self._gone.update((facts.record.job_id, facts.record) for facts in found)
        self._gone = {job_id: record for job_id, record in self._gone.items()
                      if job_id not in present
                      and (record.end_time is None or record.end_time >= cutoff)}
        return [JobFacts(record=record) for record in self._gone.values()]

    # -- memory between processes ---------------------------------------------------------------

    def remembered(self) -> dict[str, Any]:
        """What this probe's next sweep needs of its last one (the live jobs it saw, the
        vanished ones kept, those it cancelled), as JSON, for a probe in another process (a
        restarted bot, another replica): :meth:`recall`."""
        return {"seen": {job_id: record.model_dump(mode="json")
                         for job_id, record in self._seen.items()
                         if record.state not in TERMINAL_STATES},
                "gone": {job_id: record.model_dump(mode="json")
                         for job_id, record in self._gone.items()},
                "cancelled": sorted(self._cancelled),
                # Only those still reported (``gone``): a vanished id is pruned here only
                # when its name is listed again, so the shared memory would keep every Job
                # ever deleted while running; past recent_hours it is in no ``seen`` either.
                "vanished": sorted(self._vanished & self._gone.keys())}

    def recall(self, memory: Mapping[str, Any]) -> None:
        """Take up what the cluster's latest sweep left (:meth:`remembered`), whichever
        process made it, in place of this probe's own memory: a job that vanished since is
        noticed by a restarted bot, and one another replica saw end since is not taken for
        vanished. A malformed memory is ignored (the probe's own stays), one that is no
        mapping too (a state file holding a JSON list: ``bot.cli_memory``)."""
        if not isinstance(memory, Mapping):
            return
        try:
            seen = {str(k): SchedulerRecord.model_validate(v)
                    for k, v in dict(memory.get("seen") or {}).items()}
            gone = {str(k): SchedulerRecord.model_validate(v)
                    for k, v in dict(memory.get("gone") or {}).items()}
            cancelled = {str(x) for x in memory.get("cancelled") or ()}
            vanished = {str(x) for x in memory.get("vanished") or ()}
        except (ValidationError, TypeError, ValueError):
            return
        self._seen, self._gone, self._cancelled = seen, gone, cancelled
        self._vanished.clear()  # shared with the caller: updated in place
        self._vanished.update(vanished)

    def take_cancels(self, memory: Any) -> None:
        """The cancels another process noted in the shared memory (:meth:`remembered`) while
        this probe's sweep ran, for the jobs it saw: the memory it saves next keeps them."""
        noted = memory.get("cancelled") if isinstance(memory, Mapping) else None
        if isinstance(noted, list):
            self._cancelled |= {str(x) for x in noted} & self._seen.keys()


def vanished_job(last: SchedulerRecord, now: datetime) -> JobFacts:
    """A job gone from the API since it was last seen active: FAILED, zero pods, ``vanished``."""
    return JobFacts(record=last.model_copy(update={
        "state": JobState.FAILED, "reason": VANISHED, "pods_total": 0, "pods_running": 0,
        "end_time": now, "labels": {**last.labels, WEDGE_LABEL: VANISHED},
    }))
