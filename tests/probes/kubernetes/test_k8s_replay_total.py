"""A hostile Kubernetes recording cannot make the replay hold more than a recording may.

Each file is bounded (``MAX_FILE_BYTES``), but ``logs.json`` may name any number of log files
(``log-NNNN.txt`` up to six digits), each kept whole for the sweep: a recording of sparse
files just under the bound each held gigabytes. The files read together are bounded by
``MAX_RECORDING_BYTES``; past it the replay cluster is unreachable, naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes import replay
from probes.replay import ReplayProbe
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_replay_tampered import recorded


def _many_logs(rec: Path, count: int, size: int) -> None:
    """logs.json names ``count`` log files of ``size`` bytes each (each under the file bound)."""
    data = json.loads((rec / "logs.json").read_text())
    first = data["reads"][0]
    data["reads"] = [{**first, "file": f"log-{n:04d}.txt", "cut": False}
                     for n in range(1, count + 1)]
    for n in range(1, count + 1):
        (rec / f"log-{n:04d}.txt").write_text("step:1 - actor/entropy:0.5\n" * (size // 27))
    (rec / "logs.json").write_text(json.dumps(data))


def _recording_bytes(rec: Path) -> int:
    return sum(path.stat().st_size for path in rec.iterdir())


async def test_the_files_read_together_are_bounded(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    rec = await recorded(standin, cluster, tmp_path)
    _many_logs(rec, 3, 27 * 40)
    whole = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert whole.status == "ok", whole.detail  # under the default bounds: read
    # Each file well under the per-file bound, together past the recording's bound.
    monkeypatch.setattr(replay, "MAX_RECORDING_BYTES", _recording_bytes(rec) - 100,
                        raising=False)
    facts = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert (facts.status, facts.jobs) == ("unreachable", ()), facts.detail
    assert facts.detail is not None and "recording files together are over the" in facts.detail
    assert facts.detail.startswith("recording file "), facts.detail  # the file it reached
    # Exactly at the bound is read.
    monkeypatch.setattr(replay, "MAX_RECORDING_BYTES", _recording_bytes(rec))
    again = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert again.status == "ok", again.detail
