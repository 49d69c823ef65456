"""The Kubernetes API transport: the counterpart of the SSH transport for the Kubernetes probe.

Policy:

- The kubeconfig is loaded into a private ``Configuration``/``ApiClient``; the library's
  global default is never touched, so several clusters live side by side. A kubeconfig that
  cannot be read, or whose credential plugin fails or does not finish within the call's
  bound (:mod:`probes.kubernetes.credentials`: a hung exec plugin is killed with its process
  group), is :class:`UnreachableError` naming what failed or hung. A 401 on credentials an
  earlier sweep loaded loads them again (the exec plugin run again, a token file read again,
  as client-go does) and asks once more, within the call; after an auth failure the caller
  still drops the client (:meth:`KubeClient.close`) so rotated credentials are re-read next
  time.
- Calls are issued one at a time, each bounded by ``request_timeout_s`` and by what is left of
  the sweep budget a caller opened with :meth:`KubeClient.budget`. ``calls`` counts every API
  call made (the sweep's round trips).
- Third-party errors (``ApiException``, ``aiohttp.ClientError``, timeouts, ``OSError``) are
  translated exactly once, in :meth:`KubeClient.call`, into :mod:`probes.errors`: 401/403 are
  :class:`AuthError`, 404 :class:`NotFoundError`, 429/5xx/no answer :class:`UnreachableError`
  (no answer in time: its :class:`NoAnswerError`),
  any other answer :class:`CommandError`, each with the ``Status`` message the server sent.
- A list is retried once after one transient answer (429 or 5xx, after its ``Retry-After``,
  capped), listed again whole once when its ``continue`` token expired (410), and refused
  (:class:`UnreachableError`) rather than cut when it runs past ``PAGE_SIZE * MAX_PAGES``
  objects: a cut pod list would read as jobs with no pods. A pod log's 5xx is that pod's
  (its kubelet), not an outage; a log read's 429 is asked once more after its
  ``Retry-After``, as a list's.
- Pod logs are read raw (``_preload_content=False``): the generated client would otherwise
  ``json.loads`` a log that happens to be one JSON document and hand back a Python repr
  (tomplus/kubernetes_asyncio#152). An error status in the log stream is an error, not text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
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
    V1Preconditions,
)
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from probes.config import KubernetesCluster
from probes.errors import AuthError, CommandError, ProbeError, UnreachableError
from probes.kubernetes.credentials import CredentialTimeout, load_credentials

T = TypeVar("T")

JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
DEFAULT_NAMESPACE = "default"
"""The namespace read when neither the config nor the kubeconfig context names one (kubectl's)."""
PAGE_SIZE = 500
MAX_PAGES = 20
"""At most ``PAGE_SIZE * MAX_PAGES`` workloads per sweep: a bound, not an expected size."""
GARBAGE_EXCERPT = 120
"""Characters of an answer that was no Kubernetes object quoted in the cluster's detail."""
MAX_REREADS = 12
"""Log reads after the first when a body fills ``tail_bytes`` (:meth:`KubeClient.read_log`):
enough to halve a 2000-line window down to one line."""


class NotFoundError(CommandError):
    """HTTP 404: an absent object (already deleted) or an API that is not installed."""


class ForbiddenError(AuthError):
    """HTTP 403: the credentials are good, the Role lacks this verb on this resource."""


class NoAnswerError(UnreachableError):
    """One call got no answer within its timeout (the sweep budget had time left): the API
    server, or for a pod log the kubelet it proxies to, did not answer."""


class KubeClient:
    """One cluster's API session: bounded, counted calls with their errors translated once."""

    def __init__(self, cluster: KubernetesCluster) -> None:
        self._cluster = cluster
        self._client: ApiClient | None = None
        self._deadline: float | None = None
        self._namespace = cluster.namespace or DEFAULT_NAMESPACE
        """The config's, else the kubeconfig context's (set when it is loaded: ``_api``)."""
        self.calls = 0
        self._fresh = False
        """The credentials were loaded in this sweep (a 401 on them is no stale token)."""
        self._reload = False
        """A 401 on credentials an earlier sweep loaded: the next request loads them again."""

    @contextmanager
    def budget(self) -> Iterator[None]:
        """One sweep: calls from here on share ``timeout_s`` and are counted from zero."""
        self.calls = 0
        self._fresh = False
        self._deadline = asyncio.get_running_loop().time() + self._cluster.timeout_s
        try:
            yield
        finally:
            self._deadline = None

    async def close(self) -> None:
        """Close the HTTP session; the next call loads the kubeconfig again."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- the API calls the probe makes --------------------------------------------------------

    async def list_jobs(self) -> list[Any]:
        """Every batch/v1 Job in the namespace (under the cluster's label selector)."""
        batch = BatchV1Api(await self._api())
        return await self._list_pages(
            "list jobs", partial(batch.list_namespaced_job, self._namespace)
        )

    async def list_jobsets(self) -> list[Any]:
        """Every JobSet (as plain dicts); none when the JobSet API is not installed;
        :class:`ForbiddenError` when the Role does not grant listing them."""
        custom = CustomObjectsApi(await self._api())
        page = partial(custom.list_namespaced_custom_object, JOBSET_GROUP, JOBSET_VERSION,
                       self._namespace, JOBSET_PLURAL)
        try:
            return await self._list_pages("list jobsets", page)
        except NotFoundError:
            return []
        except AuthError as exc:
            if _status_of(exc) == 403:  # the Role lacks it; the credentials are good
                raise ForbiddenError(str(exc)) from exc
            raise

    async def list_pods(self) -> list[Any]:
        """Every pod in the namespace (paginated): one list per sweep, matched to workloads
        locally. The cluster's ``label_selector`` picks Jobs; pods need not carry it."""
        core = CoreV1Api(await self._api())
        return await self._list_pages(
            "list pods", partial(core.list_namespaced_pod, self._namespace),
            selector=False)

    async def read_log(self, pod: str, container: str | None, *,
                       previous: bool = False) -> tuple[str, bool]:
        """The tail of ``pod``'s log (``tail_lines``/``tail_bytes``), read raw and decoded, and
        whether it may be cut from a longer log: the last read's whole window came back (as
        many lines as asked, or a body filling the byte bound). Else it is the whole log, from
        its first line (what counts HF Trainer's bar-less dicts: ``parse_log``'s ``log_start``).
        ``previous``: the container's run before the current one (``kubectl logs --previous``).

        The API applies ``limitBytes`` to the *start* of the ``tailLines`` window: a window
        larger than the byte bound (a multi-megabyte line in it, or many long lines) comes
        back cut before its newest lines, and a run would read as stuck at an old step. So a
        body that fills the bound is read again with a window that ends past the cut line
        (``tailLines`` reduced by the complete lines received and the cut one, at least
        halved: a log shorter than the window starts where it does), at most
        :data:`MAX_REREADS` times. A huge *last* line cannot be skipped: its start is kept."""
        core = CoreV1Api(await self._api())
        limit = self._cluster.tail_bytes

        async def read(tail: int, budget_s: float) -> bytes:
            query: dict[str, Any] = {"tail_lines": tail, "limit_bytes": limit}
            if container:
                query["container"] = container
            if previous:
                query["previous"] = True
            response: Any = await core.read_namespaced_pod_log(
                pod, self._namespace, _preload_content=False, _request_timeout=budget_s,
                **query)
            try:
                data = await response.read()
            finally:
                response.release()
            if not 200 <= response.status <= 299:
                error = ApiException(status=response.status, reason=response.reason)
                error.body = data.decode("utf-8", errors="replace")
                raise error
            return bytes(data)

        tail = self._cluster.tail_lines
        try:
            data = await self._throttled_once(f"read log of pod/{pod}", partial(read, tail))
            for _ in range(MAX_REREADS):
                if len(data) < limit:
                    break
                after_cut = min(tail - data.count(b"\n") - 1, tail // 2)
                if after_cut <= 0:
                    break  # the newest line itself is past the bound: keep its start
                tail = after_cut
                data = await self._throttled_once(f"read log of pod/{pod}", partial(read, tail))
        except UnreachableError as exc:
            if _status_of(exc) >= 500:
                # The API server answered: the pod's kubelet (its node) could not. One pod's
                # failure, not an outage: the other jobs' logs are still read.
                raise CommandError(str(exc)) from exc
            raise
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        return data.decode("utf-8", errors="replace"), len(data) >= limit or lines >= tail

    async def delete_job(self, name: str, *, uid: str | None = None) -> None:
        """Delete a Job with background propagation (``NotFoundError`` when absent); with
        ``uid`` only that object (a precondition: ``CommandError``, HTTP 409, for another)."""
        batch = BatchV1Api(await self._api())
        await self.call(f"delete job {name}", lambda t: batch.delete_namespaced_job(
            name, self._namespace, body=_delete_options(uid), _request_timeout=t))

    async def delete_jobset(self, name: str, *, uid: str | None = None) -> None:
        """Delete a JobSet with background propagation (``NotFoundError`` when absent); with
        ``uid`` only that object, as :meth:`delete_job`."""
        custom = CustomObjectsApi(await self._api())
        await self.call(f"delete jobset {name}", lambda t: custom.delete_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, self._namespace, JOBSET_PLURAL, name,
            body=_delete_options(uid), _request_timeout=t))

    # -- transport ------------------------------------------------------------------------------

    async def call(self, what: str, call: Callable[[float], Awaitable[T]]) -> T:
        """One API call, bounded, counted, with its errors translated into ``probes.errors``.
        A 401 on credentials an earlier sweep loaded (a token file rewritten, an exec plugin's
        token expired) asks once more with them loaded again, as client-go runs the plugin
        again on a 401: a long-lived probe's cluster is not ``unreachable`` for a sweep each
        time its token rotates."""
        try:
            return await self._call_once(what, call)
        except AuthError as exc:
            if _status_of(exc) != 401 or self._fresh or self._client is None:
                raise
            self._reload = True  # the request's credential hook loads them again
            return await self._call_once(what, call)

    async def _call_once(self, what: str, call: Callable[[float], Awaitable[T]]) -> T:
        timeout = self._cluster.request_timeout_s
        exhausted = f"{what}: sweep budget of {self._cluster.timeout_s:g}s exhausted (timeout)"
        budget_cut = False
        if self._deadline is not None:
            left = self._deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise UnreachableError(exhausted)
            budget_cut = left < timeout
            timeout = min(timeout, left)
        self.calls += 1
        try:
            async with asyncio.timeout(timeout):
                return await call(timeout)
        except ApiException as exc:
            raise _api_error(what, exc) from exc
        except TimeoutError as exc:  # before ClientError: aiohttp's timeouts are both
            if budget_cut:
                # What ran out is the sweep's budget, not this call's own bound: no node or
                # API server is known silent (a slow one answering each call in time read
                # as a silent kubelet, a healthy node blamed).
                raise UnreachableError(exhausted) from exc
            raise NoAnswerError(f"{what}: no answer within {timeout:g}s (timeout)") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc
        except (ValueError, TypeError) as exc:
            # The client could not read the answer as the API object (a proxy's HTML error
            # page with a 200, JSON cut short, a list of non-objects; bytes in no charset):
            # something in front of the API server answered, or it answered garbage.
            raise self._garbage(what, exc) from exc

    async def _throttled_once(self, what: str, call: Callable[[float], Awaitable[T]]) -> T:
        """:meth:`call`, asked once more after a 429's ``Retry-After`` (capped) when the sweep
        budget leaves time: one throttled answer (API priority and fairness) is transient,
        as for a list; a second stops the caller (the probe's log reads)."""
        try:
            return await self.call(what, call)
        except UnreachableError as exc:
            wait = _retry_after(exc)
            if _status_of(exc) != 429 or self._left() <= wait:
                raise
            await asyncio.sleep(wait)
            return await self.call(what, call)

    def _garbage(self, what: str, exc: BaseException | None = None,
                 answer: Any = None) -> UnreachableError:
        """The answer to ``what`` was no Kubernetes object: say what came back (its status,
        content type and start) rather than the client's deserialisation error."""
        response = getattr(self._client, "last_response", None)
        body = answer if answer is not None else getattr(response, "data", None)
        if isinstance(body, bytes):
            body = body.decode("utf-8", errors="replace")
        shown = " ".join(str(body).split())[:GARBAGE_EXCERPT] if body is not None else ""
        meta = []
        if response is not None:
            meta.append(f"HTTP {getattr(response, 'status', '?')}")
            content_type = response.getheader("content-type") if hasattr(
                response, "getheader") else None
            if content_type:
                meta.append(str(content_type))
        said = f" ({', '.join(meta)})" if meta else ""
        why = f": {shown!r}" if shown else (f": {type(exc).__name__}: {exc}" if exc else "")
        return UnreachableError(f"{what}: the answer is no Kubernetes object{said}{why}")

    def _left(self) -> float:
        """Seconds left of the sweep budget (:meth:`budget`); infinite without one."""
        if self._deadline is None:
            return float("inf")
        return self._deadline - asyncio.get_running_loop().time()

    async def _api(self) -> ApiClient:
        """The session, loading the kubeconfig (and running its credential plugin) first when
        there is none, bounded like a call: ``request_timeout_s`` and the sweep budget left.
        A load that fails or does not finish is :class:`UnreachableError` naming the step
        (never :class:`NoAnswerError`: no node is silent when a plugin hangs)."""
        if self._client is None:
            where = self._cluster.kubeconfig or "the default kubeconfig"
            timeout = min(self._cluster.request_timeout_s, self._left())
            if timeout <= 0:
                raise UnreachableError(f"kubeconfig {where}: sweep budget of "
                                       f"{self._cluster.timeout_s:g}s exhausted (timeout)")
            configuration = Configuration()
            namespace = await self._load(configuration, timeout)
            self._namespace = self._cluster.namespace or namespace or DEFAULT_NAMESPACE
            configuration.refresh_api_key_hook = self._reload_credentials
            self._client = ApiClient(configuration)
        return self._client

    async def _reload_credentials(self, configuration: Configuration) -> None:
        """The client's hook before each request's bearer token: after a 401 on credentials
        an earlier sweep loaded (:meth:`call`), the kubeconfig's are loaded again into the
        same configuration (the plugin run again, the token file read again)."""
        if self._reload:
            self._reload = False
            await self._load(configuration, min(self._cluster.request_timeout_s, self._left()))

    async def _load(self, configuration: Configuration, bound_s: float) -> str | None:
        """The kubeconfig's credentials loaded into ``configuration`` (its context's
        namespace returned), within ``bound_s``; a load that fails or does not finish is
        :class:`UnreachableError` naming the step."""
        where = self._cluster.kubeconfig or "the default kubeconfig"
        try:
            namespace = await load_credentials(self._cluster.kubeconfig,
                                               self._cluster.context, configuration, bound_s)
        except CredentialTimeout as exc:
            killed = "; killed it and its process group" if exc.killed else ""
            raise UnreachableError(
                f"kubeconfig {where}: {exc.waiting_on} did not finish within {bound_s:g}s "
                f"(timeout){killed}") from exc
        except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
            # one line: a YAML error's marks come on lines of their own; a list's bad
            # file is named alone (the whole list hid which one it was)
            where = getattr(exc, "path", None) or where
            raise UnreachableError(f"kubeconfig {where}: {' '.join(str(exc).split())}") \
                from exc
        self._fresh = True
        return namespace

    async def _list_pages(self, what: str, page: Callable[..., Awaitable[Any]], *,
                          selector: bool = True) -> list[Any]:
        """Every item of a paginated list call (each page is one counted round trip)."""
        items: list[Any] = []
        query: dict[str, Any] = {"limit": PAGE_SIZE}
        if selector and self._cluster.label_selector:
            query["label_selector"] = self._cluster.label_selector
        token: str | None = None
        retried = restarted = False
        pages = 0
        while True:
            if pages == MAX_PAGES:  # a cut list would read as jobs with no pods (wedges)
                raise UnreachableError(
                    f"{what}: more than {PAGE_SIZE * MAX_PAGES} objects; narrow the cluster's "
                    "namespace or label_selector")
            paged = {**query, "_continue": token} if token else query
            try:
                answer = await self.call(what, partial(_with_budget, page, dict(paged)))
            except ProbeError as exc:
                status = _status_of(exc)
                if status == 410 and token and not restarted:  # its continue token expired:
                    items, token, pages, restarted = [], None, 0, True  # list again, whole
                    continue
                wait = _retry_after(exc)
                if (status == 429 or status >= 500) and not retried and self._left() > wait:
                    retried = True  # one transient answer, and time left to ask again
                    await asyncio.sleep(wait)
                    continue
                raise
            pages += 1
            if isinstance(answer, dict):  # custom objects come back as plain dicts
                got = answer.get("items") or []
                metadata = answer.get("metadata") or {}
                if not isinstance(got, list) or not all(isinstance(i, dict) for i in got) \
                        or not isinstance(metadata, dict):
                    raise self._garbage(what)
                items += got
                token = metadata.get("continue")
            elif hasattr(answer, "items") and isinstance(answer.items, list | None):
                got = answer.items or []
                if any(item is None for item in got):
                    raise self._garbage(what)
                items += got
                token = answer.metadata._continue if answer.metadata else None
            else:  # a custom-object answer that was no JSON object (the client returns text)
                raise self._garbage(what, answer=answer)
            if not token:
                return items


RETRY_AFTER_CAP_S = 2.0
"""The longest a list waits before its one retry (a ``Retry-After`` beyond it is cut)."""


def _status_of(exc: BaseException) -> int:
    """The HTTP status behind a translated API error (0: none, a timeout or a refusal)."""
    cause = exc.__cause__
    return int(cause.status or 0) if isinstance(cause, ApiException) else 0


def _retry_after(exc: BaseException) -> float:
    """Seconds to wait before retrying: the answer's ``Retry-After`` (capped), else 0.5."""
    cause = exc.__cause__
    headers = getattr(cause, "headers", None) or {}
    try:
        wanted = float(headers.get("Retry-After", 0.5))
    except (TypeError, ValueError):
        wanted = 0.5
    return min(max(wanted, 0.0), RETRY_AFTER_CAP_S)


def _delete_options(uid: str | None) -> V1DeleteOptions:
    """Background propagation; with ``uid``, only the object that has it is deleted."""
    return V1DeleteOptions(propagation_policy="Background",
                           preconditions=V1Preconditions(uid=uid) if uid else None)


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
        return NotFoundError(message)
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
