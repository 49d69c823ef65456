"""Kubernetes backend: batch/v1 Jobs and JobSets, their pods and their pod logs.

Policy (the seed's Kubernetes paragraph):

- Liveness is a state poll of the job lifecycle (conditions, counts, pod phases and container
  states, mapped by :mod:`probes.kubernetes.states`), never a log grep.
- Calls are issued one at a time, in order (the seed: keep the calls synchronous), each bounded
  by ``request_timeout_s`` and by what is left of the cluster's ``timeout_s`` sweep budget.
  ``round_trips`` counts every API call made.
- Third-party errors (``ApiException``, ``aiohttp.ClientError``, timeouts, ``OSError``) are
  translated exactly once, in :meth:`KubernetesProbe._call`, into :mod:`probes.errors`. An
  unreachable or unauthorised API server makes ``collect`` return ``status="unreachable"``.
- The kubeconfig is loaded into a private ``Configuration``/``ApiClient``; the library's
  global default is never touched, so several clusters live side by side.
- A job that was active in the previous sweep and is gone now is reported once more as FAILED,
  zero pods, reason ``vanished`` (the silent-wedge signature), then forgotten. A job that ended
  and was garbage-collected, or that this probe cancelled, is simply forgotten.
- Pod logs are read raw (``_preload_content=False``): the generated client would otherwise
  ``json.loads`` a log that happens to be one JSON document and hand back a Python repr
  (tomplus/kubernetes_asyncio#152). A body holding an API/kubelet error, or fewer lines than
  ``min_log_lines``, is retried once and then reported as a failed fetch, never as "no metrics".
- No path to stat on Kubernetes: checkpoints and trial trees stay ``None``. ``offsets`` is
  ignored: a pod log cannot be read from a byte offset, only tailed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import aiohttp
import yaml  # type: ignore[import-untyped]  # no stubs installed; only YAMLError is used
from kubernetes_asyncio.client import (
    ApiClient,
    BatchV1Api,
    Configuration,
    CoreV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
)
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import load_kube_config
from kubernetes_asyncio.config.config_exception import ConfigException

from probes.config import KubernetesCluster
from probes.errors import AuthError, CommandError, ProbeError, UnreachableError
from probes.ids import validate_job_id
from probes.kubernetes.objects import (
    KIND_LABEL,
    WEDGE_LABEL,
    Workload,
    build_record,
    job_workload,
    jobset_workload,
    owner_of,
    pod_view,
)
from probes.kubernetes.states import (
    PodView,
    log_container,
    log_fetch_problem,
    log_pod,
    map_workload_state,
)
from probes.logs.parse import parse_log
from probes.models import (
    TERMINAL_STATES,
    ClusterFacts,
    JobFacts,
    JobState,
    LogFetch,
    SchedulerRecord,
)

T = TypeVar("T")

JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
PAGE_SIZE = 500
MAX_PAGES = 20
"""At most ``PAGE_SIZE * MAX_PAGES`` workloads per sweep: a bound, not an expected size."""
VANISHED = "vanished"


class _NotFoundError(CommandError):
    """HTTP 404: an absent object (already deleted) or an API that is not installed."""


class KubernetesProbe:
    """One Kubernetes cluster; keep one instance per cluster so vanished jobs are noticed."""

    def __init__(
        self,
        cluster: KubernetesCluster,
        *,
        clock: Callable[[], datetime] | None = None,
        vanished: set[str] | None = None,
        aliases: Mapping[str, str] | None = None,
        **_: Any,
    ) -> None:
        self._cluster = cluster
        self._clock = clock or (lambda: datetime.now(UTC))
        self._vanished = vanished if vanished is not None else set()
        """Job ids already reported as vanished (shareable with the caller, never re-reported)."""
        self._aliases = dict(aliases or {})
        self._seen: dict[str, SchedulerRecord] = {}
        self._cancelled: set[str] = set()
        self._client: ApiClient | None = None
        self._calls = 0
        self._deadline: float | None = None
        self._log_outage: str | None = None

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        """Sweep the namespace once (see the module policy); never raises for a bad cluster."""
        now = self._clock()
        self._calls, self._log_outage = 0, None
        self._deadline = asyncio.get_running_loop().time() + self._cluster.timeout_s
        try:
            workloads = await self._list_workloads()
            jobs = [await self._job_facts(work, now) for work in self._wanted(workloads, now)]
        except (UnreachableError, AuthError, CommandError) as exc:
            if isinstance(exc, AuthError):
                await self._drop_client()  # credentials may be rotated on disk: reload next time
            return self._facts(now, status="unreachable", detail=str(exc))
        finally:
            self._deadline = None
        present = {work.name for work in workloads}
        jobs += self._vanished_facts(present, now)
        self._seen = {facts.record.job_id: facts.record for facts in jobs
                      if facts.record.job_id in present}
        self._cancelled &= present
        self._vanished -= present  # a re-created name is a new job
        return self._facts(now, status="ok", jobs=tuple(jobs))

    async def cancel(self, job_id: str) -> None:
        """Delete the Job (or JobSet) with background propagation; already gone is success."""
        validate_job_id(job_id)
        seen = self._seen.get(job_id)
        kind = seen.labels.get(KIND_LABEL) if seen else None
        body = V1DeleteOptions(propagation_policy="Background")
        ns = self._cluster.namespace
        client = await self._ensure_client()
        try:
            if kind == "JobSet":
                await self._delete_jobset(client, job_id, body)
            else:
                try:
                    await self._call(f"delete job {job_id}", lambda t: BatchV1Api(client)
                                     .delete_namespaced_job(job_id, ns, body=body,
                                                            _request_timeout=t))
                except _NotFoundError:
                    if kind is None:  # never seen: it may be a JobSet
                        await self._delete_jobset(client, job_id, body)
        except _NotFoundError:
            pass  # already gone: the cancel's goal holds
        self._cancelled.add(job_id)

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self._drop_client()

    # -- listing ---------------------------------------------------------------------------

    async def _list_workloads(self) -> list[Workload]:
        client = await self._ensure_client()
        ns = self._cluster.namespace
        batch, custom = BatchV1Api(client), CustomObjectsApi(client)

        list_jobs = partial(batch.list_namespaced_job, ns)
        list_jobsets = partial(custom.list_namespaced_custom_object,
                               JOBSET_GROUP, JOBSET_VERSION, ns, JOBSET_PLURAL)

        workloads = [job_workload(job) for job in await self._list_pages("list jobs", list_jobs)]
        try:
            jobsets = await self._list_pages("list jobsets", list_jobsets)
        except _NotFoundError:
            jobsets = []  # the JobSet API is not installed on this cluster
        # A JobSet's child Jobs are reported through the JobSet, not one by one.
        return [w for w in workloads if not w.owned_by_jobset] + [
            jobset_workload(obj) for obj in jobsets
        ]

    async def _list_pages(
        self, what: str, page: Callable[..., Awaitable[Any]]
    ) -> list[Any]:
        """Every item of a paginated list call (each page is one counted round trip)."""
        items: list[Any] = []
        query: dict[str, Any] = {"limit": PAGE_SIZE}
        if self._cluster.label_selector:
            query["label_selector"] = self._cluster.label_selector
        token: str | None = None
        for _ in range(MAX_PAGES):
            if token:
                query["_continue"] = token
            answer = await self._call(what, partial(_with_budget, page, dict(query)))
            if isinstance(answer, dict):  # custom objects come back as plain dicts
                items += answer.get("items") or []
                token = (answer.get("metadata") or {}).get("continue")
            else:
                items += answer.items or []
                token = answer.metadata._continue if answer.metadata else None
            if not token:
                break
        return items

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

    async def _pods(self, work: Workload) -> list[PodView]:
        client = await self._ensure_client()
        core = CoreV1Api(client)
        for selector in work.pod_selectors():
            query = {"label_selector": selector}
            page = partial(core.list_namespaced_pod, self._cluster.namespace)
            answer = await self._call(f"list pods of {work.name}",
                                      partial(_with_budget, page, query))
            if answer.items:
                return [pod_view(pod) for pod in answer.items]
        return []  # every selector asked (incl. the pre-1.27 label) before calling it zero

    # -- one job -----------------------------------------------------------------------------

    async def _job_facts(self, work: Workload, now: datetime) -> JobFacts:
        pods = await self._pods(work)
        verdict = map_workload_state(work.view, pods)
        record = build_record(self._cluster, work, pods, verdict, now)
        leader = log_pod(pods)
        if leader is None:
            return JobFacts(record=record)
        log = await self._fetch_log(leader)
        summary = None
        if log.status == "ok":
            # Parsing a tail is CPU work (~0.3 s per 2000 lines): a worker thread keeps the
            # bot's event loop answering Slack meanwhile. API calls stay one at a time.
            summary = await asyncio.to_thread(parse_log, log.text, aliases=self._aliases,
                                              benign_patterns=self._cluster.benign_patterns,
                                              mtime=log.mtime)
        return JobFacts(record=record, log=log, summary=summary)

    async def _fetch_log(self, pod: PodView) -> LogFetch:
        """Tail the pod's log; retry once when the body is an error or below the line floor."""
        container = log_container(pod)
        requested = f"pod/{pod.name}"
        path = f"{requested} -c {container}" if len(pod.containers) > 1 else requested
        problem = "not fetched"
        attempts = 0
        while attempts < 2:
            if self._log_outage is not None:
                problem = f"not fetched: {self._log_outage}"
                break
            attempts += 1
            try:
                text = await self._read_log(pod.name, container)
            except UnreachableError as exc:
                self._log_outage = problem = str(exc)  # do not spend a timeout per job
                break
            except ProbeError as exc:
                problem = str(exc)
                continue
            problem = log_fetch_problem(text, self._cluster.min_log_lines) or ""
            if not problem:
                return LogFetch(requested_path=requested, path=path, status="ok", text=text,
                                size=len(text.encode()), attempts=attempts)
        return LogFetch(requested_path=requested, path=path, status="failed", error=problem,
                        attempts=max(attempts, 1))

    async def _read_log(self, pod: str, container: str | None) -> str:
        client = await self._ensure_client()
        core = CoreV1Api(client)

        query: dict[str, Any] = {"tail_lines": self._cluster.tail_lines,
                                 "limit_bytes": self._cluster.tail_bytes}
        if container:
            query["container"] = container

        async def read(budget_s: float) -> str:
            response: Any = await core.read_namespaced_pod_log(
                pod, self._cluster.namespace, _preload_content=False, _request_timeout=budget_s,
                **query)
            try:
                data = await response.read()
            finally:
                response.release()
            if not 200 <= response.status <= 299:
                error = ApiException(status=response.status, reason=response.reason)
                error.body = data.decode("utf-8", errors="replace")
                raise error
            return str(data.decode("utf-8", errors="replace"))

        return await self._call(f"read log of pod/{pod}", read)

    # -- vanished jobs -------------------------------------------------------------------------

    def _vanished_facts(self, present: set[str], now: datetime) -> list[JobFacts]:
        """Jobs active last sweep and gone now: reported once as vanished, then forgotten."""
        facts = []
        for job_id, last in self._seen.items():
            if job_id in present or job_id in self._cancelled or job_id in self._vanished:
                continue
            if last.state in TERMINAL_STATES:
                continue  # finished and garbage-collected (ttlSecondsAfterFinished): not a wedge
            self._vanished.add(job_id)
            facts.append(JobFacts(record=last.model_copy(update={
                "state": JobState.FAILED, "reason": VANISHED, "pods_total": 0,
                "pods_running": 0, "end_time": now,
                "labels": {**last.labels, WEDGE_LABEL: VANISHED},
            })))
        return facts

    # -- transport -----------------------------------------------------------------------------

    async def _ensure_client(self) -> ApiClient:
        if self._client is None:
            configuration = Configuration()
            try:
                await load_kube_config(
                    config_file=self._cluster.kubeconfig, context=self._cluster.context,
                    client_configuration=configuration, persist_config=False)
            except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
                where = self._cluster.kubeconfig or "the default kubeconfig"
                raise UnreachableError(f"kubeconfig {where}: {exc}") from exc
            self._client = ApiClient(configuration)
        return self._client

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _delete_jobset(self, client: ApiClient, name: str, body: V1DeleteOptions) -> None:
        custom = CustomObjectsApi(client)
        await self._call(f"delete jobset {name}", lambda t: custom.delete_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, self._cluster.namespace, JOBSET_PLURAL, name,
            body=body, _request_timeout=t))

    async def _call(self, what: str, call: Callable[[float], Awaitable[T]]) -> T:
        """One API call, bounded, counted, with its errors translated into ``probes.errors``."""
        timeout = self._cluster.request_timeout_s
        if self._deadline is not None:
            left = self._deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise UnreachableError(
                    f"{what}: sweep budget of {self._cluster.timeout_s:g}s exhausted (timeout)")
            timeout = min(timeout, left)
        self._calls += 1
        try:
            async with asyncio.timeout(timeout):
                return await call(timeout)
        except ApiException as exc:
            raise _api_error(what, exc) from exc
        except TimeoutError as exc:  # before ClientError: aiohttp's timeouts are both
            raise UnreachableError(f"{what}: no answer within {timeout:g}s (timeout)") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc

    def _facts(self, now: datetime, *, status: Any, detail: str | None = None,
               jobs: tuple[JobFacts, ...] = ()) -> ClusterFacts:
        return ClusterFacts(name=self._cluster.name, kind="kubernetes", status=status,
                            detail=detail, collected_at=now, jobs=jobs, round_trips=self._calls)


def _with_budget(
    call: Callable[..., Awaitable[T]], query: Mapping[str, Any], budget_s: float
) -> Awaitable[T]:
    """``call(**query)`` with the remaining time budget as the client's own request timeout."""
    return call(**query, _request_timeout=budget_s)


def _api_error(what: str, exc: ApiException) -> ProbeError:
    """The one translation of an HTTP error answer into the probe error family."""
    status = int(exc.status or 0)
    message = f"{what}: HTTP {status} {exc.reason or ''}".rstrip()
    detail = _status_detail(exc.body)
    if detail:
        message = f"{message}: {detail}"
    if status in (401, 403):
        return AuthError(message)
    if status == 404:
        return _NotFoundError(message)
    if status == 429 or status >= 500 or status == 0:
        return UnreachableError(message)
    return CommandError(message)


def _status_detail(body: Any) -> str | None:
    """The ``message`` of a Kubernetes ``Status`` body, else a short raw excerpt."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not body:
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return str(body).strip()[:200] or None
    if isinstance(obj, dict) and obj.get("message"):
        return str(obj["message"])[:300]
    return str(body).strip()[:200] or None
