"""The Sweeper: concurrent clusters, per-cluster timeouts, single-flight, config re-read."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.cli import DEMO_RECORDING
from bot.config import Config
from bot.config_file import parse_config
from bot.sweep import Sweeper
from probes.errors import UnreachableError
from probes.models import ClusterFacts
from probes.registry import make_probe

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)


class GatedProbe:
    """A probe peer that answers only when its gate opens, counting its collections."""

    def __init__(self, cluster: Any, gate: asyncio.Event, log: list[str], **_: Any) -> None:
        self.cluster, self.gate, self.log = cluster, gate, log

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        self.log.append(self.cluster.name)
        if self.cluster.name.startswith("down"):
            raise UnreachableError(f"{self.cluster.name}: connection refused")
        await self.gate.wait()
        return ClusterFacts(name=self.cluster.name, kind=self.cluster.kind, status="ok",
                            collected_at=NOW)

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        self.log.append(f"cancel {job_id}")

    async def aclose(self) -> None:
        return None


def config(*names: str, timeout: float = 60.0) -> Config:
    body = "".join(f'[[clusters]]\nname = "{n}"\nkind = "replay"\npath = "/r/{n}"\n'
                   f"timeout_s = {timeout}\n" for n in names)
    return parse_config(body)


def sweeper(cfg: Config, gate: asyncio.Event, log: list[str]) -> Sweeper:
    return Sweeper(lambda: cfg, clock=lambda: NOW,
                   probe_factory=lambda c, **kw: GatedProbe(c, gate, log, **kw))


async def test_concurrent_sweeps_share_one_probe_run() -> None:
    """Fifty concurrent sweeps cost one collection per cluster."""
    gate, log = asyncio.Event(), []
    s = sweeper(config("a", "b"), gate, log)
    tasks = [asyncio.create_task(s.sweep()) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(*tasks)
    assert sorted(log) == ["a", "b"] and s.probe_collections == 2
    assert all(r is results[0] for r in results)


async def test_unreachable_cluster_does_not_hide_the_others() -> None:
    """A probe error becomes `unreachable` with its reason; the other cluster reports ok."""
    gate, log = asyncio.Event(), []
    gate.set()
    result = await sweeper(config("a", "down1"), gate, log).sweep()
    status = {c.name: (c.status, c.detail) for c in result.report.clusters}
    assert status == {"a": ("ok", None), "down1": ("unreachable", "down1: connection refused")}


async def test_each_cluster_has_its_own_timeout() -> None:
    """A cluster that never answers is cut off at its timeout and reported; nothing hangs."""
    gate, log = asyncio.Event(), []
    result = await sweeper(config("slow", timeout=0.05), gate, log).sweep()
    (cluster,) = result.report.clusters
    assert cluster.status == "unreachable" and "timed out after 0.05s" in str(cluster.detail)


async def test_config_is_reread_every_sweep() -> None:
    """Edits to the roster apply on the next sweep (an inactive cluster is listed, not probed)."""
    gate, log = asyncio.Event(), []
    gate.set()
    configs = iter([config("a"), parse_config(
        '[[clusters]]\nname = "a"\nkind = "replay"\npath = "/r"\nactive = false\n')])
    s = Sweeper(lambda: next(configs), clock=lambda: NOW,
                probe_factory=lambda c, **kw: GatedProbe(c, gate, log, **kw))
    first, second = await s.sweep(), await s.sweep()
    assert first.report.clusters[0].status == "ok"
    assert second.report.clusters[0].status == "inactive" and log == ["a"]


async def test_unknown_cluster_selection_is_a_usage_error() -> None:
    """Selecting a cluster that is not configured is a clear usage error."""
    from bot.errors import UsageError

    gate, log = asyncio.Event(), []
    with pytest.raises(UsageError, match="no cluster named 'zz'; configured: a"):
        await sweeper(config("a"), gate, log).sweep(clusters=["zz"])


async def test_cancel_validates_before_reaching_the_probe() -> None:
    """cancel() rejects a malformed id before any probe is built or called."""
    from probes.errors import InvalidJobIdError

    gate, log = asyncio.Event(), []
    s = sweeper(config("a"), gate, log)
    with pytest.raises(InvalidJobIdError):
        await s.cancel("a", "1;rm -rf /")
    await s.cancel("a", "123")
    assert log == ["cancel 123"]


async def test_replay_sweep_is_judged_at_recording_time(tmp_path: Path) -> None:
    """A replay-only sweep judges at the recording's time, so stalls read as they did live."""
    cfg = parse_config(f'[[clusters]]\nname = "d"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    result = await Sweeper(lambda: cfg, probe_factory=make_probe).sweep()
    assert result.report.generated_at == datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
    verdicts = {j.job_id: j.verdict for j in result.report.jobs}
    assert verdicts["41002"] == "healthy" and verdicts["41070"] == "stalled"
