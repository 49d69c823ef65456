"""JSON nested past Python's parser, where a Kubernetes read looks for a ``Status`` object: a
pod's whole log, an error answer's body. Neither is the cluster's crash.

Found with the API stand-in: one running Job whose container printed ``{"a":`` and 100,000
``[`` (about 100 KB, one line) made ``jobtables sweep`` report the whole cluster
``unreachable`` ("probe error: RecursionError('maximum recursion depth exceeded ...')",
a traceback on stderr) and every other job of the cluster vanished from the report: the
log's check for a ``Status`` body (``pod_logs._status_message``) caught ``ValueError`` only,
and ``json.loads`` raises ``RecursionError`` for such nesting. Any user who can create a Job
the selector matches could blind the bot to the cluster that way.
"""

from __future__ import annotations

from kubernetes_asyncio.client.exceptions import ApiException

from probes.kubernetes.api_errors import api_error
from probes.kubernetes.pod_logs import log_fetch_problem
from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

NESTED = '{"a":' + "[" * 100_000
STEPS = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2 - critic/score/mean:0.4\n" * 5


async def test_one_pods_nested_log_blinds_nothing(standin: KubeStandIn,
                                                   probe: KubernetesProbe) -> None:
    """The cluster is read; the healthy run is reported as it is, and so is the one whose
    log is the nested text (a log, not a Status: nothing to fail its fetch)."""
    for name, log in (("rl-good", STEPS), ("rl-nested", NESTED + "\n")):
        standin.jobs[name] = make_job(name, active=1)
        standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
        standin.logs[f"{name}-0"] = log
    facts = await probe.collect()
    assert facts.status == "ok", facts.detail
    jobs = {job.record.job_id: job for job in facts.jobs}
    assert set(jobs) == {"rl-good", "rl-nested"}
    assert jobs["rl-nested"].log is not None and jobs["rl-nested"].log.status == "ok"


def test_a_nested_log_is_no_status_object() -> None:
    """The check itself: a nested body is no API error in the log stream."""
    assert log_fetch_problem(NESTED, 1) is None


def test_a_nested_error_body_is_quoted_not_raised() -> None:
    """An error answer whose body is nested past the parser (a hostile API server or proxy):
    the probe error quotes its start, as for any body that is no Status."""
    exc = ApiException(status=500, reason="Internal Server Error")
    exc.body = NESTED.encode()
    error = api_error("list jobs", exc)
    assert str(error).startswith("list jobs: HTTP 500 Internal Server Error: {\"a\":[[")
