"""A Job with ``restartPolicy: OnFailure`` whose container crashed, caught before the kubelet
restarts it in place: the pod stays Running (kubelet ``getPhase``: OnFailure, a container
failed, "in the process of restarting"), the container reads ``state.terminated`` (``Error``,
exit 1) with its ``restartCount`` not yet raised. The Job controller fails the Job only once
the restarts of its Running/Pending pods reach ``backoffLimit`` (``pastBackoffLimitOnFailure``;
``backoffLimit: 0``: any restart). Through the real probe against the API stand-in.

With a log-shipping sidecar still running the job read FAILED (``SidecarHeld``: 'the Job never
ends'), and alone it read a plain warning with no word of the restart.
"""

from __future__ import annotations

from datetime import timedelta

from kubernetes_asyncio.client import (
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
)

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import NOW, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_probe import only_job
from tests.report.factories import judge

CRASH_LOG = (
    "".join(f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
            for s in range(1, 8))
    + "Traceback (most recent call last):\n  File \"main_ppo.py\", line 12, in <module>\n"
    "RuntimeError: NCCL communicator was aborted on rank 0\n"
)


def _crashed(standin: KubeStandIn, name: str, *, restarts: int, backoff_limit: int = 6,
             containers: tuple[str, ...] = ("trainer",), exit_code: int = 1,
             reason: str = "Error") -> None:
    """A running OnFailure Job whose ``trainer`` just ended (``reason``, ``exit_code``) after
    a 40-minute run, ``restarts`` restarts so far; its other containers still run."""
    standin.jobs[name] = make_job(name, active=1, backoff_limit=backoff_limit,
                                  restart_policy="OnFailure", containers=containers)
    pod = make_pod(f"{name}-0", name, restarts=restarts, containers=containers,
                   restart_policy="OnFailure", created=NOW - timedelta(hours=2))
    trainer = pod.status.container_statuses[0]
    trainer.ready = False
    trainer.state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=exit_code, reason=reason, started_at=NOW - timedelta(minutes=41),
        finished_at=NOW - timedelta(minutes=1)))
    if restarts:
        trainer.last_state = V1ContainerState(terminated=V1ContainerStateTerminated(
            exit_code=1, reason="Error", started_at=NOW - timedelta(hours=2),
            finished_at=NOW - timedelta(minutes=42)))
    for sidecar in pod.status.container_statuses[1:]:  # never restarted
        sidecar.restart_count = 0
        sidecar.state = V1ContainerState(running=V1ContainerStateRunning(
            started_at=NOW - timedelta(hours=2)))
    standin.pods[f"{name}-0"] = pod
    standin.logs[f"{name}-0"] = CRASH_LOG
    standin.logs[f"{name}-0/trainer"] = CRASH_LOG


