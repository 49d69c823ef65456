"""A Kubernetes recording's ``benign_patterns`` are regexes from someone else (a recording
travels), run against every log line of the replay: one that can backtrack without bound
(``^(\\w+)+$`` against a line of forty word characters and a ``!``) held the replay, so
the bot's sweep or ``jobtables sweep``, for hours. Such a pattern is not replayed unless the
replay cluster's own ``benign_patterns`` name it (its operator's, trusted as a live
cluster's are); the replay's detail says which was left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes.probe import KubernetesProbe
from probes.kubernetes.recording import record
from probes.kubernetes.replay import unsafe_pattern
from probes.replay import ReplayProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

RISKY = r"^(R\w+)+: NCCL error.*known-flaky-nic"
"""Silences the line below live; on a line of ``R`` forty times and a ``!``, hours."""
NOISY = ("step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"
         "RuntimeError: NCCL error: unhandled system error (known-flaky-nic)\n")


@pytest.mark.parametrize("pattern", [
    "known-flaky-nic", r"NET/IB : Got async event.*port", r"^NCCL WARN \d+ ", "(unclosed",
    r"\bcuda\b|\bnccl\b", r"x{3}y{2,5}", r"no available block found in \d+ seconds?",
    r"skip[-_]?spikes?", r"^\s*$", r"NCCL INFO .* opCount",
])
def test_patterns_a_replay_runs(pattern: str) -> None:
    assert unsafe_pattern(pattern) is None


@pytest.mark.parametrize("pattern", [
    RISKY, r"^(\w+)+$", r"(a|aa)*b", r"(.*)*x", r"(?:a+)+", r"x.*y.*z", r"(a)\1",
    r"(a{1,30}){1,30}", r"(?=(a+)+)b",
    # An optional (``?``: at most one) inside a repeat is a variable repeat too: ``(a?a?)+$``
    # takes 15 s on 20 ``a`` and a ``!``, ``(a?){40}a{40}`` hours on 40 ``a``.
    r"(a?a?)+$", r"(a?){40}a{40}", r"(?:x?y?)*z",
    # Optionals outside a loop each double the tries: forty of them, 2**40.
    "a?" * 40 + "a" * 40,
    # A variable repeat first, unanchored: re.search runs it from every position of the line
    # (measured on 64 KiB: '\s*$' 14 s, '\d+ms' 12 s, '.*foo' 1.8 s).
    r"\s*$", r"\d+ms", r".*foo", r"(\w+)@",
])
def test_patterns_a_replay_does_not_run(pattern: str) -> None:
    assert unsafe_pattern(pattern), pattern


async def _recorded(standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> Path:
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = NOISY
    rec = await record(cluster, tmp_path / "rec", clock=lambda: NOW)
    meta = json.loads((rec / "cluster.json").read_text())
    meta["benign_patterns"] = [RISKY, "flaky-switch"]  # as a hostile recording names it
    (rec / "cluster.json").write_text(json.dumps(meta))
    return rec


async def test_a_recorded_pattern_that_can_backtrack_without_bound_is_not_run(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    rec = await _recorded(standin, cluster, tmp_path)
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec))).collect()
    assert facts.status == "ok", facts.detail
    [job] = facts.jobs
    assert job.summary is not None and "cluster-pattern" not in job.summary.benign_counts
    assert facts.detail is not None
    assert f"benign pattern {RISKY!r} of cluster.json not replayed" in facts.detail, facts.detail
    assert "flaky-switch" not in facts.detail  # a safe pattern runs, unsaid


async def test_the_replay_clusters_own_patterns_are_trusted(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """Named by the replay cluster too, the pattern runs: the replay is the live sweep."""
    risky = cluster.model_copy(update={"benign_patterns": (RISKY,)})
    live = KubernetesProbe(risky, clock=lambda: NOW)
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = NOISY
    try:
        [swept] = (await live.collect()).jobs
    finally:
        await live.aclose()
    assert swept.summary is not None and swept.summary.benign_counts["cluster-pattern"] == 1
    rec = await _recorded(standin, risky, tmp_path)
    facts = await ReplayProbe(ReplayCluster(name="beta", path=str(rec),
                                            benign_patterns=(RISKY,))).collect()
    assert facts.status == "ok" and facts.jobs == (swept,), facts.detail
    assert facts.detail is not None and "not replayed" not in facts.detail
