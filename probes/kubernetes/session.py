"""One Kubernetes cluster's API session, the base of :class:`probes.kubernetes.client.KubeClient`.

Policy (:mod:`probes.kubernetes.client`'s docstring states it whole): the kubeconfig loaded
into a private ``ApiClient`` (credentials loaded again after a 401 on an earlier sweep's),
every call bounded by ``request_timeout_s`` and by what is left of the sweep budget, counted,
and its third-party errors translated once (:meth:`KubeSession.call`,
:mod:`probes.kubernetes.api_errors`); a paginated list retried once after a transient answer,
listed again whole after an expired ``continue`` token, refused rather than cut past
``PAGE_SIZE * MAX_PAGES`` objects; an answer read whole is read up to
:attr:`BoundedResponse.limit` bytes and no further (a server streaming without end is
unreachable with the reason, not buffered until the memory runs out).
:class:`KubeClient` adds the calls the probe makes on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import aiohttp
import yaml  # type: ignore[import-untyped]  # no stubs installed; only YAMLError is used
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from probes.config import KubernetesCluster
from probes.errors import AuthError, ProbeError, UnreachableError
from probes.kubernetes.api_errors import NoAnswerError, api_error, retry_after, status_of
from probes.kubernetes.credentials import CredentialTimeout, load_credentials

T = TypeVar("T")

DEFAULT_NAMESPACE = "default"
"""The namespace read when neither the config nor the kubeconfig context names one (kubectl's)."""
PAGE_SIZE = 500
MAX_PAGES = 20
"""At most ``PAGE_SIZE * MAX_PAGES`` workloads per sweep: a bound, not an expected size."""
GARBAGE_EXCERPT = 120
"""Characters of an answer that was no Kubernetes object quoted in the cluster's detail."""


class BoundedResponse(aiohttp.ClientResponse):
    """An aiohttp response whose whole-body ``read`` stops past :attr:`limit` bytes with a
    ``ClientPayloadError`` (translated once, in :meth:`KubeSession.call`). The generated
    client reads every answer whole before it parses it; a list page (``PAGE_SIZE`` objects)
    is a few MiB, so the bound is only ever met by a server (or a proxy) sending without end."""

    limit = 64 << 20

    async def read(self) -> bytes:
        if self._body is None:
            parts: list[bytes] = []
            got = 0
            try:
                while chunk := await self.content.read(1 << 16):
                    got += len(chunk)
                    if got > self.limit:
                        raise aiohttp.ClientPayloadError(
                            f"answer larger than {self.limit} bytes: stopped reading")
                    parts.append(chunk)
            except BaseException:
                self.close()
                raise
            self._body = b"".join(parts)
        return await super().read()


class KubeSession:
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

    @property
    def turn_key(self) -> tuple[str | None, ...]:
        """The API server reached: its kubeconfig and context (``KubeApi.turn_key``)."""
        return (self._cluster.kubeconfig, self._cluster.context)

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
            if status_of(exc) != 401 or self._fresh or self._client is None:
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
            raise api_error(what, exc) from exc
        except TimeoutError as exc:  # before ClientError: aiohttp's timeouts are both
            if budget_cut:
                # What ran out is the sweep's budget, not this call's own bound: no node or
                # API server is known silent (a slow one answering each call in time read
                # as a silent kubelet, a healthy node blamed).
                raise UnreachableError(exhausted) from exc
            raise NoAnswerError(f"{what}: no answer within {timeout:g}s (timeout)") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc
        except (ValueError, TypeError, RecursionError) as exc:
            # The client could not read the answer as the API object (a proxy's HTML error
            # page with a 200, JSON cut short or nested past the parser, a list of
            # non-objects; bytes in no charset):
            # something in front of the API server answered, or it answered garbage.
            raise self._garbage(what, exc) from exc

    async def _throttled_once(self, what: str, call: Callable[[float], Awaitable[T]]) -> T:
        """:meth:`call`, asked once more after a 429's ``Retry-After`` (capped) when the sweep
        budget leaves time: one throttled answer (API priority and fairness) is transient,
        as for a list; a second stops the caller (the probe's log reads)."""
        try:
            return await self.call(what, call)
        except UnreachableError as exc:
            wait = retry_after(exc)
            if status_of(exc) != 429 or self._left() <= wait:
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
            # aiohttp has no public setter for a session's response class, and the generated
            # client builds its session itself: every whole-body read is bounded from here.
            self._client.rest_client.pool_manager._response_class = BoundedResponse
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
                narrow = ("namespace or label_selector" if selector else "namespace (pods are "
                          "listed namespace-wide: label_selector selects Jobs, not pods)")
                raise UnreachableError(
                    f"{what}: more than {PAGE_SIZE * MAX_PAGES} objects; narrow the cluster's "
                    f"{narrow}")
            paged = {**query, "_continue": token} if token else query
            try:
                answer = await self.call(what, partial(_with_budget, page, dict(paged)))
            except ProbeError as exc:
                status = status_of(exc)
                if status == 410 and token and not restarted:  # its continue token expired:
                    items, token, pages, restarted = [], None, 0, True  # list again, whole
                    continue
                wait = retry_after(exc)
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


def _with_budget(
    call: Callable[..., Awaitable[T]], query: Mapping[str, Any], budget_s: float
) -> Awaitable[T]:
    """``call(**query)`` with the remaining time budget as the client's own request timeout."""
    return call(**query, _request_timeout=budget_s)


