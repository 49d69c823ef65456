"""KubernetesProbe against the local API stand-in (real client, real HTTP, real kubeconfig)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.config import KubernetesCluster
from probes.errors import CommandError, InvalidJobIdError
from probes.kubernetes.probe import KubernetesProbe
from probes.models import ClusterFacts, JobFacts, JobState
from probes.registry import make_probe
from tests.probes.kubernetes.builders import NOW, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "".join(
    f"step:{s} - actor/entropy:0.5{s} - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
    for s in (1, 2, 3)
)
HF_LOG = "{'loss': 1.2, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 0.1}\n"


def only_job(facts: ClusterFacts, job_id: str) -> JobFacts:
    matches = [job for job in facts.jobs if job.record.job_id == job_id]
    assert len(matches) == 1, [job.record.job_id for job in facts.jobs]
    return matches[0]


def add_running(standin: KubeStandIn, name: str, log: str, **job_kw: object) -> None:
    standin.jobs[name] = make_job(name, active=1, **job_kw)  # type: ignore[arg-type]
    standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
    standin.logs[f"{name}-0"] = log


async def test_healthy_rl_job(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A running RL job yields RUNNING, its pod log path, and verl metrics at the latest step."""
    add_running(standin, "rl-grpo-7b", VERL_LOG, labels={"user": "alice"},
                annotations={"jobtables/config-hash": "c0ffee"})
    facts = await probe.collect()
    assert facts.status == "ok" and facts.kind == "kubernetes"
    job = only_job(facts, "rl-grpo-7b")
    record = job.record
    assert record.state is JobState.RUNNING and record.reason is None
    assert (record.user, record.pods_total, record.pods_running) == ("alice", 1, 1)
    assert record.stdout_path == "pod/rl-grpo-7b-0" and record.workdir is None
    assert record.elapsed_s == 2 * 3600
    assert record.labels["image"].startswith("ghcr.io/example/trainer")
    assert record.labels["config_hash"] == "c0ffee"
    assert job.log is not None and job.log.status == "ok" and job.log.attempts == 1
    assert job.summary is not None and job.summary.points[-1].step == 3
    assert "entropy" in job.summary.points[-1].values
    assert job.checkpoints is None and job.trials is None
    # jobs, jobsets, pytorchjobs, rayjobs, tfjobs, mpijobs, pods, log: in turn
    assert facts.round_trips == 8


