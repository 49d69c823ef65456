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
  The body is read up to ``limitBytes`` and no further, whatever the server sends: one that
  ignores the bound (or streams without end) is cut there, never buffered whole.

The session (kubeconfig, budget, bounded calls, pages) is
:class:`probes.kubernetes.session.KubeSession`, which :class:`KubeClient` extends with the calls
the probe makes; what an error answer means is :mod:`probes.kubernetes.api_errors`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kubernetes_asyncio.client import (
    BatchV1Api,
    CoreV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
    V1Preconditions,
)
from kubernetes_asyncio.client.exceptions import ApiException

from probes.errors import AuthError, CommandError, UnreachableError
from probes.kubernetes.api_errors import ForbiddenError, NotFoundError, status_of
from probes.kubernetes.pytorchjob import (
    KUBEFLOW_KINDS,
    PYTORCHJOB_GROUP,
    PYTORCHJOB_PLURAL,
    PYTORCHJOB_VERSION,
)
from probes.kubernetes.rayjob import RAYJOB_GROUP, RAYJOB_PLURAL, RAYJOB_VERSION
from probes.kubernetes.session import KubeSession

JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
MAX_REREADS = 12
"""Log reads after the first when a body fills ``tail_bytes`` (:meth:`KubeClient.read_log`):
enough to halve a 2000-line window down to one line."""


class KubeClient(KubeSession):
    """One cluster's API session and the calls the probe makes on it (:class:`KubeSession`)."""

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
        return await self._list_custom(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL)

    async def list_pytorchjobs(self) -> list[Any]:
        """Every Kubeflow PyTorchJob (as plain dicts), as :meth:`list_jobsets`: none when the
        training operator's CRD is not installed, :class:`ForbiddenError` when refused."""
        return await self._list_custom(PYTORCHJOB_GROUP, PYTORCHJOB_VERSION, PYTORCHJOB_PLURAL)

    async def list_training_jobs(self, kind: str) -> list[Any]:
        """Every TFJob or MPIJob (``kind``; kubeflow.org/v1, as plain dicts), as
        :meth:`list_pytorchjobs`."""
        return await self._list_custom(PYTORCHJOB_GROUP, PYTORCHJOB_VERSION,
                                       KUBEFLOW_KINDS[kind][0])

    async def list_rayjobs(self) -> list[Any]:
        """Every KubeRay RayJob (as plain dicts), as :meth:`list_jobsets`: none when KubeRay's
        CRD is not installed, :class:`ForbiddenError` when refused."""
        return await self._list_custom(RAYJOB_GROUP, RAYJOB_VERSION, RAYJOB_PLURAL)

    async def _list_custom(self, group: str, version: str, plural: str) -> list[Any]:
        """A custom resource's list (under the label selector); none when its API is absent
        (404), :class:`ForbiddenError` for the Role's 403."""
        custom = CustomObjectsApi(await self._api())
        page = partial(custom.list_namespaced_custom_object, group, version,
                       self._namespace, plural)
        try:
            return await self._list_pages(f"list {plural}", page)
        except NotFoundError:
            return []
        except AuthError as exc:
            if status_of(exc) == 403:  # the Role lacks it; the credentials are good
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
        read = partial(self._read_log_window, core, pod, container=container,
                       previous=previous, limit=limit)
        what = f"read log of pod/{pod}"
        tail = self._cluster.tail_lines
        try:
            data = await self._throttled_once(what, partial(read, tail=tail))
            for _ in range(MAX_REREADS):
                if len(data) < limit:
                    break
                after_cut = min(tail - data.count(b"\n") - 1, tail // 2)
                if after_cut <= 0:
                    break  # the newest line itself is past the bound: keep its start
                tail = after_cut
                data = await self._throttled_once(what, partial(read, tail=tail))
        except UnreachableError as exc:
            if status_of(exc) >= 500:
                # The API server answered: the pod's kubelet (its node) could not. One pod's
                # failure, not an outage: the other jobs' logs are still read.
                raise CommandError(str(exc)) from exc
            raise
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        return data.decode("utf-8", errors="replace"), len(data) >= limit or lines >= tail

    async def _read_log_window(self, core: CoreV1Api, pod: str, budget_s: float, *,
                               container: str | None, previous: bool, limit: int,
                               tail: int) -> bytes:
        """One raw read of ``pod``'s log: its last ``tail`` lines, at most ``limit`` bytes; an
        ``ApiException`` for an answer other than 2xx (its body kept)."""
        query: dict[str, Any] = {"tail_lines": tail, "limit_bytes": limit}
        if container:
            query["container"] = container
        if previous:
            query["previous"] = True
        response: Any = await core.read_namespaced_pod_log(
            pod, self._namespace, _preload_content=False, _request_timeout=budget_s,
            **query)
        try:
            data = await _read_at_most(response, limit)
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            error = ApiException(status=response.status, reason=response.reason)
            body: Any = data.decode("utf-8", errors="replace")  # the client's str body
            error.body = body
            raise error
        return bytes(data)

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

    async def delete_pytorchjob(self, name: str, *, uid: str | None = None) -> None:
        """Delete a PyTorchJob (the operator's pods go with it), as :meth:`delete_jobset`."""
        custom = CustomObjectsApi(await self._api())
        await self.call(f"delete pytorchjob {name}", lambda t: (
            custom.delete_namespaced_custom_object(
                PYTORCHJOB_GROUP, PYTORCHJOB_VERSION, self._namespace, PYTORCHJOB_PLURAL, name,
                body=_delete_options(uid), _request_timeout=t)))


    async def delete_training_job(self, kind: str, name: str, *,
                                  uid: str | None = None) -> None:
        """Delete a TFJob or MPIJob (``kind``), as :meth:`delete_pytorchjob`."""
        custom = CustomObjectsApi(await self._api())
        plural = KUBEFLOW_KINDS[kind][0]
        await self.call(f"delete {kind.lower()} {name}", lambda t: (
            custom.delete_namespaced_custom_object(
                PYTORCHJOB_GROUP, PYTORCHJOB_VERSION, self._namespace, plural, name,
                body=_delete_options(uid), _request_timeout=t)))

    async def delete_rayjob(self, name: str, *, uid: str | None = None) -> None:
        """Delete a RayJob, as :meth:`delete_jobset`: KubeRay's finalizer stops the Ray job,
        its RayCluster and submitter Job go with it."""
        custom = CustomObjectsApi(await self._api())
        await self.call(f"delete rayjob {name}", lambda t: (
            custom.delete_namespaced_custom_object(
                RAYJOB_GROUP, RAYJOB_VERSION, self._namespace, RAYJOB_PLURAL, name,
                body=_delete_options(uid), _request_timeout=t)))


def _delete_options(uid: str | None) -> V1DeleteOptions:
    """Background propagation; with ``uid``, only the object that has it is deleted."""
    return V1DeleteOptions(propagation_policy="Background",
                           preconditions=V1Preconditions(uid=uid) if uid else None)


async def _read_at_most(response: Any, limit: int) -> bytes:
    """A raw response's body, at most ``limit`` bytes: a server that ignores ``limitBytes``
    (or never ends the body) is cut where a compliant one would have stopped, and the
    connection is closed rather than drained, so such a server cannot fill the bot's memory."""
    parts: list[bytes] = []
    got = 0
    while got < limit and (chunk := await response.content.read(min(1 << 16, limit - got))):
        parts.append(chunk)
        got += len(chunk)
    if got >= limit and not response.content.at_eof():
        response.close()
    return b"".join(parts)