async def test_a_crash_caught_before_its_restart_in_place_reads_restarting(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Alone, and beside a running log-shipper sidecar: RUNNING, verdict restarting, the
    restart to come (3, of a backoffLimit of 6) and the crash in the Trend; never FAILED."""
    _crashed(standin, "rl-crash", restarts=2)
    _crashed(standin, "rl-crash-shipped", restarts=2, containers=("trainer", "fluent-bit"))
    facts = await probe.collect()
    for name in ("rl-crash", "rl-crash-shipped"):
        job = only_job(facts, name)
        assert job.record.state is JobState.RUNNING, (name, job.record.reason)
        report = judge(job).report
        assert report.verdict == "restarting", (name, report.verdict, report.trend)
        assert report.trend.startswith("Restart 3 of backoffLimit 6: trainer Error, exit 1"), \
            report.trend
        assert report.recommendation is not None
        assert "NCCL communicator was aborted" in report.recommendation.why
        assert "buffer-filling" not in report.flags


async def test_a_crash_that_exhausts_the_backoff_limit_reads_failed(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The restart to come reaches backoffLimit (5 restarts so far of 6; backoffLimit 0: any
    crash): the Job controller fails the Job as the kubelet restarts it, so it is FAILED
    (BackoffLimitExceeded) before the Failed condition is written. An OOM kill that exhausts
    it is OUT_OF_MEMORY."""
    _crashed(standin, "rl-last", restarts=5)
    _crashed(standin, "rl-zero", restarts=0, backoff_limit=0)
    _crashed(standin, "rl-oom", restarts=5, exit_code=137, reason="OOMKilled")
    facts = await probe.collect()
    for name in ("rl-last", "rl-zero"):
        job = only_job(facts, name)
        assert job.record.state is JobState.FAILED, (name, job.record.state)
        assert job.record.reason == "BackoffLimitExceeded"
        assert judge(job).report.verdict == "failed"
    assert only_job(facts, "rl-oom").record.state is JobState.OUT_OF_MEMORY


async def test_a_failed_condition_or_a_clean_exit_is_no_restart(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Near-misses: the Job already has its Failed condition (BackoffLimitExceeded) while the
    pod still reads the crash: FAILED; the trainer exited 0 beside a running sidecar
    (OnFailure restarts no success): held by its sidecar, COMPLETING, not restarting."""
    _crashed(standin, "rl-failed", restarts=6)
    standin.jobs["rl-failed"] = make_job("rl-failed", backoff_limit=6,
                                         restart_policy="OnFailure",
                                         conditions=(("Failed", "BackoffLimitExceeded"),))
    _crashed(standin, "sft-done", restarts=0, containers=("trainer", "fluent-bit"),
             exit_code=0, reason="Completed")
    facts = await probe.collect()
    failed = only_job(facts, "rl-failed")
    assert failed.record.state is JobState.FAILED
    assert judge(failed).report.verdict == "failed"
    done = only_job(facts, "sft-done")
    assert done.record.state is JobState.COMPLETING, done.record.reason
    assert judge(done).report.verdict != "restarting"


async def test_a_crash_loop_caught_between_crash_and_restart_is_recurring(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The third 40-second run of a loop ended, before its restart: restarting, and RECURRING
    (3 attempts) with a diagnose, as the same loop reads in CrashLoopBackOff or running
    again. A crash after a 40-minute run (the kubelet's backoff reset) is no loop."""
    _crashed(standin, "rl-loop", restarts=2)
    ended = standin.pods["rl-loop-0"].status.container_statuses[0].state.terminated
    ended.started_at = NOW - timedelta(seconds=70)
    ended.finished_at = NOW - timedelta(seconds=30)
    facts = await probe.collect()
    report = judge(only_job(facts, "rl-loop")).report
    assert report.verdict == "restarting"
    assert "recurring-failure" in report.flags, report.trend
    assert report.recommendation is not None and "3 attempts" in report.recommendation.why
    _crashed(standin, "rl-once-long", restarts=2)
    report = judge(only_job(await probe.collect(), "rl-once-long")).report
    assert "recurring-failure" not in report.flags


async def test_a_jobset_counts_each_child_jobs_restarts_against_its_own_limit(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A JobSet's child Job with backoffLimit 4 (its template's), rank 1 crashed (1 restart)
    beside rank 0 (2 restarts), the other child Job's 3 restarts not counted: restart 4 of 4
    reaches it, and with no failurePolicy the JobSet fails with its Job; with maxRestarts 2
    (none used) the JobSet restarts instead: restarting, said so."""
    assert standin.jobsets is not None
    for name, policy in (("rl-js", None), ("rl-js-retry", {"maxRestarts": 2})):
        jobset = make_jobset(name)
        jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 4
        if policy:
            jobset["spec"]["failurePolicy"] = policy
        standin.jobsets[name] = jobset
        for job_index, restarts in ((0, (2, 1)), (1, (3, 0))):
            child = f"{name}-workers-{job_index}"
            standin.jobs[child] = make_job(child, active=2, owner_jobset=name,
                                           restart_policy="OnFailure")
            for index, count in enumerate(restarts):
                pod = make_pod(f"{child}-{index}", child, jobset=name, index=index,
                               replicated_job=("workers", job_index), restarts=count,
                               restart_policy="OnFailure")
                if (job_index, index) == (0, 1):
                    pod.status.container_statuses[0].state = V1ContainerState(
                        terminated=V1ContainerStateTerminated(exit_code=1, reason="Error"))
                standin.pods[pod.metadata.name] = pod
                standin.logs[pod.metadata.name] = CRASH_LOG
    facts = await probe.collect()
    failed = only_job(facts, "rl-js")
    assert (failed.record.state, failed.record.reason) == (JobState.FAILED,
                                                           "BackoffLimitExceeded")
    retried = judge(only_job(facts, "rl-js-retry")).report
    assert retried.verdict == "restarting", retried.trend
    assert retried.recommendation is not None
    assert ("restart 4 of backoffLimit 4 (its Job fails; the JobSet restarts, 2 restart(s) "
            "left): pod/rl-js-retry-workers-0-1 trainer Error, exit 1") in \
        retried.recommendation.why


def _retried(standin: KubeStandIn, name: str, *, retry: str | None) -> None:
    """A ``restartPolicy: Never`` Job (backoffLimit 6) whose first pod crashed at step 7
    (``status.failed`` 1) and whose retry is ``retry`` (``Pending``, ``Running``) or not
    created yet (``None``)."""
    standin.jobs[name] = make_job(name, active=1 if retry else 0, failed=1, backoff_limit=6)
    standin.pods[f"{name}-a"] = make_pod(f"{name}-a", name, phase="Failed", state="terminated",
                                         reason="Error", created=NOW - timedelta(hours=1))
    standin.logs[f"{name}-a"] = CRASH_LOG
    if retry == "Pending":
        standin.pods[f"{name}-b"] = make_pod(f"{name}-b", name, phase="Pending", state="waiting",
                                             reason="ContainerCreating",
                                             created=NOW - timedelta(seconds=20))
    elif retry == "Running":
        standin.pods[f"{name}-b"] = make_pod(f"{name}-b", name,
                                             created=NOW - timedelta(minutes=20))
        standin.logs[f"{name}-b"] = CRASH_LOG.split("Traceback")[0]


async def test_a_failed_attempt_whose_retry_is_to_come_reads_restarting(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """restartPolicy Never: the attempt crashed at step 7, the controller's retry pending
    (ContainerCreating) or not created yet (its backoff): restarting with the count against
    backoffLimit, the step kept, out of the buffer table. Both read 'Filling buffer',
    'Pending (ContainerCreating)' / 'Pending (Error)', recommendation none, the crash unsaid."""
    _retried(standin, "rl-retry", retry="Pending")
    _retried(standin, "rl-retry-later", retry=None)
    facts = await probe.collect()
    for name, then in (("rl-retry", "retry pending: ContainerCreating"),
                       ("rl-retry-later", "no retry yet")):
        job = only_job(facts, name)
        assert job.record.state is JobState.PENDING
        report = judge(job).report
        assert report.verdict == "restarting", (name, report.verdict, report.trend)
        assert "buffer-filling" not in report.flags
        assert report.trend.startswith("Retry 1 of backoffLimit 6: Error, exit 1; "), report.trend
        assert report.step == 7
        assert report.recommendation is not None
        assert then in report.recommendation.why and "NCCL communicator" in \
            report.recommendation.why, report.recommendation


async def test_an_evicted_attempt_is_told_by_its_eviction(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The kubelet evicted the pod (node-pressure: ``status.reason`` Evicted and the
    DisruptionTarget TerminationByKubelet with its message); its retry is unschedulable: the
    eviction and the scheduler's why are the Trend, not 'Pending (Unschedulable...)' in the
    buffer table."""
    from kubernetes_asyncio.client import V1PodCondition

    _retried(standin, "rl-evicted", retry=None)
    evicted = standin.pods["rl-evicted-a"]
    said = ("The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
            "available: 9Mi.")
    evicted.status.reason, evicted.status.message = "Evicted", said
    evicted.status.conditions = [V1PodCondition(type="DisruptionTarget", status="True",
                                                reason="TerminationByKubelet", message=said)]
    standin.pods["rl-evicted-b"] = make_pod("rl-evicted-b", "rl-evicted", phase="Pending",
                                            state="running", created=NOW)
    standin.pods["rl-evicted-b"].status.container_statuses = None
    report = judge(only_job(await probe.collect(), "rl-evicted")).report
    assert report.verdict == "restarting"
    assert report.trend.startswith("Retry 1 of backoffLimit 6: TerminationByKubelet"), \
        report.trend
    assert report.recommendation is not None
    assert "The node was low on resource: ephemeral-storage" in report.recommendation.why
    assert "retry pending: Unschedulable" in report.recommendation.why


async def test_a_fresh_launch_or_a_running_retry_is_no_restart(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Near-misses: a first pod pending (no attempt failed) is bring-up; a retry that runs
    again is a running job (its earlier failure is history)."""
    standin.jobs["rl-fresh"] = make_job("rl-fresh", active=1, started=NOW)
    standin.pods["rl-fresh-a"] = make_pod("rl-fresh-a", "rl-fresh", phase="Pending",
                                          state="waiting", reason="ContainerCreating",
                                          created=NOW)
    _retried(standin, "rl-rerun", retry="Running")
    facts = await probe.collect()
    fresh = judge(only_job(facts, "rl-fresh")).report
    assert "buffer-filling" in fresh.flags and fresh.verdict == "buffering"
    rerun = judge(only_job(facts, "rl-rerun")).report
    assert rerun.verdict == "healthy", rerun.trend


async def test_an_indexed_jobs_retry_counts_against_its_per_index_limit(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """backoffLimitPerIndex 3 (backoffLimit then the API server's largest int32): index 1
    failed twice, its retry pending, index 0 done: 'retry 2 of backoffLimitPerIndex 3', not
    'retry 2 of backoffLimit 2147483647'."""
    job = make_job("datagen-idx", active=1, failed=2, backoff_limit=2147483647)
    job.spec.backoff_limit_per_index = 3
    standin.jobs["datagen-idx"] = job
    standin.pods["datagen-idx-0"] = make_pod("datagen-idx-0", "datagen-idx", index=0,
                                             phase="Succeeded", state="terminated",
                                             reason="Completed",
                                             created=NOW - timedelta(minutes=50))
    for n, minutes in enumerate((40, 20)):
        standin.pods[f"datagen-idx-1-{n}"] = make_pod(
            f"datagen-idx-1-{n}", "datagen-idx", index=1, phase="Failed", state="terminated",
            reason="Error", created=NOW - timedelta(minutes=minutes))
    standin.pods["datagen-idx-1-2"] = make_pod("datagen-idx-1-2", "datagen-idx", index=1,
                                               phase="Pending", state="waiting",
                                               reason="ContainerCreating", created=NOW)
    job = only_job(await probe.collect(), "datagen-idx")
    assert job.record.labels["jobtables/restarting"] == (
        "retry 2 of backoffLimitPerIndex 3: Error, exit 1; retry pending: ContainerCreating")
    report = judge(job).report
    assert report.verdict == "restarting", report.trend
    assert "recurring-failure" in report.flags  # two attempts of index 1 alike


async def test_a_failure_past_the_backoff_limit_is_no_retry_to_come(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """restartPolicy Never, backoffLimit 1: the second attempt failed too (the controller not
    yet done counting it: status.failed still 1, no condition): the Job fails with it, FAILED
    BackoffLimitExceeded, not 'retry 2 of backoffLimit 1; no retry yet'."""
    _retried(standin, "rl-spent", retry=None)
    standin.jobs["rl-spent"].spec.backoff_limit = 1
    standin.pods["rl-spent-b"] = make_pod("rl-spent-b", "rl-spent", phase="Failed",
                                          state="terminated", reason="Error",
                                          created=NOW - timedelta(minutes=10))
    job = only_job(await probe.collect(), "rl-spent")
    assert (job.record.state, job.record.reason) == (JobState.FAILED, "BackoffLimitExceeded")
    assert "jobtables/restarting" not in job.record.labels
    assert judge(job).report.verdict == "failed"
