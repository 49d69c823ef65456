"""A local Kubernetes API stand-in: real HTTP on 127.0.0.1 port 0, real API object JSON.

Policy: the probe under test talks to this server through the real ``kubernetes_asyncio``
client, loaded from a real kubeconfig file; nothing in the probe is patched. The stand-in
serves the handful of endpoints the probe uses, shaped exactly like the real API (List kinds
with ``apiVersion``, ``kind``, ``metadata.resourceVersion`` and ``items``; ``Status`` bodies
for errors), honours ``labelSelector``, ``limit``/``continue`` (pages), ``tailLines`` and
``limitBytes``, checks a Bearer token,
and records every request so tests can assert on what was sent. Faults are switchable per
route: ``"500"`` (an internal error Status), ``"hang"`` (never answers until the stand-in
stops). A ``jobsets`` (``pytorchjobs``, ``rayjobs``) of ``None`` means the JobSet (Kubeflow
training-operator, KubeRay) API is not installed (404).
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.probes.kubernetes.builders import to_json
from tests.probes.kubernetes.standin_replies import (
    EXPIRED,
    GARBAGE,
    _delete_options,
    _endless,
    _forbidden,
    _in,
    _log_refusal,
    _route_name,
    selector_matches,
    status_body,
)


@dataclass
class Recorded:
    """One request the stand-in received."""

    method: str
    path: str
    query: dict[str, str]
    body: Any = None


@dataclass
class KubeStandIn:
    """The fake API server's state; mutate it between sweeps to change the cluster."""

    token: str = "standin-token"
    namespace: str = "ml"
    jobs: dict[str, Any] = field(default_factory=dict)
    pods: dict[str, Any] = field(default_factory=dict)
    jobsets: dict[str, dict[str, Any]] | None = None
    pytorchjobs: dict[str, dict[str, Any]] | None = None
    """kubeflow.org/v1 PyTorchJobs (``tests.probes.kubernetes.pytorchjobs``)."""
    rayjobs: dict[str, dict[str, Any]] | None = None
    """ray.io/v1 RayJobs (``tests.probes.kubernetes.rayjobs``)."""
    tfjobs: dict[str, dict[str, Any]] | None = None
    """kubeflow.org/v1 TFJobs (``tests.probes.kubernetes.training_jobs``)."""
    mpijobs: dict[str, dict[str, Any]] | None = None
    """kubeflow.org/v1 MPIJobs (``tests.probes.kubernetes.training_jobs``)."""
    logs: dict[str, str] = field(default_factory=dict)
    """``pod`` or ``pod/container`` -> the container's whole log (``.../previous``: its run
    before the current one, ``previous=true``)."""
    faults: dict[str, str] = field(default_factory=dict)
    """Route name (``jobs``, ``jobsets``, ``pytorchjobs``, ``rayjobs``, ``pods``, ``log``,
    ``delete``) ->
    ``"500"``, ``"500-once"``, ``"endless"`` (a 200 body that never ends, ``limitBytes`` ignored),
    ``"429"``/``"429-once"`` (throttled, ``Retry-After: 1``), ``"410"``/
    ``"410-once"`` (a ``continue`` token expired; lists page by ``limit``), ``"403"`` (RBAC
    refuses it), ``"hang"``, ``"slow"`` (answers after ``slow_s``), or garbage with a 200:
    ``"html"``
    (a proxy's error page), ``"truncated"`` (JSON cut mid-object), ``"wrong-shape"`` (a
    list whose items are no objects of the kind) or ``"nested"`` (arrays nested past the
    JSON parser)."""
    slow_s: float = 1.0
    """How long a ``"slow"`` route takes to answer."""
    requests: list[Recorded] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    """The most requests it was answering at once (the probe's calls are one at a time)."""
    log_asked: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the first log read arrives (a test acts while a sweep is at its log reads)."""
    url: str = ""
    _runner: web.AppRunner | None = None
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> str:
        """Serve on 127.0.0.1, port 0; returns the base URL."""
        app = web.Application(middlewares=[self._guard])
        ns = "/namespaces/{ns}"
        app.router.add_get("/version", self._version)
        app.router.add_get(f"/apis/batch/v1{ns}/jobs", self._list_jobs)
        app.router.add_delete(f"/apis/batch/v1{ns}/jobs/{{name}}", self._delete_job)
        app.router.add_get(f"/api/v1{ns}/pods", self._list_pods)
        app.router.add_get(f"/api/v1{ns}/pods/{{name}}/log", self._log)
        app.router.add_get(f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets", self._list_jobsets)
        app.router.add_delete(f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets/{{name}}",
                              self._delete_jobset)
        app.router.add_get(f"/apis/kubeflow.org/v1{ns}/pytorchjobs", self._list_pytorchjobs)
        app.router.add_delete(f"/apis/kubeflow.org/v1{ns}/pytorchjobs/{{name}}",
                              self._delete_pytorchjob)
        app.router.add_get(f"/apis/ray.io/v1{ns}/rayjobs", self._list_rayjobs)
        for plural, kind in (("tfjobs", "TFJobList"), ("mpijobs", "MPIJobList")):
            app.router.add_get(f"/apis/kubeflow.org/v1{ns}/{plural}", partial(
                self._list_training, plural, kind))
            app.router.add_delete(f"/apis/kubeflow.org/v1{ns}/{plural}/{{name}}", partial(
                self._delete_training, plural))
        app.router.add_delete(f"/apis/ray.io/v1{ns}/rayjobs/{{name}}", self._delete_rayjob)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        """Release hung handlers and shut the server down."""
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: Path, *, token: str | None = None) -> Path:
        """A kubeconfig (context ``standin``, token user) pointing at this server."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token or self.token}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "tester",
                                                         "namespace": self.namespace}}],
        }
        path.write_text(json.dumps(config))  # JSON is YAML: the loader reads it as is
        return path

    def calls(self, method: str, suffix: str) -> list[Recorded]:
        """Recorded requests of ``method`` whose path ends with ``suffix``."""
        return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    # -- plumbing ----------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._answer(request, handler)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body = None
        if request.can_read_body:
            body = await request.json()
        self.requests.append(Recorded(request.method, request.path, dict(request.query), body))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response(status_body(401, "Unauthorized", "Unauthorized"), status=401)
        route = _route_name(request)  # a fault for one object: "log:<pod name>"
        if route == "log":
            self.log_asked.set()
        fault = self.faults.get(f"{route}:{request.match_info.get('name', '')}",
                                self.faults.get(route))
        if fault == "hang":
            await self._release.wait()
        if fault == "slow":  # answers, each time after ``slow_s``: a loaded API server
            await asyncio.sleep(self.slow_s)
        if fault == "500-once":  # one transient answer, then the route answers again
            self.faults.pop(route, None)
            fault = "500"
        if fault == "500":
            return web.json_response(
                status_body(500, "InternalError", "etcdserver: request timed out"), status=500)
        if fault in ("429", "429-once"):  # API priority and fairness: throttled
            if fault == "429-once":
                self.faults.pop(route, None)
            return web.json_response(
                status_body(429, "TooManyRequests", "Too many requests, please try again "
                            "later."), status=429, headers={"Retry-After": "1"})
        if fault in ("410", "410-once") and "continue" in request.query:
            if fault == "410-once":  # the token expired (compaction): a new list succeeds
                self.faults.pop(route, None)
            return web.json_response(status_body(410, "Expired", EXPIRED), status=410)
        if fault in GARBAGE:  # something in front of the API server answered, not the API
            body, content_type = GARBAGE[fault]
            return web.Response(body=body, content_type=content_type)
        if fault == "endless":  # a server (or a proxy) that ignores limitBytes, body unending
            return await _endless(request)
        if fault == "403":  # RBAC: the Role lacks this verb on this resource
            return web.json_response(status_body(403, "Forbidden", _forbidden(request)),
                                     status=403)
        response: web.StreamResponse = await handler(request)
        return response

    def _list(self, kind: str, api_version: str, items: list[Any],
              request: web.Request | None = None) -> web.Response:
        """A List; with ``limit``, one page of it and the ``continue`` token of the next (an
        opaque base64 string to the client, as the API server's)."""
        metadata: dict[str, Any] = {"resourceVersion": "4242"}
        query = request.query if request is not None else {}
        start = int(base64.b64decode(query["continue"]).decode()) if query.get("continue") else 0
        limit = int(query.get("limit") or 0)
        if limit:
            rest = len(items) - start - limit
            items = items[start:start + limit]
            if rest > 0:
                metadata["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                metadata["remainingItemCount"] = rest
        return web.json_response({"apiVersion": api_version, "kind": kind,
                                  "metadata": metadata, "items": items})

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "31", "gitVersion": "v1.31.0"})

    async def _list_jobs(self, request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector")
        items = [to_json(job) for job in self.jobs.values() if _in(request, job)
                 and selector_matches(selector, job.metadata.labels or {})]
        return self._list("JobList", "batch/v1", items, request)

    async def _list_pods(self, request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector")
        items = [to_json(pod) for pod in self.pods.values() if _in(request, pod)
                 and selector_matches(selector, pod.metadata.labels or {})]
        return self._list("PodList", "v1", items, request)

    async def _list_jobsets(self, request: web.Request) -> web.Response:
        return self._list_custom(self.jobsets, "JobSetList", "jobset.x-k8s.io/v1alpha2", request)

    async def _list_pytorchjobs(self, request: web.Request) -> web.Response:
        return self._list_custom(self.pytorchjobs, "PyTorchJobList", "kubeflow.org/v1", request)

    async def _list_training(self, plural: str, kind: str,
                             request: web.Request) -> web.Response:
        return self._list_custom(getattr(self, plural), kind, "kubeflow.org/v1", request)

    async def _delete_training(self, plural: str, request: web.Request) -> web.Response:
        return self._delete(getattr(self, plural) or {}, request.match_info["name"],
                            f"{plural}.kubeflow.org", await _delete_options(request))

    async def _list_rayjobs(self, request: web.Request) -> web.Response:
        return self._list_custom(self.rayjobs, "RayJobList", "ray.io/v1", request)

    def _list_custom(self, store: dict[str, dict[str, Any]] | None, kind: str,
                     api_version: str, request: web.Request) -> web.Response:
        """A custom resource's list; 404 when its CRD is not installed (``store`` ``None``)."""
        if store is None:
            return web.json_response(
                status_body(404, "NotFound", "the server could not find the requested resource"),
                status=404)
        selector = request.query.get("labelSelector")
        items = [obj for obj in store.values() if _in(request, obj)
                 and selector_matches(selector, obj["metadata"].get("labels") or {})]
        return self._list(kind, api_version, items, request)

    async def _log(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.pods or not _in(request, self.pods[name]):
            return web.json_response(
                status_body(404, "NotFound", f'pods "{name}" not found'), status=404)
        container = request.query.get("container")
        if request.query.get("previous", "").lower() == "true":  # the run before this one
            shown = container or "?"
            text = self.logs.get(f"{name}/{container}/previous",
                                 self.logs.get(f"{name}/previous"))
            if text is None:
                return web.json_response(status_body(400, "BadRequest", (
                    f'previous terminated container "{shown}" in pod "{name}" not found')),
                    status=400)
            return web.Response(body=text.encode(), content_type="text/plain")
        refused = _log_refusal(self.pods[name], name, container)
        if refused is not None:  # the kubelet's 400, as the API server relays it
            return web.json_response(status_body(400, "BadRequest", refused), status=400)
        text = self.logs.get(f"{name}/{container}", self.logs.get(name, ""))
        if "tailLines" in request.query:  # the kubelet splits on newlines only, not on \r
            lines = text.split("\n")
            tail = int(request.query["tailLines"]) + (1 if lines[-1] == "" else 0)
            text = "\n".join(lines[-tail:])
        data = text.encode()
        if "limitBytes" in request.query:
            data = data[: int(request.query["limitBytes"])]
        return web.Response(body=data, content_type="text/plain")

    async def _delete_job(self, request: web.Request) -> web.Response:
        return self._delete(self.jobs, request.match_info["name"], "jobs.batch",
                            await _delete_options(request))

    async def _delete_jobset(self, request: web.Request) -> web.Response:
        return self._delete(self.jobsets or {}, request.match_info["name"],
                            "jobsets.jobset.x-k8s.io", await _delete_options(request))

    async def _delete_pytorchjob(self, request: web.Request) -> web.Response:
        return self._delete(self.pytorchjobs or {}, request.match_info["name"],
                            "pytorchjobs.kubeflow.org", await _delete_options(request))

    async def _delete_rayjob(self, request: web.Request) -> web.Response:
        return self._delete(self.rayjobs or {}, request.match_info["name"],
                            "rayjobs.ray.io", await _delete_options(request))

    def _delete(self, store: dict[str, Any], name: str, resource: str,
                options: dict[str, Any]) -> web.Response:
        if name not in store:
            return web.json_response(
                status_body(404, "NotFound", f'{resource} "{name}" not found'), status=404)
        # As the API server: a uid precondition that is not the object's refuses the delete.
        wanted = (options.get("preconditions") or {}).get("uid")
        have = (to_json(store[name]).get("metadata") or {}).get("uid")
        if wanted and wanted != have:
            return web.json_response(status_body(
                409, "Conflict", f"Precondition failed: UID in precondition: {wanted}, UID in "
                f"object meta: {have}"), status=409)
        del store[name]
        return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                  "status": "Success", "details": {"name": name}})
