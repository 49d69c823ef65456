"""Benchmark: memory a job retains after its sweep (issue 12: ~100 KB or less per job).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_memory.py [--jobs 500] [--bot-jobs 500,5000]

Not a pytest test: it prints figures. Deterministic sizes (``len(model_dump_json())`` and a
recursive ``sys.getsizeof``) beside ``tracemalloc`` (bytes still allocated once the result
is built and kept, after a full collection). Two parts:

1. **Sweep result, per job.** ``--jobs`` jobs whose collector answers hold a 30 KB and a
   1 MiB log tail (a SkyRL run shaped as ``tests.probes.retained.rl_log``), assembled by
   ``probes.slurm.assemble.job_facts`` and judged by ``report.judge.build_report`` into a kept
   ``SweepResult``. "whole tail" keeps ``LogFetch.text`` as read (``whole_tail=True``, what
   every job retained before issue 12); "bounded" is the sweep's path now.
2. **The bot.** The real ``bot.sweep.Sweeper`` with the real ``RedisStore`` (127.0.0.1:6379,
   a throw-away key prefix deleted afterwards) over a probe whose ``collect`` assembles
   ``--bot-jobs`` jobs from collector answers one at a time (as ``SlurmProbe`` does). Each
   job's Redis window is first filled to ``window_len`` (200) points, the steady state of a
   long run, so the history the sweep hands to ``/job`` is in the figure. Printed: the
   retained bytes of the kept ``SweepResult`` (tracemalloc started with the sweep), per job,
   its split between the facts and the details (deep size of a sample), and how many jobs a
   1 GiB pod holds at that rate (two results live at once while a sweep replaces the last:
   halved); then, from a second run traced from before the windows were filled, all the
   process holds once the result is kept: the store's windows kept in memory between sweeps
   (``bot.store_windows``) included.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import getpass
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bot.sweep import Sweeper  # noqa: E402
from bot.sweep_result import SweepResult  # noqa: E402
from probes.config import ReplayCluster  # noqa: E402
from probes.models import ClusterFacts, JobFacts, JobState, MetricPoint, SchedulerRecord  # noqa: E402
from probes.slurm.assemble import job_facts  # noqa: E402
from report.judge import build_report  # noqa: E402
from report.settings import ReportSettings  # noqa: E402
from tests.bot.conftest import make_config, make_store  # noqa: E402
from tests.probes.retained import deep_size, rl_log  # noqa: E402

__test__ = False
NOW = datetime(2026, 2, 12, 15, 0, tzinfo=UTC)
GIB = 1 << 30


def record(i: int, state: JobState = JobState.RUNNING) -> SchedulerRecord:
    return SchedulerRecord(cluster="alpha", job_id=str(1000 + i), name=f"rl-grpo-{i}",
                           user=getpass.getuser(), state=state, workdir=f"/w/{i}",
                           stdout_path=f"/w/{i}/slurm-{1000 + i}.out",
                           start_time=NOW - timedelta(hours=2))


def answer(text: str, i: int) -> dict[str, Any]:
    """The collector's answer for one job (``probes.remote.collector``), its own tail."""
    tail = f"{text}(raylet) job {i} heartbeat\n"  # a distinct string per job, as read
    return {"log": {"requested": f"/w/{i}/slurm-{1000 + i}.out",
                    "path": f"/w/{i}/slurm-{1000 + i}.out", "status": "ok", "size": len(tail),
                    "mtime": NOW.timestamp(), "offset": 0, "text": tail, "attempts": 1}}


def facts_for(jobs: int, text: str, *, whole_tail: bool = False) -> list[JobFacts]:
    return [job_facts(record(i), answer(text, i), aliases={}, benign_patterns=(),
                      whole_tail=whole_tail) for i in range(jobs)]


def retained(build: Any) -> tuple[Any, int, int, float]:
    """(kept object, bytes still allocated after building it, peak bytes, seconds)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    kept = build()
    took = time.perf_counter() - start
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return kept, current - base, peak - base, took


def sweep_result(jobs: int, text: str, whole_tail: bool) -> SweepResult:
    facts = facts_for(jobs, text, whole_tail=whole_tail)
    cluster = ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW,
                           jobs=tuple(facts))
    report, details = build_report([cluster], settings=ReportSettings(), now=NOW)
    return SweepResult(report, details, (cluster,), NOW, 0.0)


def part_sweep(jobs: int) -> None:
    print(f"1. SweepResult of {jobs} jobs, retained bytes per job (tracemalloc; JSON and deep "
          "size of one JobFacts beside it)")
    print(f"   {'tail':>8} {'kept':>11} {'per job':>12} {'peak/job':>12} {'JSON/job':>10} "
          f"{'deep/job':>10} {'build s':>8}")
    for size in (30_000, 1 << 20):
        text = rl_log(size)
        for whole in (True, False):
            kept, cur, peak, took = retained(lambda t=text, w=whole: sweep_result(jobs, t, w))
            job = kept.facts[0].jobs[0]
            label = "whole tail" if whole else "bounded"
            print(f"   {size // 1024:>5} KB {label:>11} {cur / jobs / 1024:>9.1f} KB "
                  f"{peak / jobs / 1024:>9.1f} KB {len(job.model_dump_json()) / 1024:>7.1f} KB "
                  f"{deep_size(job) / 1024:>7.1f} KB {took:>8.2f}")
            del kept


class AssemblingProbe:
    """A cluster whose collector answers are assembled one job at a time, as SlurmProbe's."""

    def __init__(self, jobs: int, text: str) -> None:
        self._jobs, self._text = jobs, text

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        facts = await asyncio.to_thread(facts_for, self._jobs, self._text)
        return ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW,
                            jobs=tuple(facts))

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        raise NotImplementedError("the memory bench's stand-in cluster cancels nothing")

    async def aclose(self) -> None:
        return None


