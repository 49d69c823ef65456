"""The report layer's test builders: the facts a judge reads, and the rows it writes.

Facts (``record``, ``facts``, ``points``...) default to a healthy live job; ``report_job``
and ``report_of`` build the contract's ``JobReport``/``Report`` with quiet defaults (no
metrics, no step, no trend). Every builder takes keyword overrides for the model it builds, so
a test states only what its rule or golden table depends on. The bot's builders
(``tests/bot/builders.py``) build on these. Times are fixed (:data:`NOW`); nothing reads the
real clock.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from probes.models import (
    CheckpointListing,
    ClusterFacts,
    JobFacts,
    JobState,
    LogFetch,
    LogSummary,
    MetricPoint,
    SchedulerRecord,
    TrialResult,
    TrialTree,
)
from report.judge import judge_job
from report.memory import SweepMemory
from report.models import ClusterReport, GridRollup, JobDetail, JobReport, Report
from report.settings import ReportSettings

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
STEP_SECONDS = 60.0


def record(
    name: str = "rl-run", job_id: str = "100", state: JobState = JobState.RUNNING,
    **overrides: Any,
) -> SchedulerRecord:
    """A scheduler record (RUNNING, started two hours ago, user alice, workdir /w)."""
    fields: dict[str, Any] = {
        "cluster": "alpha", "user": "alice", "workdir": "/w", "stdout_path": f"/w/{job_id}.out",
        "submit_time": NOW - timedelta(hours=3), "start_time": NOW - timedelta(hours=2),
        "elapsed_s": 7200,
    }
    fields.update(overrides)
    return SchedulerRecord(name=name, job_id=job_id, state=state, **fields)


def points(
    series: Mapping[str, Sequence[float | None]], *, first_step: int = 1,
    last_at: datetime = NOW, timed: bool = True,
) -> tuple[MetricPoint, ...]:
    """One point per index; ``None`` leaves that metric out of that step."""
    length = max(len(v) for v in series.values())
    out = []
    for i in range(length):
        values = {k: float(x) for k, v in series.items()
                  if i < len(v) and (x := v[i]) is not None}
        wall = last_at - timedelta(seconds=STEP_SECONDS * (length - 1 - i)) if timed else None
        out.append(MetricPoint(step=first_step + i, values=values, wall_time=wall))
    return tuple(out)


def summary(pts: Sequence[MetricPoint] = (), **overrides: Any) -> LogSummary:
    """A log summary over ``pts`` (100 lines, last line now, 60 s per step)."""
    fields: dict[str, Any] = {"line_count": 100, "last_timestamp": NOW, "sec_per_step": 60.0}
    fields.update(overrides)
    return LogSummary(points=tuple(pts), **fields)


def log(status: str = "ok", **overrides: Any) -> LogFetch:
    """A log fetch (read fine, modified now)."""
    fields: dict[str, Any] = {"requested_path": "/w/100.out", "path": "/w/100.out",
                              "mtime": NOW, "size": 1000}
    fields.update(overrides)
    return LogFetch(status=status, **fields)


def trial(reward: float | None = 1.0, **overrides: Any) -> TrialResult:
    """A finished Harbor trial (3 turns, 500 output tokens, 5 minutes long)."""
    fields: dict[str, Any] = {"name": "t", "n_turns": 3, "n_output_tokens": 500,
                              "started_at": NOW - timedelta(minutes=10),
                              "finished_at": NOW - timedelta(minutes=5)}
    fields.update(overrides)
    return TrialResult(reward=reward, **fields)


def tree(trials: Sequence[TrialResult] = (), **overrides: Any) -> TrialTree:
    """A trial tree under /w/jobs whose newest result.json landed 5 minutes ago."""
    fields: dict[str, Any] = {"root": "/w/jobs", "newest_result_at": NOW - timedelta(minutes=5)}
    fields.update(overrides)
    return TrialTree(trials=tuple(trials), **fields)


def facts(
    rec: SchedulerRecord | None = None,
    pts: Sequence[MetricPoint] = (),
    *,
    summary_kw: Mapping[str, Any] | None = None,
    log_fetch: LogFetch | None = None,
    checkpoints: Sequence[int] | None = None,
    trials: TrialTree | None = None,
    no_summary: bool = False,
) -> JobFacts:
    """A job's facts: a record, a read log, and a summary over ``pts``."""
    return JobFacts(
        record=rec or record(),
        log=log_fetch or log(),
        summary=None if no_summary else summary(pts, **dict(summary_kw or {})),
        checkpoints=CheckpointListing(steps=tuple(checkpoints)) if checkpoints else None,
        trials=trials,
    )


