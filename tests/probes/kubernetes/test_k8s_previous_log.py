"""A container caught running again inside its crash loop: its current log is a fresh start,
the error that ended each run is in the run before (``kubectl logs --previous``).

Replayed against the API stand-in (restartPolicy OnFailure, 5 restarts, each run failing in
30 s, the current one 20 s old): the row read 'RECURRING (5 attempts: Error, exit 1)' and
the diagnose the same, the error never named: only the current run's log was read.
"""

from __future__ import annotations

from datetime import timedelta

from kubernetes_asyncio.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
)

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge

PREVIOUS = ("Loading checkpoint shards: 100%|##########| 4/4\nTraceback (most recent call last):\n"
            "  File \"/app/train.py\", line 12, in <module>\n"
            "ModuleNotFoundError: No module named 'flash_attn'\n")


def _relapsing(standin: KubeStandIn, name: str) -> None:
    standin.jobs[name] = make_job(name, active=1)
    pod = make_pod(f"{name}-0", name, restarts=5)
    status = pod.status.container_statuses[0]
    status.state = V1ContainerState(running=V1ContainerStateRunning(
        started_at=NOW - timedelta(seconds=20)))
    status.last_state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=1, reason="Error", started_at=NOW - timedelta(seconds=90),
        finished_at=NOW - timedelta(seconds=60)))
    standin.pods[f"{name}-0"] = pod
    standin.logs[f"{name}-0"] = "Loading checkpoint shards: 100%|##########| 4/4\n"


async def test_a_relapse_names_the_previous_runs_error(standin: KubeStandIn,
                                                       probe: KubernetesProbe) -> None:
    """The previous run's log is read once: the Trend and diagnose quote its error."""
    _relapsing(standin, "sft-loop")
    standin.logs["sft-loop-0/previous"] = PREVIOUS
    [job] = (await probe.collect()).jobs
    report = judge(job).report
    assert "recurring-failure" in report.flags
    assert report.recommendation is not None
    assert "ModuleNotFoundError: No module named 'flash_attn'" in report.recommendation.why, (
        report.recommendation.why)
    previous = [call for call in standin.calls("GET", "/log")
                if call.query.get("previous", "").lower() == "true"]
    assert len(previous) == 1


async def test_no_previous_log_leaves_the_row_as_it_was(standin: KubeStandIn,
                                                        probe: KubernetesProbe) -> None:
    """Near miss: the previous run's log is gone (the API answers 400): the row is the
    recurring failure it was, the job's own log still read."""
    _relapsing(standin, "sft-loop")
    [job] = (await probe.collect()).jobs
    assert job.log is not None and job.log.status == "ok"
    report = judge(job).report
    assert report.trend.startswith("RECURRING (5 attempts: Error, exit 1)"), report.trend