async def test_hf_dict_log_gives_metrics(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A Hugging Face Trainer dict line is parsed into a metric point with the loss."""
    add_running(standin, "sft-llama", HF_LOG)
    job = only_job(await probe.collect(), "sft-llama")
    assert job.summary is not None and job.summary.points
    assert job.summary.points[-1].values["loss"] == pytest.approx(1.2)


async def test_json_log_line_is_read_verbatim(standin: KubeStandIn,
                                              probe: KubernetesProbe) -> None:
    """A log that is one JSON document comes back as written, not as a Python repr."""
    add_running(standin, "sft-json", '{"loss": 1.5, "step": 7}\n')
    job = only_job(await probe.collect(), "sft-json")
    assert job.log is not None and job.log.text == '{"loss": 1.5, "step": 7}\n'


async def test_tail_bounds_are_sent(standin: KubeStandIn, cluster: KubernetesCluster) -> None:
    """tailLines and limitBytes go to the API and bound what comes back. The 10-line window
    is 80 bytes: the API sends its first 30 (lines 90-93, then 'li'), so the tail is read
    again with narrower windows until it ends at the newest line (it used to keep lines
    90-93: a verbose trainer's newest steps were never read)."""
    add_running(standin, "rl-long", "".join(f"line {i}\n" for i in range(100)))
    bounded = cluster.model_copy(update={"tail_lines": 10, "tail_bytes": 30})
    probe = KubernetesProbe(bounded, clock=lambda: NOW)
    try:
        job = only_job(await probe.collect(), "rl-long")
    finally:
        await probe.aclose()
    first, *rereads = standin.calls("GET", "/log")
    assert (first.query["tailLines"], first.query["limitBytes"]) == ("10", "30")
    assert rereads and all(call.query["limitBytes"] == "30" for call in rereads)
    assert [int(call.query["tailLines"]) for call in rereads] == [5, 1]
    assert job.log is not None and len(job.log.text.encode()) <= 30
    assert job.log.text == "line 99\n"


def _verl_steps(first: int, last: int) -> str:
    return "".join(f"step:{s} - actor/entropy:0.51 - actor/grad_norm:0.2 - critic/score/mean:0.4\n"
                   for s in range(first, last + 1))


@pytest.mark.parametrize(("before", "tail_lines", "reads"), [
    (3, 2000, None),  # a short log: the window holds all of it, the huge line too
    (300, 60, 2),  # a long log: the window's own lines say where the cut line is
])
async def test_a_huge_line_does_not_hide_the_newest_steps(
        standin: KubeStandIn, cluster: KubernetesCluster, before: int, tail_lines: int,
        reads: int | None) -> None:
    """A multi-megabyte line (a dumped tensor, a \\r progress bar) in the tail: the API cuts
    the ``tailLines`` window at ``limitBytes`` from its start, so the newest steps after the
    huge line were never read and the run read as stuck at an old step. The tail is read
    again with a window that ends past the cut line; the reads stay bounded."""
    from probes.kubernetes.client import MAX_REREADS

    huge = "x" * (3 * 4096) + "\n"
    add_running(standin, "rl-huge", _verl_steps(1, before) + huge + _verl_steps(before + 1,
                                                                               before + 28))
    bounded = cluster.model_copy(update={"tail_lines": tail_lines, "tail_bytes": 4096})
    probe = KubernetesProbe(bounded, clock=lambda: NOW)
    try:
        job = only_job(await probe.collect(), "rl-huge")
    finally:
        await probe.aclose()
    assert job.log is not None and job.log.status == "ok" and "xxxx" not in job.log.text
    assert job.summary is not None and job.summary.points[-1].step == before + 28
    calls = standin.calls("GET", "/log")
    assert len(calls) == reads if reads is not None else 2 <= len(calls) <= 1 + MAX_REREADS
    assert all(call.query["limitBytes"] == "4096" for call in calls)


async def test_a_huge_last_line_keeps_the_steps_before_it(
        standin: KubeStandIn, cluster: KubernetesCluster) -> None:
    """The newest line itself is past the byte bound (a progress bar redrawn with \\r and
    no newline): no window can skip it, so its start is kept after the steps before it, in
    one read."""
    add_running(standin, "rl-bar", _verl_steps(1, 40) + "\r 12%|#   | 3/25" * 2000)
    bounded = cluster.model_copy(update={"tail_lines": 2000, "tail_bytes": 8192})
    probe = KubernetesProbe(bounded, clock=lambda: NOW)
    try:
        job = only_job(await probe.collect(), "rl-bar")
    finally:
        await probe.aclose()
    assert job.summary is not None and job.summary.points[-1].step == 40
    assert job.log is not None and len(job.log.text.encode()) <= 8192


async def test_image_pull_backoff_is_bring_up(standin: KubeStandIn,
                                              probe: KubernetesProbe) -> None:
    """An image pull back-off during bring-up is PENDING with its reason, and no log is read."""
    standin.jobs["rl-new"] = make_job("rl-new", active=1)
    standin.pods["rl-new-0"] = make_pod("rl-new-0", "rl-new", phase="Pending", state="waiting",
                                        reason="ImagePullBackOff")
    job = only_job(await probe.collect(), "rl-new")
    assert job.record.state is JobState.PENDING
    assert job.record.reason == "ImagePullBackOff"
    assert job.log is None and job.summary is None
    assert not standin.calls("GET", "/log")


@pytest.mark.parametrize(("started_min", "failing"), [(10, False), (29, False), (31, True),
                                                     (360, True)])
async def test_an_image_pull_failing_past_its_grace_is_a_fault(
        standin: KubeStandIn, probe: KubernetesProbe, started_min: int, failing: bool) -> None:
    """An image pull back-off is bring-up for 30 minutes (a registry hiccup heals); past that
    it is failing (a bad tag): failed with a diagnose, out of the buffer table (it sat in
    "Filling buffer" for ever)."""
    from datetime import timedelta

    from tests.report.factories import judge

    standin.jobs["rl-pull"] = make_job("rl-pull", active=1,
                                       started=NOW - timedelta(minutes=started_min))
    standin.pods["rl-pull-0"] = make_pod("rl-pull-0", "rl-pull", phase="Pending",
                                         state="waiting", reason="ImagePullBackOff")
    report = judge(only_job(await probe.collect(), "rl-pull")).report
    if failing:
        assert report.verdict == "failed" and "buffer-filling" not in report.flags
        assert report.trend.startswith("ImagePullBackOff for ")
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"
    else:
        assert report.verdict == "buffering" and "buffer-filling" in report.flags


async def test_oom_killed_pod(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A job failed by an OOMKilled pod is OUT_OF_MEMORY with exit code 137; its log is read."""
    standin.jobs["sft-oom"] = make_job("sft-oom", failed=1, finished=NOW,
                                       conditions=(("Failed", "BackoffLimitExceeded"),))
    standin.pods["sft-oom-0"] = make_pod("sft-oom-0", "sft-oom", phase="Failed",
                                         state="terminated", reason="OOMKilled")
    standin.logs["sft-oom-0"] = HF_LOG
    record = only_job(await probe.collect(), "sft-oom").record
    assert record.state is JobState.OUT_OF_MEMORY
    assert (record.reason, record.exit_code, record.pods_running) == ("OOMKilled", 137, 0)


async def test_running_with_zero_pods_is_silent_wedge(standin: KubeStandIn,
                                                      probe: KubernetesProbe) -> None:
    """Active by the status with no pod under either job-name label is the silent wedge."""
    standin.jobs["rl-wedged"] = make_job("rl-wedged", active=1)
    facts = await probe.collect()
    record = only_job(facts, "rl-wedged").record
    assert record.state is JobState.RUNNING and record.pods_total == 0
    assert record.labels["jobtables/silent-wedge"] == "no-pods"
    (pods,) = standin.calls("GET", "/pods")  # one namespace-wide list, matched locally
    assert "labelSelector" not in pods.query


async def test_pods_of_another_object_named_like_the_job_are_not_its_own(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The Job ``rl-same`` was re-created (new uid, its pod still pending) while the old run's
    failed pod is still listed under the same job-name label; a bare pod labelled
    ``job-name: rl-victim`` sits beside ``rl-victim``'s own. Neither is read as the job's: the
    new job does not carry the old crash, the victim's row is not the forger's log."""
    standin.jobs["rl-same"] = make_job("rl-same", active=1)
    old = make_pod("rl-same-old", "rl-same", phase="Failed", state="terminated", reason="Error")
    old.metadata.labels.update({"batch.kubernetes.io/controller-uid": "uid-OLD",
                                "controller-uid": "uid-OLD"})
    old.metadata.owner_references[0].uid = "uid-OLD"
    standin.pods["rl-same-old"] = old
    standin.logs["rl-same-old"] = "Traceback (most recent call last):\nRuntimeError: old crash\n"
    add_running(standin, "rl-victim", VERL_LOG)
    forged = make_pod("mallory-pod", "rl-victim", created=NOW)
    forged.metadata.labels = {"batch.kubernetes.io/job-name": "rl-victim",
                              "job-name": "rl-victim"}
    forged.metadata.owner_references = None
    standin.pods["mallory-pod"] = forged
    standin.logs["mallory-pod"] = "RuntimeError: CUDA out of memory <!channel>\n"
    facts = await probe.collect()
    same = only_job(facts, "rl-same")
    assert same.record.pods_total == 0 and same.log is None
    victim = only_job(facts, "rl-victim")
    assert victim.record.stdout_path == "pod/rl-victim-0" and victim.record.pods_total == 1
    assert victim.summary is not None and not victim.summary.faults


async def test_a_jobs_own_jobtables_label_is_no_marker(standin: KubeStandIn,
                                                      probe: KubernetesProbe) -> None:
    """A healthy running Job labelled ``jobtables/silent-wedge: vanished`` by its creator: the
    probe's markers are its own to write, so the label is dropped, not read as a wedge."""
    add_running(standin, "rl-labelled", VERL_LOG,
                labels={"jobtables/silent-wedge": "vanished", "jobtables/kind": "JobSet"})
    record = only_job(await probe.collect(), "rl-labelled").record
    assert "jobtables/silent-wedge" not in record.labels
    assert record.labels["jobtables/kind"] == "Job" and record.state is JobState.RUNNING


async def test_one_pod_list_per_sweep(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Pods are listed once per sweep whatever the job count; each job still gets its own pods
    (by either job-name label), and the calls stay one per list plus one per log."""
    for n in range(6):
        add_running(standin, f"rl-many-{n}", VERL_LOG)
    old_label = make_pod("sft-old-0", "sft-old")
    old_label.metadata.labels = {"job-name": "sft-old"}  # pre-1.27: only the short label
    standin.jobs["sft-old"] = make_job("sft-old", active=1)
    standin.pods["sft-old-0"] = old_label
    standin.logs["sft-old-0"] = HF_LOG
    facts = await probe.collect()
    assert len(standin.calls("GET", "/pods")) == 1
    # jobs, jobsets, pytorchjobs, rayjobs, tfjobs, mpijobs, pods, 1 log a job
    assert facts.round_trips == 7 + 7
    for n in range(6):
        job = only_job(facts, f"rl-many-{n}")
        assert job.record.pods_total == 1 and job.record.stdout_path == f"pod/rl-many-{n}-0"
    assert only_job(facts, "sft-old").record.stdout_path == "pod/sft-old-0"


async def test_vanished_job_stays_reported_for_recent_hours(
        standin: KubeStandIn, cluster: KubernetesCluster) -> None:
    """A job active last sweep and gone now is FAILED vanished, and stays in the report as a
    terminated job does (CONTRACT: ``recent_hours`` is how long a terminated job stays; the
    seed: a record that disappeared is terminal), its end the sweep that found it gone; then
    it ages out. It was reported once, then dropped: a /jobs a minute later no longer listed
    it and ``/job`` answered 'no job ... in the current report'. A name re-created is the new
    job only."""
    moment = {"now": NOW}
    reported: set[str] = set()
    probe = KubernetesProbe(cluster, clock=lambda: moment["now"], vanished=reported)
    add_running(standin, "rl-gone", VERL_LOG)
    add_running(standin, "rl-stays", VERL_LOG)
    add_running(standin, "rl-again", VERL_LOG)
    try:
        first = await probe.collect()
        for name in ("rl-gone", "rl-again"):
            del standin.jobs[name], standin.pods[f"{name}-0"]
        second = await probe.collect()
        moment["now"] = NOW + timedelta(hours=23)
        add_running(standin, "rl-again", VERL_LOG)  # re-created under the same name
        third = await probe.collect()
        one = await probe.collect_one("rl-gone")
        moment["now"] = NOW + timedelta(hours=25)
        fourth = await probe.collect()
    finally:
        await probe.aclose()
    assert only_job(first, "rl-gone").record.state is JobState.RUNNING
    gone = only_job(second, "rl-gone").record
    assert (gone.state, gone.reason, gone.pods_total) == (JobState.FAILED, "vanished", 0)
    assert gone.labels["jobtables/silent-wedge"] == "vanished" and gone.end_time == NOW
    assert reported == {"rl-gone"}  # "rl-again" re-created: a new job
    assert only_job(third, "rl-gone").record == gone
    assert only_job(third, "rl-again").record.state is JobState.RUNNING
    assert [job.record for job in one.jobs] == [gone]
    assert sorted(j.record.job_id for j in fourth.jobs) == ["rl-again", "rl-stays"]


async def test_finished_or_cancelled_job_disappearing_is_not_vanished(
    standin: KubeStandIn, probe: KubernetesProbe
) -> None:
    """A completed job removed by its TTL, or one we cancelled, just leaves the report."""
    standin.jobs["sft-done"] = make_job("sft-done", succeeded=1, finished=NOW,
                                        conditions=(("Complete", None),))
    add_running(standin, "rl-cancel-me", VERL_LOG)
    await probe.collect()
    del standin.jobs["sft-done"]
    await probe.cancel("rl-cancel-me")
    facts = await probe.collect()
    assert facts.jobs == ()


async def test_api_500_makes_cluster_unreachable(standin: KubeStandIn,
                                                 probe: KubernetesProbe) -> None:
    """An API server answering 500 (after the one retry) is an unreachable cluster whose
    detail says why."""
    standin.faults["jobs"] = "500"
    facts = await probe.collect()
    assert facts.status == "unreachable" and facts.jobs == ()
    assert facts.detail is not None
    assert "HTTP 500" in facts.detail and "etcdserver: request timed out" in facts.detail
    assert facts.round_trips == 2


async def test_one_transient_api_answer_is_retried(standin: KubeStandIn,
                                                  probe: KubernetesProbe) -> None:
    """One 500 on the job list, then answers: the sweep goes on (a single transient answer
    made the whole cluster unreachable)."""
    add_running(standin, "rl-after-500", VERL_LOG)
    standin.faults["jobs"] = "500-once"
    facts = await probe.collect()
    assert facts.status == "ok" and only_job(facts, "rl-after-500").log is not None
    assert len(standin.calls("GET", "/jobs")) == 2


async def test_the_retry_never_outlasts_the_sweep_budget(
        cluster: KubernetesCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 503 with less budget left than its wait is not retried (the sleep would overrun the
    sweep's ``timeout_s``): the error is raised at once, nothing slept."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from probes.errors import UnreachableError
    from probes.kubernetes import client as kube
    from probes.kubernetes import session

    api = kube.KubeClient(cluster.model_copy(update={"timeout_s": 0.3}))
    asked = 0

    async def unavailable(**query: object) -> dict[str, object]:
        nonlocal asked
        asked += 1
        raise ApiException(status=503, reason="Service Unavailable")

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(session.asyncio, "sleep", sleep)
    with api.budget(), pytest.raises(UnreachableError):
        await api._list_pages("list jobs", unavailable)
    assert slept == [] and asked == 1  # the 0.5 s wait is more than the budget holds


async def test_a_list_past_its_bound_is_refused_not_cut(cluster: KubernetesCluster) -> None:
    """A list still holding a continue token after MAX_PAGES pages is an error naming the
    bound, not a silently cut list (a cut pod list read as running jobs with no pods:
    silent wedges); an expired continue token (410) lists again, whole, once."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from probes.errors import UnreachableError
    from probes.kubernetes import client as kube
    from probes.kubernetes import session

    api = kube.KubeClient(cluster)
    endless = 0

    async def page(**query: object) -> dict[str, object]:
        nonlocal endless
        endless += 1
        return {"items": [{"n": endless}], "metadata": {"continue": f"t{endless}"}}

    with pytest.raises(UnreachableError,
                       match=f"more than {session.PAGE_SIZE * session.MAX_PAGES}"):
        await api._list_pages("list pods", page)
    assert endless == session.MAX_PAGES
    served: list[object] = []

    async def expiring(**query: object) -> dict[str, object]:
        token = query.get("_continue")
        served.append(token)
        if token == "a" and served.count("a") == 1:
            raise ApiException(status=410, reason="Gone")
        return ({"items": [{"n": 1}], "metadata": {"continue": "a"}} if token is None
                else {"items": [{"n": 2}], "metadata": {}})

    assert await api._list_pages("list jobs", expiring) == [{"n": 1}, {"n": 2}]
    assert served == [None, "a", None, "a"]


async def test_api_timeout_makes_cluster_unreachable(standin: KubeStandIn,
                                                     cluster: KubernetesCluster) -> None:
    """An API server that never answers is unreachable within the request timeout."""
    standin.faults["jobs"] = "hang"
    probe = KubernetesProbe(cluster.model_copy(update={"request_timeout_s": 0.2}))
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "unreachable"
    assert facts.detail is not None and "timeout" in facts.detail


async def test_wrong_token_is_unreachable_with_reason(standin: KubeStandIn,
                                                      cluster: KubernetesCluster,
                                                      tmp_path: Path) -> None:
    """A refused token is reported as an unreachable cluster naming the 401."""
    config = standin.write_kubeconfig(tmp_path / "bad", token="wrong")
    probe = KubernetesProbe(cluster.model_copy(update={"kubeconfig": str(config)}))
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "unreachable"
    assert facts.detail is not None and "401" in facts.detail


async def test_missing_kubeconfig_is_unreachable(cluster: KubernetesCluster,
                                                 tmp_path: Path) -> None:
    """A kubeconfig that does not exist is reported, not raised."""
    probe = KubernetesProbe(cluster.model_copy(update={"kubeconfig": str(tmp_path / "nope")}))
    facts = await probe.collect()
    await probe.aclose()
    assert facts.status == "unreachable"
    assert facts.detail is not None and "kubeconfig" in facts.detail


async def test_api_error_in_log_stream_is_fetch_failed(standin: KubeStandIn,
                                                       probe: KubernetesProbe) -> None:
    """A log body that is a kubelet error is retried once, then a failed fetch, never metrics."""
    add_running(standin, "rl-logerr", "unable to retrieve container logs for containerd://0af3\n")
    job = only_job(await probe.collect(), "rl-logerr")
    assert job.record.state is JobState.RUNNING
    assert job.log is not None and job.log.status == "failed" and job.log.attempts == 2
    assert job.log.error is not None and "unable to retrieve container logs" in job.log.error
    assert job.summary is None
    assert len(standin.calls("GET", "/log")) == 2


async def test_log_endpoint_error_is_fetch_failed(standin: KubeStandIn,
                                                  probe: KubernetesProbe) -> None:
    """A log endpoint answering 500 fails that job's fetch, not the whole cluster."""
    add_running(standin, "rl-log500", VERL_LOG)
    standin.faults["log"] = "500"
    facts = await probe.collect()
    job = only_job(facts, "rl-log500")
    assert facts.status == "ok"
    assert job.log is not None and job.log.status == "failed"
    assert job.log.error is not None and "HTTP 500" in job.log.error


async def test_one_pods_failed_log_leaves_the_others_read(standin: KubeStandIn,
                                                            probe: KubernetesProbe) -> None:
    """One pod's log answering 500 (its node's kubelet unreachable): that job is fetch-failed
    after its retry, and the other jobs' logs are still read (every later job was 'not
    fetched', so one bad node turned every verdict to unknown)."""
    for name in ("rl-a", "rl-b", "rl-c"):
        add_running(standin, name, VERL_LOG)
    standin.faults["log:rl-a-0"] = "500"
    facts = await probe.collect()
    assert facts.status == "ok"
    bad = only_job(facts, "rl-a").log
    assert bad is not None and bad.status == "failed" and bad.attempts == 2
    for name in ("rl-b", "rl-c"):
        job = only_job(facts, name)
        assert job.log is not None and job.log.status == "ok" and job.summary is not None


async def test_one_silent_node_leaves_the_other_jobs_logs_read(
        standin: KubeStandIn, cluster: KubernetesCluster) -> None:
    """One pod's log read never answers (its node's kubelet hangs; the API server proxies the
    read to it): that job is fetch-failed without a second timeout spent on it, the other pod
    on that node is skipped naming the node, and the jobs on other nodes are read (every
    later job was 'not fetched', as if the API were down)."""
    for name, node in (("rl-a", "gpu-1"), ("rl-b", "gpu-1"), ("rl-c", "gpu-2"),
                       ("rl-d", "gpu-3")):
        add_running(standin, name, VERL_LOG)
        standin.pods[f"{name}-0"].spec.node_name = node
    standin.faults["log:rl-a-0"] = "hang"
    probe = KubernetesProbe(cluster.model_copy(update={"request_timeout_s": 0.3}),
                            clock=lambda: NOW)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "ok"
    hung = only_job(facts, "rl-a").log
    assert hung is not None and hung.status == "failed" and hung.attempts == 1
    assert hung.error is not None and "timeout" in hung.error
    skipped = only_job(facts, "rl-b").log
    assert skipped is not None and skipped.status == "failed"
    assert skipped.error is not None and "node gpu-1 did not answer" in skipped.error
    for name in ("rl-c", "rl-d"):
        job = only_job(facts, name)
        assert job.log is not None and job.log.status == "ok" and job.summary is not None
    assert [c.path.split("/")[-2] for c in standin.calls("GET", "/log")] == [
        "rl-a-0", "rl-c-0", "rl-d-0"]


async def test_a_silent_api_stops_the_log_reads_after_two_timeouts(
        standin: KubeStandIn, cluster: KubernetesCluster) -> None:
    """Every log read hangs (the API server itself): the second silent read, on another
    node, stops the sweep's log reads; the rest are 'not fetched', no timeout spent each."""
    for n in range(5):
        add_running(standin, f"rl-{n}", VERL_LOG)
        standin.pods[f"rl-{n}-0"].spec.node_name = f"gpu-{n}"
    standin.faults["log"] = "hang"
    probe = KubernetesProbe(cluster.model_copy(update={"request_timeout_s": 0.3}),
                            clock=lambda: NOW)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert facts.status == "ok" and len(standin.calls("GET", "/log")) == 2
    for n in range(2, 5):
        log = only_job(facts, f"rl-{n}").log
        assert log is not None and log.status == "failed"
        assert log.error is not None and log.error.startswith("not fetched: ")


async def test_an_oom_killed_container_of_a_live_job_is_an_oom(standin: KubeStandIn,
                                                                probe: KubernetesProbe) -> None:
    """A running job whose container was OOMKilled and restarted, and an indexed job one rank
    of which failed OOMKilled while the others run: each is ``oom`` and a warning with a
    diagnose (they read healthy: only a Failed job's OOM was seen)."""
    from kubernetes_asyncio.client import V1ContainerState, V1ContainerStateTerminated

    from tests.report.factories import judge

    add_running(standin, "rl-restarted", VERL_LOG)
    status = standin.pods["rl-restarted-0"].status.container_statuses[0]
    status.restart_count = 3
    status.last_state = V1ContainerState(terminated=V1ContainerStateTerminated(
        exit_code=137, reason="OOMKilled"))
    standin.jobs["rl-ranks"] = make_job("rl-ranks", active=3, failed=1)
    for rank in range(4):
        failed = rank == 2
        standin.pods[f"rl-ranks-{rank}"] = make_pod(
            f"rl-ranks-{rank}", "rl-ranks", index=rank, phase="Failed" if failed else "Running",
            state="terminated" if failed else "running", reason="OOMKilled" if failed else None)
        standin.logs[f"rl-ranks-{rank}"] = VERL_LOG
    facts = await probe.collect()
    for name in ("rl-restarted", "rl-ranks"):
        job = only_job(facts, name)
        assert job.record.state is JobState.RUNNING and job.record.reason == "OOMKilled"
        report = judge(job).report
        assert "oom" in report.flags and report.verdict == "warning", (name, report.trend)
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"


async def test_cancel_deletes_with_background_propagation(standin: KubeStandIn,
                                                          probe: KubernetesProbe) -> None:
    """Cancel sends DELETE with propagationPolicy Background; a second cancel is a no-op."""
    add_running(standin, "rl-kill", VERL_LOG)
    await probe.collect()
    await probe.cancel("rl-kill")
    await probe.cancel("rl-kill")
    deletes = standin.calls("DELETE", "/jobs/rl-kill")
    assert deletes[0].body["propagationPolicy"] == "Background"
    assert len(deletes) == 2  # the second answered 404: already gone, no error
    assert "rl-kill" not in standin.jobs


async def test_cancel_of_a_job_re_created_under_its_name_deletes_nothing(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """The cancel names the uid it was pressed for, as a DELETE precondition: a Job
    re-created under the same name since (another uid) is refused by the API server (409)
    and stays; the Job with that uid is deleted."""
    add_running(standin, "rl-kill", VERL_LOG)
    await probe.collect()
    standin.jobs["rl-kill"] = make_job("rl-kill", active=1)
    standin.jobs["rl-kill"].metadata.uid = "uid-rl-kill-2"  # a new Job, same name
    with pytest.raises(CommandError, match=r"409.*Precondition failed"):
        await probe.cancel("rl-kill", uid="uid-rl-kill")
    assert "rl-kill" in standin.jobs
    (delete,) = standin.calls("DELETE", "/jobs/rl-kill")
    assert delete.body == {"propagationPolicy": "Background",
                           "preconditions": {"uid": "uid-rl-kill"}}
    await probe.cancel("rl-kill", uid="uid-rl-kill-2")
    assert "rl-kill" not in standin.jobs


async def test_cancel_rejects_a_bad_id(probe: KubernetesProbe, standin: KubeStandIn) -> None:
    """An id that is not a Kubernetes name is refused before any request."""
    with pytest.raises(InvalidJobIdError):
        await probe.cancel("rl; rm -rf /")
    assert standin.requests == []


async def test_jobset_with_pods_and_cancel(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A JobSet is one job (child Jobs not repeated), logs from rank 0, deleted as a JobSet."""
    assert standin.jobsets is not None
    standin.jobsets["rl-multinode"] = make_jobset("rl-multinode", labels={"owner": "bob"})
    standin.jobs["rl-multinode-workers-0"] = make_job("rl-multinode-workers-0", active=2,
                                                      owner_jobset="rl-multinode")
    for index in (0, 1):
        name = f"rl-multinode-workers-0-{index}"
        standin.pods[name] = make_pod(name, "rl-multinode-workers-0", jobset="rl-multinode",
                                      index=index)
        standin.logs[name] = VERL_LOG if index == 0 else "worker noise\n"
    facts = await probe.collect()
    assert [j.record.job_id for j in facts.jobs] == ["rl-multinode"]
    job = facts.jobs[0]
    assert job.record.labels["jobtables/kind"] == "JobSet" and job.record.user == "bob"
    assert (job.record.state, job.record.pods_total) == (JobState.RUNNING, 2)
    assert job.log is not None and job.log.requested_path == "pod/rl-multinode-workers-0-0"
    await probe.cancel("rl-multinode")
    (delete,) = standin.calls("DELETE", "/jobsets/rl-multinode")
    assert delete.body["propagationPolicy"] == "Background"


async def test_jobset_api_absent_is_not_an_error(standin: KubeStandIn,
                                                 probe: KubernetesProbe) -> None:
    """A 404 for the JobSet resource means it is not installed; Jobs are still reported."""
    standin.jobsets = None
    add_running(standin, "sft-a", HF_LOG)
    facts = await probe.collect()
    assert facts.status == "ok" and [j.record.job_id for j in facts.jobs] == ["sft-a"]
    # Job, JobSet, PyTorchJob, RayJob, TFJob, MPIJob 404: already gone: success
    await probe.cancel("never-seen")
    assert len(standin.calls("DELETE", "/never-seen")) == 6


async def test_suspended_and_filtered_jobs(standin: KubeStandIn,
                                           cluster: KubernetesCluster) -> None:
    """Suspended is PENDING; other users' and long-finished jobs are left out."""
    standin.jobs["rl-queued"] = make_job("rl-queued", suspend=True, started=None,
                                         labels={"user": "alice"})
    standin.jobs["rl-bob"] = make_job("rl-bob", active=1, labels={"user": "bob"})
    standin.jobs["rl-old"] = make_job("rl-old", succeeded=1, labels={"user": "alice"},
                                      finished=NOW.replace(day=1), conditions=(("Complete", None),))
    standin.jobs["other-team"] = make_job("other-team", active=1, labels={"team": "infra"})
    probe = KubernetesProbe(cluster.model_copy(update={"users": ("alice",)}), clock=lambda: NOW)
    try:
        facts = await probe.collect()
    finally:
        await probe.aclose()
    assert [j.record.job_id for j in facts.jobs] == ["rl-queued"]
    assert (facts.jobs[0].record.state, facts.jobs[0].record.reason) == (
        JobState.PENDING, "Suspended")


async def test_registry_builds_the_kubernetes_probe(cluster: KubernetesCluster) -> None:
    """The registry's ``kubernetes`` kind builds this probe and tolerates the shared options."""
    built = make_probe(cluster, aliases={"train/my_entropy": "entropy"}, clock=lambda: NOW)
    assert isinstance(built, KubernetesProbe)
    await built.aclose()


def _failed_attempt(standin: KubeStandIn, job: str, name: str, minutes_ago: int, *,
                    code: int = 1, reason: str = "Error", message: str | None = None,
                    index: int | None = None) -> None:
    from datetime import timedelta

    pod = make_pod(name, job, phase="Failed", state="terminated", reason=reason, index=index,
                   created=NOW - timedelta(minutes=minutes_ago))
    ended = pod.status.container_statuses[0].state.terminated
    ended.exit_code, ended.message = code, message
    standin.pods[name] = pod
    standin.logs[name] = HF_LOG + "Traceback (most recent call last):\nRuntimeError: bad shard\n"


async def test_a_jobs_retries_failing_alike_are_a_recurring_failure(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A Job retried under its backoffLimit whose pods all failed the same way (reason, exit
    code, termination message up to its numbers) is ``recurring-failure`` (seed: "Recurring
    identical failures are not transient"): failed once the Job has failed, a warning while it
    still retries; a CrashLoopBackOff container restarted again and again is one too. Each
    was only 'failed' / healthy, the retries read as transient."""
    from datetime import timedelta

    from kubernetes_asyncio.client import V1ContainerState, V1ContainerStateTerminated

    from tests.report.factories import judge

    standin.jobs["sft-dead"] = make_job("sft-dead", failed=3, finished=NOW,
                                        conditions=(("Failed", "BackoffLimitExceeded"),))
    for n in range(3):
        _failed_attempt(standin, "sft-dead", f"sft-dead-{n}", 50 - 10 * n,
                        message=f"shard {n * 7} unreadable at /data/{n}")
    standin.jobs["sft-retrying"] = make_job("sft-retrying", active=1, failed=2)
    for n in range(2):
        _failed_attempt(standin, "sft-retrying", f"sft-retrying-{n}", 50 - 10 * n, code=3)
    standin.pods["sft-retrying-2"] = make_pod("sft-retrying-2", "sft-retrying",
                                              created=NOW - timedelta(minutes=5))
    standin.logs["sft-retrying-2"] = HF_LOG
    standin.jobs["sft-loop"] = make_job("sft-loop", active=1)
    loop = make_pod("sft-loop-0", "sft-loop", state="waiting", reason="CrashLoopBackOff",
                    restarts=4)
    loop.status.container_statuses[0].last_state = V1ContainerState(
        terminated=V1ContainerStateTerminated(exit_code=1, reason="Error"))
    standin.pods["sft-loop-0"] = loop
    standin.logs["sft-loop-0"] = HF_LOG
    facts = await probe.collect()
    for name, attempts, verdict in (("sft-dead", 3, "failed"), ("sft-retrying", 2, "warning"),
                                    ("sft-loop", 5, "failed")):
        report = judge(only_job(facts, name)).report
        assert "recurring-failure" in report.flags, (name, report.trend)
        assert report.verdict == verdict, (name, report.verdict)
        assert report.trend.startswith(f"RECURRING ({attempts} attempts: Error, exit "), name
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"
        assert "not transient" in report.recommendation.why


async def test_failures_that_differ_or_are_one_attempt_are_not_recurring(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Near-misses: a retry after one failure; two attempts with other exit codes or other
    termination messages; two ranks of an indexed Job failing once each (one attempt, not
    two); a failure followed by a success. None is a recurring failure."""
    from datetime import timedelta

    from tests.report.factories import judge

    standin.jobs["sft-once"] = make_job("sft-once", active=1, failed=1)
    _failed_attempt(standin, "sft-once", "sft-once-0", 30)
    standin.pods["sft-once-1"] = make_pod("sft-once-1", "sft-once",
                                          created=NOW - timedelta(minutes=5))
    standin.logs["sft-once-1"] = HF_LOG
    standin.jobs["sft-codes"] = make_job("sft-codes", failed=2, finished=NOW,
                                         conditions=(("Failed", "BackoffLimitExceeded"),))
    _failed_attempt(standin, "sft-codes", "sft-codes-0", 30, code=1)
    _failed_attempt(standin, "sft-codes", "sft-codes-1", 20, code=2)
    standin.jobs["sft-msgs"] = make_job("sft-msgs", failed=2, finished=NOW,
                                        conditions=(("Failed", "BackoffLimitExceeded"),))
    _failed_attempt(standin, "sft-msgs", "sft-msgs-0", 30, message="NCCL timeout")
    _failed_attempt(standin, "sft-msgs", "sft-msgs-1", 20, message="disk full")
    standin.jobs["sft-ranks"] = make_job("sft-ranks", active=2, failed=2)
    for rank in range(4):
        if rank < 2:
            _failed_attempt(standin, "sft-ranks", f"sft-ranks-{rank}", 20, index=rank)
        else:
            standin.pods[f"sft-ranks-{rank}"] = make_pod(f"sft-ranks-{rank}", "sft-ranks",
                                                         index=rank)
    standin.jobs["sft-healed"] = make_job("sft-healed", succeeded=1, failed=2, finished=NOW,
                                          conditions=(("Complete", None),))
    _failed_attempt(standin, "sft-healed", "sft-healed-0", 30)
    _failed_attempt(standin, "sft-healed", "sft-healed-1", 20)
    standin.pods["sft-healed-2"] = make_pod("sft-healed-2", "sft-healed", phase="Succeeded",
                                            state="terminated", reason="Completed",
                                            created=NOW - timedelta(minutes=10))
    standin.logs["sft-healed-2"] = HF_LOG
    facts = await probe.collect()
    for name in ("sft-once", "sft-codes", "sft-msgs", "sft-ranks", "sft-healed"):
        report = judge(only_job(facts, name)).report
        assert "recurring-failure" not in report.flags, (name, report.trend)
        assert "jobtables/recurring-failure" not in only_job(facts, name).record.labels


async def test_a_failed_init_container_is_the_log_read(standin: KubeStandIn,
                                                       probe: KubernetesProbe) -> None:
    """A pod whose init container failed (weights could not be fetched) never started its
    trainer: the init container's log is read and its error quoted (the trainer's empty log
    was read twice and the job shown as fetch-failed, the reason never named)."""
    from kubernetes_asyncio.client import (
        V1Container,
        V1ContainerState,
        V1ContainerStateTerminated,
        V1ContainerStateWaiting,
        V1ContainerStatus,
    )

    from tests.report.factories import judge

    standin.jobs["sft-init"] = make_job("sft-init", failed=1, finished=NOW,
                                        conditions=(("Failed", "BackoffLimitExceeded"),))
    pod = make_pod("sft-init-0", "sft-init", phase="Failed", state="waiting",
                   reason="PodInitializing")
    pod.spec.init_containers = [V1Container(name="fetch-weights", image="busybox")]
    pod.status.init_container_statuses = [V1ContainerStatus(
        name="fetch-weights", image="busybox", image_id="sha256:def", ready=False,
        restart_count=0, state=V1ContainerState(terminated=V1ContainerStateTerminated(
            exit_code=2, reason="Error")))]
    pod.status.container_statuses[0].state = V1ContainerState(
        waiting=V1ContainerStateWaiting(reason="PodInitializing"))
    standin.pods["sft-init-0"] = pod
    standin.logs["sft-init-0/fetch-weights"] = (
        "fetching s3://ckpt/base\nTraceback (most recent call last):\n"
        "  File \"fetch.py\", line 9, in <module>\nPermissionError: AccessDenied on s3://ckpt\n")
    job = only_job(await probe.collect(), "sft-init")
    assert job.record.exit_code == 2
    assert job.log is not None and job.log.status == "ok"
    assert job.log.path == "pod/sft-init-0 -c fetch-weights"
    (call,) = standin.calls("GET", "/log")
    assert call.query["container"] == "fetch-weights"
    report = judge(job).report
    assert "fetch-failed" not in report.flags and report.verdict == "failed"
    assert "AccessDenied" in report.trend


async def test_a_terminating_pod_is_not_the_jobs_running_pod(standin: KubeStandIn,
                                                            probe: KubernetesProbe) -> None:
    """The Job's pod is being deleted (deletionTimestamp: preempted, drained, evicted) and its
    replacement is being created: the job is in bring-up again, not a healthy running job,
    and the terminating pod is not counted as running (its phase still says Running)."""
    from datetime import timedelta

    from tests.report.factories import judge

    add_running(standin, "rl-moved", VERL_LOG)
    standin.jobs["rl-moved"].status.terminating = 1
    standin.pods["rl-moved-0"].metadata.deletion_timestamp = NOW - timedelta(seconds=20)
    standin.pods["rl-moved-1"] = make_pod("rl-moved-1", "rl-moved", phase="Pending",
                                          state="waiting", reason="ContainerCreating",
                                          created=NOW - timedelta(seconds=15))
    job = only_job(await probe.collect(), "rl-moved")
    assert (job.record.state, job.record.reason) == (JobState.PENDING, "ContainerCreating")
    assert (job.record.pods_total, job.record.pods_running) == (2, 0)
    report = judge(job).report
    assert report.verdict == "buffering" and "buffer-filling" in report.flags


def _indexed(standin: KubeStandIn, name: str, ranks: int, *, failed: int = 1) -> None:
    """An indexed Job (completionMode Indexed) with ``ranks`` running ranks, rank 0 logging."""
    standin.jobs[name] = make_job(name, active=ranks, failed=failed)
    spec = standin.jobs[name].spec
    spec.completion_mode, spec.completions, spec.parallelism = "Indexed", ranks, ranks
    for rank in range(ranks):
        standin.pods[f"{name}-{rank}"] = make_pod(f"{name}-{rank}", name, index=rank)
        standin.logs[f"{name}-{rank}"] = VERL_LOG if rank == 0 else "worker noise\n"


async def test_a_failed_rank_whose_retry_is_pending_is_no_healthy_job(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """An indexed Job one rank of which failed (Error, exit 1) while its retry is pending (or
    not created yet), the other ranks running and rank 0 logging healthy steps: it read
    RUNNING healthy (the pending retry was 'bring-up', the failure unnamed). Now it is a
    warning naming the rank, its failure and exit code and the first error of its log, with a
    diagnose; rank 0's log is still the one shown. A rank whose retry runs again is healthy."""
    from datetime import timedelta

    from tests.report.factories import judge

    for name in ("rl-idx", "rl-idx-backoff", "rl-idx-healed"):
        _indexed(standin, name, 4)
        del standin.pods[f"{name}-2"]
        _failed_attempt(standin, name, f"{name}-2-a", 20, index=2,
                        message="rank 2: CUDA error")
    standin.pods["rl-idx-2-b"] = make_pod("rl-idx-2-b", "rl-idx", index=2, phase="Pending",
                                          state="waiting", reason="ContainerCreating",
                                          created=NOW - timedelta(minutes=1))
    standin.pods["rl-idx-healed-2-b"] = make_pod("rl-idx-healed-2-b", "rl-idx-healed", index=2,
                                                 created=NOW - timedelta(minutes=10))
    facts = await probe.collect()
    for name, retry in (("rl-idx", "retry pending: ContainerCreating"),
                        ("rl-idx-backoff", "no retry yet")):
        job = only_job(facts, name)
        assert (job.record.state, job.record.reason) == (JobState.RUNNING, "RankFailed")
        assert job.log is not None and job.log.requested_path == f"pod/{name}-0"
        assert job.record.stdout_path == f"pod/{name}-0"
        report = judge(job).report
        assert report.verdict == "warning", (name, report.verdict, report.trend)
        assert "buffer-filling" not in report.flags
        assert report.trend.startswith("rank 2 failed (Error, exit 1): RuntimeError: bad shard")
        assert job.record.labels["jobtables/failed-rank"].endswith(f"; {retry}")
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"
        assert f"pod/{name}-2-a" in report.recommendation.why and retry in report.recommendation.why
    healed = only_job(facts, "rl-idx-healed")
    assert (healed.record.state, healed.record.reason) == (JobState.RUNNING, None)
    assert judge(healed).report.verdict == "healthy"


async def test_a_jobsets_log_is_its_first_replicated_jobs_rank_0(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A JobSet [leader, workers]: each replicated job has a job index 0 and a completion
    index 0, so the workers' first pod (created after the leader's) was read as 'rank 0' and
    the leader's metrics never seen. The first replicated job's rank 0 is read; its record
    names that pod."""
    from datetime import timedelta

    assert standin.jobsets is not None
    standin.jobsets["rl-js"] = make_jobset("rl-js", replicated=("leader", "workers"))
    for group, job_index, pods in (("leader", 0, 1), ("workers", 0, 2), ("workers", 1, 2)):
        child = f"rl-js-{group}-{job_index}"
        standin.jobs[child] = make_job(child, active=pods, owner_jobset="rl-js")
        for index in range(pods):
            name = f"{child}-{index}"
            standin.pods[name] = make_pod(
                name, child, jobset="rl-js", index=index, replicated_job=(group, job_index),
                created=NOW - timedelta(minutes=30 if group == "leader" else 29))
            standin.logs[name] = VERL_LOG if group == "leader" else "worker noise\n"
    job = only_job(await probe.collect(), "rl-js")
    assert (job.record.state, job.record.pods_total) == (JobState.RUNNING, 5)
    assert job.record.stdout_path == "pod/rl-js-leader-0-0"
    assert job.log is not None and job.log.requested_path == "pod/rl-js-leader-0-0"
    assert job.summary is not None and job.summary.points[-1].step == 3


def _hf_dicts(count: int) -> str:
    """Bar-less HF Trainer dicts (``disable_tqdm=True``), one per logging step."""
    return "".join(f"{{'loss': {1.0 + (s % 7) / 10}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                   f"'epoch': {s / 100000:.4f}}}\n" for s in range(1, count + 1))


@pytest.mark.parametrize(("count", "bounds", "cut"), [
    (40, {"tail_lines": 100, "tail_bytes": 1 << 20}, False),  # the whole log came back
    (400, {"tail_lines": 100, "tail_bytes": 1 << 20}, True),  # the full tailLines came back
    (400, {"tail_lines": 2000, "tail_bytes": 8192}, True),  # the byte bound came back
])
async def test_a_cut_pod_log_claims_no_step_from_its_dict_count(
        standin: KubeStandIn, cluster: KubernetesCluster, count: int, bounds: dict[str, int],
        cut: bool) -> None:
    """A pod log read with ``tailLines``/``limitBytes`` is a tail cut from a longer log when
    the full window came back: its bar-less HF dicts counted from its first line are no step
    of the run (``steps_unanchored``, as a SLURM cut tail); a whole log counts them 1, 2, ..."""
    add_running(standin, "sft-nobar", _hf_dicts(count))
    probe = KubernetesProbe(cluster.model_copy(update=bounds), clock=lambda: NOW)
    try:
        job = only_job(await probe.collect(), "sft-nobar")
    finally:
        await probe.aclose()
    assert job.summary is not None and job.summary.points
    assert job.summary.steps_unanchored is cut
    if not cut:
        assert job.summary.points[-1].step == count
