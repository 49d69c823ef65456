"""A Job that ran past its ``activeDeadlineSeconds`` (condition Failed, reason
``DeadlineExceeded``): TIMEOUT, said in Kubernetes' words.

Replayed against the API stand-in: the row read 'Walltime TIMEOUT; no successor queued' and
the diagnose 'walltime TIMEOUT with no afterany successor': SLURM's chain (an afterany
successor queued behind a walltime) has no Kubernetes counterpart, and the deadline that
ended the Job was not named.
"""

from __future__ import annotations

from datetime import timedelta

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge


async def test_a_deadline_exceeded_job_names_its_deadline(standin: KubeStandIn,
                                                          probe: KubernetesProbe) -> None:
    """TIMEOUT, failed, the Trend and diagnose naming activeDeadlineSeconds, no 'afterany'."""
    standin.jobs["rl-deadline"] = make_job("rl-deadline", failed=1, finished=NOW,
                                           started=NOW - timedelta(hours=4),
                                           conditions=(("Failed", "DeadlineExceeded"),))
    standin.jobs["rl-deadline"].spec.active_deadline_seconds = 4 * 3600
    standin.pods["rl-deadline-0"] = make_pod("rl-deadline-0", "rl-deadline", phase="Failed",
                                             state="terminated", reason="Error")
    standin.logs["rl-deadline-0"] = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2\n"
    [job] = (await probe.collect()).jobs
    assert job.record.state is JobState.TIMEOUT
    report = judge(job).report
    assert report.verdict == "failed" and report.recommendation is not None
    said = f"{report.trend} {report.recommendation.why}"
    assert "activeDeadlineSeconds" in said and "afterany" not in said, said
    assert "successor" not in said, said
