"""What an error answer of the Kubernetes API means: the wing's own probe errors and the one
translation of an HTTP error answer into :mod:`probes.errors`.

Policy: :meth:`probes.kubernetes.client.KubeClient.call` is the one place third-party errors
are translated, and it translates an ``ApiException`` here (:func:`api_error`): 401/403 are
:class:`AuthError` (a 403 on a list the Role lacks, :class:`ForbiddenError`), 404
:class:`NotFoundError`, 429/5xx/no status :class:`UnreachableError` (no answer in time:
:class:`NoAnswerError`), any other :class:`CommandError`, each with the ``Status`` message the
server sent. A retry reads the status and ``Retry-After`` back from the translated error's
cause (:func:`status_of`, :func:`retry_after`, capped at :data:`RETRY_AFTER_CAP_S`).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from probes.errors import AuthError, CommandError, ProbeError, UnreachableError


class NotFoundError(CommandError):
    """HTTP 404: an absent object (already deleted) or an API that is not installed."""


class ForbiddenError(AuthError):
    """HTTP 403: the credentials are good, the Role lacks this verb on this resource."""


class NoAnswerError(UnreachableError):
    """One call got no answer within its timeout (the sweep budget had time left): the API
    server, or for a pod log the kubelet it proxies to, did not answer."""


RETRY_AFTER_CAP_S = 2.0
"""The longest a list waits before its one retry (a ``Retry-After`` beyond it is cut)."""


def status_of(exc: BaseException) -> int:
    """The HTTP status behind a translated API error (0: none, a timeout or a refusal)."""
    cause = exc.__cause__
    return int(cause.status or 0) if isinstance(cause, ApiException) else 0


def retry_after(exc: BaseException) -> float:
    """Seconds to wait before retrying: the answer's ``Retry-After`` (capped), else 0.5."""
    cause = exc.__cause__
    headers = getattr(cause, "headers", None) or {}
    try:
        wanted = float(headers.get("Retry-After", 0.5))
    except (TypeError, ValueError):
        wanted = 0.5
    return min(max(wanted, 0.0), RETRY_AFTER_CAP_S)


def api_error(what: str, exc: ApiException) -> ProbeError:
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
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        return str(body).strip()[:200] or None
    if isinstance(obj, dict) and obj.get("message"):
        return str(obj["message"])[:300]
    return str(body).strip()[:200] or None
