"""The bot layer's test builders: hand-built sweeps, a fake clock and a fake Sweeper peer.

Rows and facts come from the report layer's builders (``tests/report/factories.py``); this
module only sets what the bot's tests read (an hour-old RL row with a log path and 500 log
lines, a collapse with its evidence) and wraps them in a :class:`SweepResult`.

The fake is a peer of the bot (it stands in for the probes and judge), not the thing under
test. It counts sweeps, records cancels, and can check a condition at cancel time (the
salvage-before-cancel ordering test uses that).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.config import Config
from bot.sweep_result import SweepResult
from probes.models import JobState, MetricPoint
from report.models import ClusterReport, JobDetail, JobReport, Recommendation, SignalEvidence
from tests.report.factories import cluster, log, record, report_job, report_of
from tests.report.factories import facts as facts_of

# The bot's sweeps carry bare scheduler records and log fetches: no times, no StdOut, no size.
_UNTIMED = {"stdout_path": None, "submit_time": None, "start_time": None, "elapsed_s": None}
_UNTIMED_LOG = {"requested_path": None, "mtime": None, "size": None}

T0 = datetime(2026, 11, 30, 16, 0, 0, tzinfo=UTC)


class FakeClock:
    """A settable clock; ``advance`` moves it, nothing sleeps."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def rl_history(steps: int = 30, *, collapse_at: int | None = None) -> tuple[MetricPoint, ...]:
    points = []
    for step in range(1, steps + 1):
        broken = collapse_at is not None and step >= collapse_at
        points.append(MetricPoint(step=step, values={
            "reward": 0.2 + 0.01 * step - (0.3 if broken else 0.0),
            "entropy": 0.9 - (0.6 if broken else 0.0),
            "grad_norm": 0.3 + (2.5 if broken else 0.0),
        }))
    return tuple(points)


def job(job_id: str, name: str, *, cluster: str = "alpha", user: str | None = "alice",
        bucket: str = "rl", state: str = "RUNNING", flags: Sequence[str] = (),
        verdict: str = "healthy", recommendation: Recommendation | None = None,
        step: int | None = 30, banked_step: int | None = 20) -> JobReport:
    """A live row as the bot sees one: an hour in, step 30/100, RL metrics, log path set."""
    return report_job(
        name, bucket, cluster=cluster, job_id=job_id, user=user, state=JobState(state),
        elapsed_s=3600, step=step, total_steps=100, banked_step=banked_step,
        metrics={"reward": 0.4, "entropy": 0.85, "grad_norm": 0.31}, flags=list(flags),
        verdict=verdict, trend="steady", log_path=f"/logs/{name}.out",
        recommendation=recommendation,
    )


def detail(report: JobReport, *, history: tuple[MetricPoint, ...] = (),
           collapse_step: int | None = None) -> JobDetail:
    evidence: tuple[SignalEvidence, ...] = ()
    if collapse_step is not None:
        evidence = (
            SignalEvidence(signal="grad_norm", step=collapse_step, value=2.8, window_mean=0.3,
                           window=(0.3,) * 10, fired=True, why="grad_norm 2.8 > 1.0"),
            SignalEvidence(signal="entropy", step=collapse_step, value=0.3, window_mean=0.9,
                           window=(0.9,) * 10, fired=True, why="entropy moved 67% from trend"),
        )
    return JobDetail(report=report, history=history, evidence=evidence,
                     collapse_step=collapse_step, log_excerpt="step 30 reward=0.1\n")


def collapsing(job_id: str = "4242", *, user: str | None = "alice", cluster: str = "alpha",
               flags: Sequence[str] = ()) -> JobDetail:
    rec = Recommendation(action="cancel_and_salvage", why="collapse: grad_norm and entropy")
    report = job(job_id, "rl-grpo-qwen-7b", cluster=cluster, user=user, verdict="collapse",
                 flags=("collapse", "signal:grad_norm", "signal:entropy", *flags),
                 recommendation=rec)
    return detail(report, history=rl_history(collapse_at=27), collapse_step=27)


def sweep_result(details: Sequence[JobDetail], *, at: datetime = T0,
                 clusters: Sequence[str] = ("alpha",), unreachable: Sequence[str] = (),
                 inactive: Sequence[str] = (), degraded: str | None = None,
                 labels: dict[tuple[str, str], dict[str, str]] | None = None,
                 restarts: dict[tuple[str, str], int] | None = None) -> SweepResult:
    """A sweep of ``details``; ``labels`` adds record labels per (cluster, job id), and
    ``restarts`` the scheduler's restart counts."""
    names = [*clusters, *unreachable, *inactive]
    report = report_of(*(d.report for d in details), at=at, clusters=[
        ClusterReport(name=n, kind="slurm",
                      status="unreachable" if n in unreachable else
                      "inactive" if n in inactive else "ok",
                      detail="ssh: connection refused" if n in unreachable else None)
        for n in names])
    tail = "\n".join(f"line {i}" for i in range(1, 501))
    facts = tuple(
        cluster(n, [
            facts_of(record(d.report.name, d.report.job_id, d.report.state, cluster=n,
                            user=d.report.user, workdir="/work/run",
                            labels=(labels or {}).get((n, d.report.job_id), {}),
                            restarts=(restarts or {}).get((n, d.report.job_id), 0),
                            **_UNTIMED),
                     log_fetch=log(path=d.report.log_path, text=tail, **_UNTIMED_LOG),
                     no_summary=True)
            for d in details if d.report.cluster == n], collected_at=at)
        for n in clusters
    )
    return SweepResult(report=report, details={(d.report.cluster, d.report.job_id): d
                                               for d in details},
                       facts=facts, started_at=at, duration_s=0.5, degraded=degraded)


@dataclass
class FakeSweeper:
    """Stands in for :class:`bot.sweep.Sweeper`: returns what ``make`` builds."""

    make: Callable[[], SweepResult]
    conf: Config
    sweeps: int = 0
    cancels: list[tuple[str, str]] = field(default_factory=list)
    jobs: list[tuple[str | None, str]] = field(default_factory=list)
    on_cancel: Callable[[str, str], None] | None = None
    cancel_uids: list[str | None] = field(default_factory=list)
    cancel_owners: list[str | None] = field(default_factory=list)
    """The uid each cancel was for (a Kubernetes delete's precondition)."""
    gate: asyncio.Event | None = None
    """When set, sweeps wait for it (to hold many requests inside one sweep)."""

    async def sweep(self, *, clusters: Sequence[str] | None = None) -> SweepResult:
        self.sweeps += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.make()

    async def job(self, cluster: str | None, job_id: str) -> SweepResult:
        """``/job`` on a cache miss: the one-job query (recorded, never a sweep)."""
        self.jobs.append((cluster, job_id))
        return self.make()

    async def cancel(self, cluster: str, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        if self.on_cancel is not None:
            self.on_cancel(cluster, job_id)
        self.cancels.append((cluster, job_id))
        self.cancel_uids.append(uid)
        self.cancel_owners.append(owner)

    async def aclose(self) -> None:
        return None


def blocks_text(blocks: Sequence[dict[str, Any]]) -> str:
    """All text in a list of Block Kit blocks, for assertions."""
    out = []
    for block in blocks:
        if "text" in block and isinstance(block["text"], dict):
            out.append(block["text"].get("text", ""))
        for element in block.get("elements", []):
            if isinstance(element, dict) and isinstance(element.get("text"), str):
                out.append(element["text"])
    return "\n".join(out)
