"""A Kubernetes recording's files, in process against the API stand-in: a refused JobSet list,
the live cluster's benign patterns, and a directory re-recorded in place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.recording import record
from probes.replay import ReplayProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

VERL_LOG = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"


def _running(standin: KubeStandIn, name: str, log: str = VERL_LOG) -> None:
    standin.jobs[name] = make_job(name, active=1)
    standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
    standin.logs[f"{name}-0"] = log


async def _replay(rec: Path, **settings: object) -> tuple[str | None, dict[str, object]]:
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec), **settings)).collect()
    assert facts.status == "ok", facts.detail
    return facts.detail, {job.record.job_id: job for job in facts.jobs}


async def test_a_refused_jobset_list_is_recorded_and_replayed(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """The Role refuses listing JobSets (403): the recording keeps the refusal, and the replay
    says it in the cluster's detail as the live sweep does, its Jobs reported."""
    assert standin.jobsets is not None
    _running(standin, "rl-a")
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.faults["jobsets"] = "403"
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    error = json.loads((rec / "jobsets.json").read_text())["error"]
    assert error["type"] == "ForbiddenError"
    detail, jobs = await _replay(rec)
    assert set(jobs) == {"rl-a"}
    assert detail is not None and "JobSets not listed: list jobsets: HTTP 403" in detail, detail


async def test_a_failing_jobset_list_is_recorded_and_replayed(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """A JobSet list failing on its own (500 past its retry: e502067 keeps the Jobs, saying
    it) is kept as its error, as a refusal is: the recording held an empty JobSet list and
    the replay said nothing of the JobSets the live sweep could not list."""
    assert standin.jobsets is not None
    _running(standin, "rl-a")
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    standin.faults["jobsets"] = "500"
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    error = json.loads((rec / "jobsets.json").read_text())["error"]
    assert error["type"] == "UnreachableError"
    detail, jobs = await _replay(rec)
    assert set(jobs) == {"rl-a"}
    assert detail is not None and "JobSets not listed: list jobsets: HTTP 500" in detail, detail


async def test_the_live_clusters_benign_patterns_are_replayed(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """A fault line the live cluster's ``benign_patterns`` silence (its NCCL warning) stays
    silent in the replay, whose own config names no pattern: the recording keeps them. The
    replay flagged it (the replay cluster's patterns only)."""
    noisy = VERL_LOG + "RuntimeError: NCCL error: unhandled system error (known-flaky-nic)\n"
    _running(standin, "rl-a", noisy)
    quiet = cluster.model_copy(update={"benign_patterns": ("known-flaky-nic",)})
    live = KubernetesProbe(quiet, clock=lambda: NOW)
    try:
        [swept] = (await live.collect()).jobs
    finally:
        await live.aclose()
    assert swept.summary is not None and not swept.summary.faults  # the near-miss: silenced
    rec = await record(quiet, tmp_path / "rec", clock=lambda: NOW)
    _, jobs = await _replay(rec)
    assert jobs["rl-a"] == swept
    _, extra = await _replay(rec, benign_patterns=("nothing-matches",))
    assert extra["rl-a"] == swept  # the replay's own patterns add to the recording's


async def test_a_directory_re_recorded_in_place_holds_only_the_new_recording(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """A SLURM recording's files, and the log files of an earlier recording with more reads,
    are removed when the directory is recorded again: they would replay as this one's."""
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "cluster.json").write_text(json.dumps({"format": 1, "kind": "slurm",
                                                  "recorded_at": "2026-11-30T15:00:00Z"}))
    (rec / "squeue.json").write_text('{"jobs": []}')
    (rec / "notes.txt").write_text("the reporter's own notes\n")
    _running(standin, "rl-a")
    _running(standin, "rl-b")
    await record(cluster, rec, clock=lambda: NOW)
    assert {p.name for p in rec.glob("log-*")} == {"log-0001.txt", "log-0002.txt"}
    del standin.jobs["rl-b"]
    await record(cluster, rec, clock=lambda: NOW)
    assert sorted(p.name for p in rec.iterdir()) == [
        "cluster.json", "jobs.json", "jobsets.json", "log-0001.txt", "logs.json", "mpijobs.json",
        "notes.txt", "pods.json", "pytorchjobs.json", "rayjobs.json", "tfjobs.json"]
    _, jobs = await _replay(rec)
    assert set(jobs) == {"rl-a"}


def test_a_slurm_replay_never_imports_the_kubernetes_client() -> None:
    """``jobtables demo`` (a SLURM recording through ``probes.replay``) leaves
    kubernetes_asyncio unimported: the Kubernetes reader is imported for its own kind only."""
    code = ("import contextlib, io, sys\nfrom bot.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['demo', '--format', 'json']) == 0\n"
            "print('kubernetes_asyncio' in sys.modules, 'probes.kubernetes' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


async def test_a_cut_tail_is_replayed_as_cut(standin: KubeStandIn, cluster: KubernetesCluster,
                                             tmp_path: Path) -> None:
    """HF Trainer's bar-less dicts in a log longer than ``tail_lines``: the tail may start past
    the first line, so their steps are only their order. The recording keeps that (``cut``) and
    the replayed job is the live sweep's; the near-miss, the same read marked whole, is not."""
    _running(standin, "sft-a", "".join(
        f"{{'loss': {2.5 - s / 100:.2f}, 'grad_norm': 1.2, 'learning_rate': 5e-05, "
        f"'epoch': {s / 100:.2f}}}\n" for s in range(1, 40)))
    short = cluster.model_copy(update={"tail_lines": 10})
    live = KubernetesProbe(short, clock=lambda: NOW)
    try:
        [swept] = (await live.collect()).jobs
    finally:
        await live.aclose()
    rec = await record(short, tmp_path / "rec", clock=lambda: NOW)
    reads = json.loads((rec / "logs.json").read_text())
    assert [read["cut"] for read in reads["reads"]] == [True]
    assert (rec / reads["reads"][0]["file"]).read_text().count("\n") == 10
    _, jobs = await _replay(rec)
    assert jobs["sft-a"] == swept
    reads["reads"][0]["cut"] = False
    (rec / "logs.json").write_text(json.dumps(reads))
    _, whole = await _replay(rec)
    assert whole["sft-a"] != swept
