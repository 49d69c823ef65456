"""Which pod and container of a workload to read the log of, and whether a log body read is
usable.

Policy (the seed: a failed fetch is indistinguishable from an idle job): a log body is judged
before it is parsed: a kubelet error ending the stream (the read cut by it), or fewer lines
than the floor, makes the fetch a failure, never "no metrics"; the job's own error lines
(kubectl's ``Error from server``, a Go tool's ``rpc error``) are its output. The log read is
rank 0's, the job's own container's, never a sidecar's.

Pure: the views come from :mod:`probes.kubernetes.objects`; tested by parametrised tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from probes.kubernetes.views import PodView, newest_pod


def log_pod(pods: Sequence[PodView], first_group: str | None = None) -> PodView | None:
    """The pod whose log to read: the newest running-or-finished pod, rank 0 preferred, one
    that is not terminating preferred. In a JobSet every replicated job has a rank 0: the
    first replicated job's (``first_group``, the spec's first: a leader, a launcher, a
    driver) is preferred, as its template gives the job's image and command. A Pending pod
    whose init container failed (in its crash loop) has that container's log to read."""
    started = [pod for pod in pods
               if pod.phase in {"Running", "Succeeded", "Failed"} or pod.failed_init]
    started = [pod for pod in started if not pod.deleting] or started
    leaders = [pod for pod in started if pod.rank0] or started
    if first_group is not None:
        leaders = [pod for pod in leaders if pod.group in (None, first_group)] or leaders
    return newest_pod(leaders)


PREFERRED_CONTAINERS = ("ray-job-submitter", "trainer", "main", "train", "training", "pytorch",
                        "tensorflow", "jax", "learner", "worker", "launcher")
"""Container names that run the job itself, in order (KubeRay's ``ray-job-submitter``, whose
``ray job logs --follow`` is a RayJob driver's output, also in a SidecarMode head pod beside
``ray-head``; Kubeflow's ``pytorch``/``tensorflow``, MPI's ``launcher`` ...)."""


SIDECAR_CONTAINER = re.compile(
    r"(?:^|[-_.])(?:istio|envoy|linkerd|proxy|sidecar|fluent(?:d|-?bit)?|filebeat|promtail|"
    r"vector|otel|collector|exporter|dcgm|vault|cloud-?sql|gcsfuse|oauth2?|logrotate|"
    r"log-?shipper)(?:$|[-_.])",
    re.IGNORECASE,
)
"""Names of injected or helper containers (service-mesh proxies, log shippers, exporters,
secret agents) whose log is never the job's own."""


def log_container(pod: PodView) -> str | None:
    """The container to read: kubectl's default-container, then a known job container name
    (``trainer``, ``main``, ...), then the first that is not a sidecar, then the first. A
    mesh proxy injected first (``istio-proxy``, ``linkerd-proxy``) is never the job's log:
    reading it left a running trainer in "Filling buffer" for ever. A pod whose init container
    failed before anything started is read from that init container (the others wrote
    nothing: the fetch read as failed, and the reason was never shown)."""
    if pod.failed_init:
        return pod.failed_init
    if pod.default_container and pod.default_container in pod.containers:
        return pod.default_container
    for preferred in PREFERRED_CONTAINERS:
        if preferred in pod.containers:
            return preferred
    for name in pod.containers:
        if not SIDECAR_CONTAINER.search(name):
            return name
    return pod.containers[0] if pod.containers else None


LOG_ERROR_LINE = re.compile(
    r"""^(?:unable\ to\ retrieve\ container\ logs\b
        |failed\ to\ try\ resolving\ symlinks\ in\ path\b
        |failed\ to\ get\ parse\ function\b
        |container\ "[^"]*"\ in\ pod\ "[^"]*"\ is\ (?:waiting\ to\ start|not\ available|terminated)
        |previous\ terminated\ container\ "[^"]*"\ in\ pod\ "[^"]*"\ not\ found
        |rpc\ error:\ code\ =\ \w+\ desc\ =
        |\{\s*"kind"\s*:\s*"Status"
        )""",
    re.VERBOSE,
)
"""Errors the kubelet or the API server's log endpoint gives instead of a container's output.

Anchored at the line start: kubelet messages begin there, a trainer quoting one in a
traceback does not."""


KUBECTL_ERROR = re.compile(r"^Error from server \(\w+\): (?P<message>.*)")
"""kubectl's rendering of a failed call's ``Status``: the API server never writes it into a
body. Seen as a whole body (a ``kubectl logs`` capture), it is a log endpoint's error only
when its message is one (``LOG_ERROR_LINE``, ``LOG_ENDPOINT_REFUSAL``); any other (the job's
own ``kubectl get configmap`` failing) is the job's output."""


LOG_ENDPOINT_REFUSAL = re.compile(
    r'^(?:pods "[^"]*" not found|a container name must be specified\b)')
"""The log endpoint's own 404/400 messages that ``LOG_ERROR_LINE`` does not cover."""


def log_fetch_problem(text: str, floor: int) -> str | None:
    """Why ``text`` is not a usable log (an API/kubelet error, too few lines), or ``None``.

    A failed read is an error status, not a body (:mod:`probes.kubernetes.client` raises it);
    the kubelet writes its error into a 200 body only when the read fails after streaming
    began (go-restful ``WriteError`` past the header: kubelet ``getContainerLogs``), so it
    is the body's last line. The same words earlier in the body, or kubectl's ``Error from
    server`` with more log around it, are the job's own output (it ran kubectl or a Go tool):
    read as log, never a failed fetch."""
    status = _status_message(text)
    if status is not None:
        return f"API error in the log stream: {status}"
    lines = [line for line in text.splitlines() if line.strip()]
    error = _stream_error(lines)
    if error is not None:
        return f"API error in the log stream: {error.strip()[:300]}"
    if len(lines) < floor:
        return f"{len(lines)} log line(s), below the floor of {floor}"
    return None


def _stream_error(lines: list[str]) -> str | None:
    """The log endpoint's error line of a body, if it holds one (see ``log_fetch_problem``):
    the kubelet's as the last line, kubectl's words for one as the whole body."""
    if not lines:
        return None
    last = lines[-1]
    if LOG_ERROR_LINE.match(last):
        return last
    kubectl = KUBECTL_ERROR.match(last) if len(lines) == 1 else None
    if kubectl is not None and (LOG_ERROR_LINE.match(kubectl["message"])
                                or LOG_ENDPOINT_REFUSAL.match(kubectl["message"])):
        return last
    return None


def _status_message(text: str) -> str | None:
    """The message of a ``{"kind": "Status"}`` object sent as the whole body, if it is one."""
    body = text.strip()
    if not body.startswith("{"):
        return None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # nested past the parser: a log line, no Status
        return None
    if isinstance(obj, dict) and obj.get("kind") == "Status":
        return str(obj.get("message") or obj.get("reason") or "Status object")
    return None