def window(points: int, seed: int) -> list[MetricPoint]:
    """A stored window: ``points`` steps with the RL metrics a SkyRL run logs."""
    names = ("reward", "pass_at_n", "policy_loss", "entropy", "grad_norm", "clip_ratio",
             "avg_num_tokens")
    return [MetricPoint(step=s, values={n: (seed * 7 + s * 13 + k) % 97 / 97 + 0.01
                                        for k, n in enumerate(names)},
                        wall_time=NOW - timedelta(minutes=2 * (points - s)))
            for s in range(1, points + 1)]


async def bot_sweep(jobs: int, text: str, prefix: str, tmp: Path, *, whole: bool = False,
                    ) -> tuple[int, int, str]:
    """Retained and peak bytes of the bot's kept SweepResult, and the split of one job;
    ``whole``: traced from before the store exists, so what it keeps is counted too."""
    if whole:
        gc.collect()
        tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    store = make_store(prefix)
    try:
        for start in range(0, jobs, 500):  # the steady state: every window full
            batch = {str(1000 + i): window(store.window_len, i)
                     for i in range(start, min(jobs, start + 500))}
            await store.merge_histories("alpha", batch)
            del batch  # what the store keeps of it is its own to count, not this frame's
        config = make_config(prefix, tmp).model_copy(update={"clusters": (
            ReplayCluster(name="alpha", path=str(tmp / "alpha"), timeout_s=3600.0),)})
        sweeper = Sweeper(lambda: config, state=store,
                          probe_factory=lambda *_a, **_k: AssemblingProbe(jobs, text))
        gc.collect()
        if not whole:
            tracemalloc.start()
        base = start if whole else tracemalloc.get_traced_memory()[0]
        result = await sweeper.sweep()
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(result.details) == jobs, result.degraded
        detail = next(iter(result.details.values()))
        job = result.facts[0].jobs[0]
        split = (f"facts {deep_size(job) / 1024:.1f} KB, details {deep_size(detail) / 1024:.1f}"
                 f" KB of which history {deep_size(detail.history) / 1024:.1f} KB "
                 f"({len(detail.history)} points); the store keeps {kept_points(store)} "
                 "points in memory")
        del result
        return current - base, peak - base, split
    finally:
        await store.delete_prefix()
        await store.aclose()


def kept_points(store: object) -> object:
    """Points the store keeps in memory between sweeps (``?``: a store without that count)."""
    return getattr(getattr(store, "windows", None), "points", "?")


def part_bot(counts: Sequence[int], log_bytes: int) -> None:
    print(f"\n2. The bot: Sweeper + RedisStore (windows full), {log_bytes // 1024} KB tails")
    text = rl_log(log_bytes)
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in counts:
            prefix = f"jt-bench-mem-{uuid.uuid4().hex[:8]}:"
            cur, peak, split = asyncio.run(bot_sweep(jobs, text, prefix, Path(tmp)))
            per_job = cur / jobs
            print(f"   {jobs:>5} jobs: kept {cur / 2**20:8.1f} MB = {per_job / 1024:6.1f} KB/job,"
                  f" sweep peak {peak / 2**20:8.1f} MB; 1 GiB holds ~{GIB // 2 // per_job:,.0f}"
                  f" jobs (two results alive)")
            print(f"          one job: {split}")
            prefix = f"jt-bench-mem-{uuid.uuid4().hex[:8]}:"
            held, _, _ = asyncio.run(bot_sweep(jobs, text, prefix, Path(tmp), whole=True))
            print(f"          held in all once kept (store windows included): "
                  f"{held / 2**20:.1f} MB = {held / jobs / 1024:.1f} KB/job")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--bot-jobs", default="500,5000")
    parser.add_argument("--bot-log-bytes", type=int, default=256 << 10,
                        help="tail per job in the bot part (~200 steps of SkyRL)")
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()
    if not args.skip_sweep:
        part_sweep(args.jobs)
    part_bot([int(n) for n in args.bot_jobs.split(",") if n], args.bot_log_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
