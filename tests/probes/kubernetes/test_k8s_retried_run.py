"""A Job whose first attempt failed and whose retry runs, through ``jobtables sweep`` against
the API stand-in.

``restartPolicy: Never``, ``backoffLimit: 6``: the first pod Failed (``Error``, exit 1), the
controller counted it (``status.failed: 1``) and created a second, which runs and logs its
steps. The row read 'healthy' with nothing of the failed attempt (only the day's thread told
the restart, bb0f6bb): the row says the restart and how the attempt ended, as the thread's
'1 restart since the last sweep' counts it, and a healthy retry stays healthy; the same
failure on two attempts before it is the recurring-failure rule's.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from probes.kubernetes import markers
from report import pods
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.contract import sweep
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_jobset_restart import add_jobset

HF_STEPS = "".join(
    f"{{'loss': {1.5 - step / 20:.3f}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
    f"'epoch': {step / 100:.2f}}}\n" for step in range(1, 9))


def add_retried(standin: KubeStandIn, name: str, failed: int) -> None:
    """A Job whose ``failed`` first pods ended 'Error, exit 1' and whose next pod runs."""
    standin.jobs[name] = make_job(name, active=1, failed=failed, backoff_limit=6)
    for n in range(failed):
        pod = f"{name}-f{n}"
        standin.pods[pod] = make_pod(pod, name, phase="Failed", state="terminated",
                                     reason="Error", created=NOW - timedelta(hours=3 - n))
        standin.logs[pod] = "Traceback (most recent call last):\nRuntimeError: boom\n"
    standin.pods[f"{name}-run"] = make_pod(f"{name}-run", name,
                                           created=NOW - timedelta(minutes=30))
    standin.logs[f"{name}-run"] = HF_STEPS


async def test_a_retry_running_says_its_restart_and_how_the_attempt_ended(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """One failed attempt, its retry stepping: not failed nor restarting (the Job runs
    again), its Trend ends with the restart and the attempt's end; a first attempt says
    none; two identical failures before the retry are recurring-failure."""
    add_retried(standin, "sft-retried", failed=1)
    add_retried(standin, "sft-first", failed=0)
    add_retried(standin, "sft-twice", failed=2)
    jobs = {job["job_id"]: job for job in (await sweep(standin, tmp_path))["jobs"]}
    retried = jobs["sft-retried"]
    assert retried["state"] == "RUNNING" and retried["verdict"] == "healthy", retried
    assert retried["trend"].endswith("; restart 1 (Error, exit 1)"), retried["trend"]
    first = jobs["sft-first"]
    assert first["verdict"] == "healthy" and "restart" not in first["trend"], first
    twice = jobs["sft-twice"]
    assert "recurring-failure" in twice["flags"], twice
    assert twice["verdict"] != "failed", twice


def test_the_reports_spelling_of_the_restarted_labels_is_the_probes() -> None:
    """``report`` may not import the probe: its copies of the label names stay equal."""
    assert (pods.RESTARTED_LABEL, pods.RESTARTED_POD_LABEL) == (
        markers.RESTARTED_LABEL, markers.RESTARTED_POD_LABEL)


async def test_a_restarted_jobset_up_again_says_its_restart(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A JobSet its failure policy restarted once, its new gang up and stepping: healthy
    again, its Trend ending with the restart against maxRestarts (the child Job that failed
    is deleted: how it ended is not known); a first launch says none."""
    add_jobset(standin, "rl-back", restarts=1, leader_up=True)
    add_jobset(standin, "rl-fresh", restarts=0, leader_up=True)
    jobs = {job["job_id"]: job for job in (await sweep(standin, tmp_path))["jobs"]}
    back = jobs["rl-back"]
    assert back["verdict"] not in ("failed", "restarting") and back["step"] == 3, back
    assert back["trend"].endswith("; restart 1 of maxRestarts 3"), back["trend"]
    assert "restart" not in jobs["rl-fresh"]["trend"], jobs["rl-fresh"]


async def test_a_long_attempt_end_keeps_the_trend_short(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A failed attempt evicted with the kubelet's long pressure message (found by review of
    2ecabf8): the Trend's restart end is shortened like any cell text, so the Trend stays
    within ``TREND_MAX``, still ending with the restart; the note keeps the whole message."""
    from kubernetes_asyncio.client import V1PodCondition

    from report.trend import TREND_MAX
    from tests.probes.kubernetes.test_k8s_disruption import PRESSURE

    add_retried(standin, "sft-evicted", failed=1)
    pod = standin.pods["sft-evicted-f0"]
    pod.status.conditions = [V1PodCondition(
        type="DisruptionTarget", status="True", reason="TerminationByKubelet",
        message=PRESSURE, last_transition_time=NOW - timedelta(hours=2))]
    pod.status.reason, pod.status.message = "Evicted", PRESSURE
    job = {j["job_id"]: j for j in (await sweep(standin, tmp_path))["jobs"]}["sft-evicted"]
    assert job["verdict"] == "healthy", job
    assert "restart 1 (" in job["trend"] and len(job["trend"]) <= TREND_MAX, job["trend"]
