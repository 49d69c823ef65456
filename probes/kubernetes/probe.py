"""Kubernetes backend: batch/v1 Jobs, JobSets, Kubeflow PyTorchJobs and KubeRay RayJobs, their
pods and logs.

Policy (the seed's Kubernetes paragraph):

- Liveness is a state poll of the job lifecycle (conditions, counts, pod phases and container
  states, mapped by :mod:`probes.kubernetes.states`), never a log grep.
- Calls are issued one at a time, in order (the seed: keep the calls synchronous), also
  when a ``/job`` or a cancel comes in during a sweep (it waits for the sweep), through
  :class:`probes.kubernetes.client.KubeClient`: it loads the kubeconfig privately, bounds each
  call by ``request_timeout_s`` and what is left of the ``timeout_s`` sweep budget, counts the
  ``round_trips`` and translates third-party errors once into :mod:`probes.errors` (the seam
  is :mod:`probes.kubernetes.api`: a replay answers from a recording instead). The workloads
  are listed once per kind per sweep (:mod:`probes.kubernetes.listing`). Pods are
  listed once per sweep, namespace-wide (paginated), and matched to each workload by its
  job-name / JobSet-name label locally: the sweep's calls do not grow with the job count,
  except for one log read per running job (and one more for a rank of a running multi-rank
  job that failed and does not run again: its first error names it, see
  ``attempts.failed_rank``). An unreachable or unauthorised API server makes
  ``collect`` return ``status="unreachable"``.
- A job that was active in the previous sweep and is gone now is reported as FAILED, zero
  pods, reason ``vanished`` (the silent-wedge signature), its end the sweep that found it gone,
  and stays in the report as a terminated job does, ``recent_hours``. A job that ended and was
  garbage-collected, or that this probe cancelled, is simply forgotten.
- Logs are read by :class:`probes.kubernetes.log_reader.LogReader`, one per sweep. A log
  body ending in a kubelet error (``pod_logs.log_fetch_problem``), or with fewer lines
  than ``min_log_lines``, is retried once and then reported as a failed fetch, never as "no
  metrics". A log read refused (401, 403: the Role lacks ``pods/log``) is every job's failed
  fetch, asked once per sweep. A log
  read that gets no answer is its node's kubelet's: that job's fetch fails, the node's other
  pods are skipped, the other jobs are still read; a second silent read, or an unreachable
  API, stops the sweep's log reads (each would spend a timeout).
- No path to stat on Kubernetes: checkpoints and trial trees stay ``None``. ``offsets`` is
  ignored: a pod log cannot be read from a byte offset, only tailed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary

from probes.config import KubernetesCluster
from probes.errors import AuthError, CommandError, UnreachableError
from probes.ids import validate_job_id
from probes.kubernetes.api import KubeApi
from probes.kubernetes.api_errors import NotFoundError, status_of
from probes.kubernetes.attempts import failed_rank
from probes.kubernetes.client import KubeClient
from probes.kubernetes.listing import TRAINING_KINDS, list_workloads, refusal_detail
from probes.kubernetes.log_reader import LogReader, real_faults
from probes.kubernetes.markers import (
    FAILED_RANK_LABEL,
    KIND_LABEL,
    RECURRING_LABEL,
    SAME_NAME_LABEL,
)
from probes.kubernetes.objects import (
    POD_OWNER_LABELS,
    Workload,
    build_record,
    owned_by,
    owner_of,
)
from probes.kubernetes.pod_logs import log_pod
from probes.kubernetes.pod_status import pod_view
from probes.kubernetes.states import map_workload_state
from probes.kubernetes.vanished import VanishedJobs, vanished_job
from probes.kubernetes.views import PodView
from probes.models import (
    TERMINAL_STATES,
    ClusterFacts,
    JobFacts,
    JobState,
    SchedulerRecord,
)

CLOSE_WAIT_S = 2.0
"""How long closing waits for the sweep or call under way before it closes the session."""
PodIndex = dict[tuple[str, str], list[Any]]
"""(owner label, value) -> the namespace's pods carrying it (one sweep's pod list)."""


class KubernetesProbe(VanishedJobs):
    """One Kubernetes cluster; keep one instance per cluster so vanished jobs are noticed."""

    def __init__(
        self,
        cluster: KubernetesCluster,
        *,
        clock: Callable[[], datetime] | None = None,
        vanished: set[str] | None = None,
        aliases: Mapping[str, str] | None = None,
        api: KubeApi | None = None,
        **_: Any,
    ) -> None:
        self._cluster = cluster
        self._clock = clock or (lambda: datetime.now(UTC))
        self._vanished = vanished if vanished is not None else set()
        """Job ids already reported as vanished (shareable with the caller, never re-reported)."""
        self._aliases = dict(aliases or {})
        self._seen: dict[str, SchedulerRecord] = {}
        self._gone: dict[str, SchedulerRecord] = {}
        """Jobs found vanished, kept in the report as terminated jobs are (``recent_hours``)."""
        self._cancelled: set[str] = set()
        self._api: KubeApi = api or KubeClient(cluster)
        """The API server's answers (``probes.kubernetes.api``: live, or a recording's)."""
        self._logs = LogReader(self._api, cluster, self._aliases)
        """This sweep's log reads (a new reader each sweep: its outages are the sweep's)."""
        self._refused: dict[str, str] = {}
        """This listing's kinds not listed (a JobSet or PyTorchJob list refused or failing),
        by kind: said in the cluster's detail; their jobs seen before are not vanished."""

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        """Sweep the namespace once (see the module policy); never raises for a bad cluster."""
        async with self._turn:
            return await self._collect()

    async def _collect(self) -> ClusterFacts:
        now = self._clock()
        self._logs = LogReader(self._api, self._cluster, self._aliases)
        try:
            with self._api.budget():
                workloads = await self._list_workloads()
                wanted = self._wanted(workloads, now)
                pods = await self._pod_index() if wanted else {}
                jobs = [await self._job_facts(work, pods, now) for work in wanted]
        except (UnreachableError, AuthError, CommandError) as exc:
            if isinstance(exc, AuthError):
                await self._api.close()  # credentials may be rotated on disk: reload next time
            return self._facts(now, status="unreachable", detail=str(exc))
        present = {work.job_id for work in workloads}
        alive = {(work.view.kind, work.name) for work in workloads}
        if self._refused:  # unseen, not gone: none of them vanished
            present |= {job_id for job_id, last in self._seen.items()
                        if last.labels.get(KIND_LABEL) in self._refused}
        vanished = self._vanished_facts(present, alive, now)
        self._seen = {facts.record.job_id: facts.record for facts in jobs
                      if facts.record.job_id in present}
        jobs += self._gone_facts(vanished, present, now)
        self._cancelled &= present
        self._vanished -= present  # a re-created name is a new job
        return self._facts(now, status="ok", detail=refusal_detail(self._refused),
                           jobs=tuple(jobs))

    async def collect_job(self, job_id: str, *, whole_tail: bool = False) -> JobFacts | None:
        """One Job, JobSet, PyTorchJob or RayJob by name, read as a sweep reads it, however old
        (``None`` when the namespace lists no such job of this cluster's ``users``);
        ``whole_tail`` keeps its log's tail whole in ``log.text`` (the deep probe reads the
        completions it printed).
        The client's errors (an unreachable API, a credential plugin that hung) are raised."""
        validate_job_id(job_id)
        async with self._turn:
            return await self._collect_job(job_id, whole_tail=whole_tail)

    async def _collect_job(self, job_id: str, *, whole_tail: bool = False) -> JobFacts | None:
        now = self._clock()
        self._logs = LogReader(self._api, self._cluster, self._aliases)
        users = set(self._cluster.users)
        with self._api.budget():
            listed = await self._list_workloads()
            found = [work for work in listed if work.job_id == job_id
                     and (not users or owner_of(work, self._cluster.user_keys) in users)]
            if not found:
                return None
            pods = await self._pod_index()
            self._logs.whole_tail = whole_tail
            try:
                facts = await self._job_facts(found[0], pods, now)
            finally:
                self._logs.whole_tail = False
        # A Job and a JobSet (a PyTorchJob) may share a name (each has its own id): the other
        # is named, so its run is not hidden from the one command that takes the name.
        shown = found[0]
        others = sorted({w.view.kind for w in listed
                         if w.name == shown.name and w.view.kind != shown.view.kind})
        if others:
            facts = facts.model_copy(update={"record": facts.record.model_copy(update={
                "labels": {**facts.record.labels, SAME_NAME_LABEL: ",".join(others)}})})
        return facts

    async def collect_one(self, job_id: str) -> ClusterFacts:
        """That job only (``jobtables job``, ``/job``): its Job or JobSet read as a sweep reads
        it, and its own pod log only. Collecting the cluster whole read every job's log, and
        two other pods' silent kubelets stopped the log reads: the job asked for then read
        ``fetch-failed``. A job this probe saw active and that is gone since reads vanished,
        as the next sweep reports it (this answer does not use that up). A cluster problem
        is ``unreachable``, as in ``collect``; an id no Kubernetes name raises."""
        validate_job_id(job_id)
        async with self._turn:
            return await self._collect_one(job_id)

    async def _collect_one(self, job_id: str) -> ClusterFacts:
        now = self._clock()
        try:
            found = await self._collect_job(job_id)
        except (UnreachableError, AuthError, CommandError) as exc:
            if isinstance(exc, AuthError):
                await self._api.close()
            return self._facts(now, status="unreachable", detail=str(exc))
        last = self._seen.get(job_id)
        unlisted = last is not None and (
            last.labels.get(KIND_LABEL) in self._refused)  # unseen, not gone
        if (found is None and last is not None and job_id not in self._cancelled
                and last.state not in TERMINAL_STATES and not unlisted):
            found = vanished_job(last, now)
        if found is None and job_id in self._gone:  # found vanished by an earlier sweep
            found = JobFacts(record=self._gone[job_id])
        # A JobSet (PyTorchJob) list refused is said, as in the sweep: a name not found then
        # is no answer that it does not exist.
        return self._facts(now, status="ok", detail=refusal_detail(self._refused),
                           jobs=(found,) if found is not None else ())

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        """Delete the Job (JobSet, PyTorchJob, RayJob, TFJob, MPIJob) with background
        propagation; already
        gone is success.
        With ``uid`` the delete carries it as a precondition: the API server refuses (409)
        to delete an object re-created under the name since (``owner`` adds nothing)."""
        validate_job_id(job_id)
        async with self._turn:
            await self._cancel(job_id, uid)

    async def _cancel(self, job_id: str, uid: str | None) -> None:
        seen = self._seen.get(job_id)
        kind = seen.labels.get(KIND_LABEL) if seen else None
        name = job_id
        for other in _DELETES:  # kubectl's <kind>/<name>: a kind sharing a Job's name
            if job_id.startswith(f"{other.lower()}/"):
                kind, name = other, job_id.removeprefix(f"{other.lower()}/")
        # Never seen: it may be any kind, the Job first (a Job's id is its bare name).
        kinds = ("Job", *_DELETES) if kind is None else (kind,)
        for tried in kinds:
            try:
                delete = getattr(self._api, _DELETES.get(tried, "delete_job"))
                if tried in TRAINING_KINDS:  # one call for the training operator's others
                    delete = partial(delete, tried)
                await delete(name, uid=uid)
                break
            except NotFoundError:
                continue  # already gone (or another kind): the cancel's goal holds
            except CommandError as exc:
                # The uid is another object's: a never-seen RayJob's submitter Job has its
                # name. The RayJob is tried next; a seen kind's conflict is the cancel's.
                if kind is not None or uid is None or status_of(exc) != 409:
                    raise
                if tried == kinds[-1]:
                    raise
        self._cancelled.add(job_id)
        self._gone.pop(job_id, None)

    @property
    def _turn(self) -> asyncio.Lock:
        """Held by each sweep, job query and cancel: the bot shares one probe between its
        scheduled sweeps, ``/job`` and the cancel buttons, and a deep probe reads the same
        API server with a probe of its own; the calls stay one at a time (the seed), and
        the per-sweep state above and the client's budget are one answer's."""
        return _turn_of(self._api.turn_key)

    async def aclose(self) -> None:
        """Close the HTTP session, after the sweep or call under way if it ends within
        :data:`CLOSE_WAIT_S` (a shutdown does not wait on a slow API server)."""
        try:
            async with asyncio.timeout(CLOSE_WAIT_S), self._turn:
                await self._api.close()
                return
        except TimeoutError:
            pass
        await self._api.close()

    # -- listing ---------------------------------------------------------------------------

    async def _list_workloads(self) -> list[Workload]:
        """The namespace's workloads (:func:`listing.list_workloads`), the kinds that could
        not be listed kept in ``_refused``. A Job seen last sweep still qualifies its
        namesakes' ids."""
        seen_jobs = {last.name for last in self._seen.values()
                     if last.labels.get(KIND_LABEL) == "Job"}
        workloads, self._refused = await list_workloads(self._api, seen_jobs)
        return workloads

    def _wanted(self, workloads: list[Workload], now: datetime) -> list[Workload]:
        """Drop other users' jobs and terminated jobs older than ``recent_hours``."""
        cutoff = now - timedelta(hours=self._cluster.recent_hours)
        users = set(self._cluster.users)
        wanted = []
        for work in workloads:
            if users and owner_of(work, self._cluster.user_keys) not in users:
                continue
            if work.finished is not None and work.finished < cutoff:
                continue
            wanted.append(work)
        return wanted

    async def _pod_index(self) -> PodIndex:
        """One namespace-wide pod list per sweep, indexed by the labels that name an owner."""
        index: PodIndex = {}
        for pod in await self._api.list_pods():
            labels = pod.metadata.labels or {}
            for key in POD_OWNER_LABELS:
                value = labels.get(key)
                if value is not None:
                    index.setdefault((key, value), []).append(pod)
        return index

    @staticmethod
    def _pods(work: Workload, index: PodIndex) -> list[PodView]:
        if work.pod_sets:  # a RayJob's: its submitter's and its RayCluster's, all of them
            found = {pod.metadata.name: pod for label in work.pod_sets
                     for pod in index.get(label, ()) if owned_by(pod, work)}
            return [pod_view(pod) for pod in found.values()]
        for label in work.pod_labels():
            items = [pod for pod in index.get(label, ()) if owned_by(pod, work)]
            if items:
                return [pod_view(pod) for pod in items]
        return []  # every label looked up (incl. the pre-1.27 one) before calling it zero

    # -- one job -----------------------------------------------------------------------------

    async def _job_facts(self, work: Workload, index: PodIndex, now: datetime) -> JobFacts:
        pods = self._pods(work, index)
        verdict = map_workload_state(work.view, pods)
        record = build_record(self._cluster, work, pods, verdict, now)
        leader = log_pod(pods, work.first_group)
        if leader is None:
            return JobFacts(record=record)
        log, cut = await self._logs.fetch(leader)
        summary = None
        if log.status == "ok":
            # Parsing a tail is CPU work (~0.3 s per 2000 lines): a worker thread keeps the
            # bot's event loop answering Slack meanwhile. API calls stay one at a time.
            summary, log = await asyncio.to_thread(self._logs.parse, log, cut=cut)
        rank = failed_rank(pods) if record.state is JobState.RUNNING else None
        if rank is not None:
            why = await self._logs.rank_error(rank, leader, summary)
            if why:
                record = record.model_copy(update={"labels": {
                    **record.labels, FAILED_RANK_LABEL: rank.describe(why)}})
        recurring = record.labels.get(RECURRING_LABEL)
        if recurring and leader.relapse is not None and not real_faults(summary):
            # Running again inside its crash loop: this run's log is a fresh start; the
            # error that ended each run is in the one before (kubectl logs --previous).
            why = await self._logs.previous_error(leader)
            if why:
                record = record.model_copy(update={"labels": {
                    **record.labels, RECURRING_LABEL:
                        f"{recurring.partition(' | ')[0]} | {why} (the previous run's log)"}})
        return JobFacts(record=record, log=log, summary=summary)

    def _facts(self, now: datetime, *, status: Any, detail: str | None = None,
               jobs: tuple[JobFacts, ...] = ()) -> ClusterFacts:
        return ClusterFacts(name=self._cluster.name, kind="kubernetes", status=status,
                            detail=detail, collected_at=now, jobs=jobs, round_trips=self._api.calls)


_DELETES = {"JobSet": "delete_jobset", "PyTorchJob": "delete_pytorchjob",
            "RayJob": "delete_rayjob", "TFJob": "delete_training_job",
            "MPIJob": "delete_training_job"}
"""The kinds besides Job a cancel deletes, by the ``KubeApi`` call deleting one."""


_TURNS: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str | None, ...],
                                                       asyncio.Lock]] = WeakKeyDictionary()
"""Per event loop, the lock of each API server (kubeconfig, context) probes take turns on."""


def _turn_of(server: tuple[str | None, ...]) -> asyncio.Lock:
    """The lock of the API server ``server`` names (``KubeApi.turn_key``), on the running
    event loop (a lock is bound to the loop it first waits on; tests run a loop each)."""
    locks = _TURNS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(server, asyncio.Lock())
