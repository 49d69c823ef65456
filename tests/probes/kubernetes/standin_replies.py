"""What the Kubernetes API stand-in answers besides objects, worded as the real API server words it.

Policy: ``Status`` bodies, the 410 ``Expired`` message, the RBAC refusal and a log's 400
refusal are the API server's own wording (its sources are named where each is built), so the
probe under test reads what it would read from a real cluster; label selectors are matched
as the API server matches equality-based ones. :class:`tests.probes.kubernetes.standin.KubeStandIn`
serves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from tests.probes.kubernetes.builders import to_json

GARBAGE = {
    "html": (b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad "
             b"Gateway</h1></center><hr><center>nginx</center></body></html>", "text/html"),
    "truncated": (b'{"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [{"metadata": '
                  b'{"name": "x"', "application/json"),
    "wrong-shape": (b'{"apiVersion": "v1", "kind": "List", "metadata": {}, '
                    b'"items": [{"metadata": null, "spec": 5, "status": "zz"}, 7, null]}',
                    "application/json"),
    # nested past Python's JSON parser (json.loads raises RecursionError, not ValueError)
    "nested": (b'{"apiVersion": "v1", "kind": "List", "metadata": {}, "items": '
               + b"[" * 100_000 + b"]" * 100_000 + b"}", "application/json"),
}
"""Fault -> (body, content type) answered with a 200 instead of the route's object."""

EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You "
           "can start a new list without the continue parameter, or use the continue token in "
           "this response to retrieve the remainder of the results. Continuing with the "
           "provided token results in an inconsistent list - objects that were created, "
           "modified, or deleted between the time the first chunk was returned and now may "
           "show up in the list.")
"""The API server's 410 ``Expired`` message for a continue token past etcd's compaction."""


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``Status`` object as the API server sends it with an error code."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality-based label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, comma-joined."""
    for raw in filter(None, (selector or "").split(",")):
        term = raw.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True



async def _endless(request: web.Request) -> web.StreamResponse:
    """A 200 whose body never ends: 64 KiB lines, ~50 MB/s, until the client goes away."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    line = b"x" * 65535 + b"\n"
    with contextlib.suppress(ConnectionError):
        while True:
            await response.write(line)
            await asyncio.sleep(0.001)
    return response


async def _delete_options(request: web.Request) -> dict[str, Any]:
    """The DeleteOptions body of a DELETE (``{}`` when none was sent)."""
    body = await request.read()
    options = json.loads(body) if body else {}
    return options if isinstance(options, dict) else {}


def _log_refusal(pod: Any, name: str, container: str | None) -> str | None:
    """What the API server answers (400) instead of a log: no container named in a pod of
    several, or a container that has not run yet (waiting, no failed run before it: kubelet
    ``validateContainerLogStatus`` serves a crash loop's last run, nothing before the first)."""
    spec = to_json(pod).get("spec") or {}
    status = to_json(pod).get("status") or {}
    names = [c["name"] for c in spec.get("containers") or ()]
    if container is None:
        if len(names) != 1:
            return (f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(names)}]")
        container = names[0]
    statuses = [*(status.get("initContainerStatuses") or ()),
                *(status.get("containerStatuses") or ())]
    found = next((cs for cs in statuses if cs.get("name") == container), None)
    if found is None:
        return None  # no status yet: the stand-in's test set the log alone
    waiting = (found.get("state") or {}).get("waiting")
    if waiting is not None and not (found.get("lastState") or {}).get("terminated"):
        return (f'container "{container}" in pod "{name}" is waiting to start: '
                f'{waiting.get("reason") or "ContainerCreating"}')
    return None


def _in(request: web.Request, obj: Any) -> bool:
    """The object lives in the request's namespace (a namespaced list answers only those)."""
    meta = obj["metadata"] if isinstance(obj, dict) else to_json(obj.metadata)
    return bool((meta or {}).get("namespace") == request.match_info["ns"])


def _forbidden(request: web.Request) -> str:
    """The API server's RBAC refusal, worded as its authorizer words it (apiserver's
    ``forbiddenMessage`` inside ``errors.NewForbidden``: ``<resource>.<group> "<name>" is
    forbidden: User ... cannot <verb> resource "<resource>[/<sub>]" in API group ...``)."""
    parts = request.path.strip("/").split("/")
    group = parts[1] if parts[0] == "apis" else ""
    at = parts.index("namespaces")
    namespace, resource = parts[at + 1], parts[at + 2]
    name = parts[at + 3] if len(parts) > at + 3 else None
    sub = parts[at + 4] if len(parts) > at + 4 else None
    verb = {"DELETE": "delete"}.get(request.method, "get" if name else "list")
    shown = f"{resource}.{group}" if group else resource
    who = f'{shown} "{name}"' if name else shown
    return (f'{who} is forbidden: User "system:serviceaccount:{namespace}:jobtables" cannot '
            f'{verb} resource "{resource}{"/" + sub if sub else ""}" in API group "{group}" in '
            f'the namespace "{namespace}"')


def _route_name(request: web.Request) -> str:
    path = request.path
    if path.endswith("/log"):
        return "log"
    if request.method == "DELETE":
        return "delete"
    for name in ("pytorchjobs", "rayjobs", "jobsets", "jobs", "pods", "version"):
        if f"/{name}" in path:
            return name
    return "other"