def judge(
    job: JobFacts,
    *,
    others: Sequence[SchedulerRecord] = (),
    settings: ReportSettings | None = None,
    memory: SweepMemory | None = None,
    now: datetime = NOW,
    history: Sequence[MetricPoint] | None = None,
) -> JobDetail:
    """Run ``judge_job`` with the job itself plus ``others`` as the cluster's records."""
    return judge_job(
        job, cluster_records=[job.record, *others], settings=settings or ReportSettings(),
        now=now, history=history, memory=memory,
    )


def cluster(name: str, jobs: Sequence[JobFacts], **overrides: Any) -> ClusterFacts:
    """A reachable SLURM cluster holding ``jobs``."""
    fields: dict[str, Any] = {"kind": "slurm", "status": "ok", "collected_at": NOW}
    fields.update(overrides)
    return ClusterFacts(name=name, jobs=tuple(jobs), **fields)


def healthy_rl(n: int = 12, /, **extra: Sequence[float | None]) -> dict[str, list[float | None]]:
    """Metric series of a calm RL run, ``n`` steps long; ``extra`` overrides whole series."""
    series: dict[str, list[float | None]] = {
        "reward": [0.40 + 0.01 * i for i in range(n)],
        "policy_loss": [-0.01] * n,
        "entropy": [0.50] * n,
        "grad_norm": [0.20] * n,
        "log_ratio_abs_mean": [0.01] * n,
        "log_ratio_abs_max": [0.30] * n,
    }
    series.update({k: list(v) for k, v in extra.items()})
    return series


def logged_job(
    name: str, job_id: str, state: JobState = JobState.RUNNING, **record_fields: Any,
) -> JobFacts:
    """A job with ten logged steps: a falling loss for an SFT name, else a calm RL run."""
    series = {"loss": [1.0 - 0.01 * i for i in range(10)]} if "sft" in name else healthy_rl(10)
    return facts(record(name, job_id, state, **record_fields), points(series))


def with_last(values: Sequence[float | None], *last: float | None) -> list[float | None]:
    """``values`` with its final ``len(last)`` entries replaced by ``last``."""
    return [*list(values)[: len(values) - len(last)], *last]


def report_job(name: str = "rl-run", bucket: str = "rl", **fields: Any) -> JobReport:
    """A JobReport with quiet defaults (RUNNING, healthy, nothing logged); ``fields`` override
    any contract key. The id is derived from the name, so distinct names get distinct ids."""
    values: dict[str, Any] = {
        "cluster": "alpha", "job_id": str(zlib.crc32(name.encode()) % 10**6), "name": name,
        "user": "alice", "bucket": bucket, "state": JobState.RUNNING, "elapsed_s": None,
        "step": None, "total_steps": None, "banked_step": None, "metrics": {}, "flags": [],
        "verdict": "healthy", "trend": "", "successor": None, "log_path": None,
        "recommendation": None,
    }
    values.update(fields)
    return JobReport(**values)


def report_of(
    *jobs: JobReport, clusters: Sequence[ClusterReport] | None = None,
    grid: Sequence[GridRollup] = (), at: datetime = NOW,
) -> Report:
    """A report holding ``jobs``, over one reachable SLURM cluster ``alpha`` by default."""
    reachable = [ClusterReport(name="alpha", kind="slurm", status="ok", detail=None)]
    return Report(generated_at=at, clusters=list(clusters or reachable), jobs=list(jobs),
                  grid=list(grid))
