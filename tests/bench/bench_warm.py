"""Benchmark of the bot's warm sweeps on the local SLURM over SSH with a real Redis (not a test).

    flock /work/notes/slurm-bench.lock .venv/bin/python tests/bench/bench_warm.py \\
        [--jobs 500] [--steps 200] [--append 3] [--rounds 3] [--idle 2]

Submits ``--jobs`` jobs whose logs hold ``--steps`` HF Trainer steps (``bench_cli``'s jobs; the
node runs at most 256 at once, the rest stay PENDING), then, with the bot's ``Sweeper`` on a
``RedisStore`` (real Redis, a key prefix of its own), prints each sweep beside the floor
measured in the same run (one connection, ``squeue --json``, one batched 1 MiB tail of every
log, ``bench_slurm.floor_once``):

1. the cold sweep (no stored log states: every log read whole, states saved);
2. ``--rounds`` warm sweeps, each after ``--append`` more steps were appended to every log over
   SSH (as the job user): only those bytes are read and folded (target <= 1.2x the floor);
3. ``--idle`` warm sweeps with nothing appended (a stalled or quiet job's log).

Each line gives the collector's answer size, the Redis round trips of the sweep, the
process's current and peak RSS, then where the sweep's time went (``phases``: the collector
run, the fold, each store call, judging; worker-thread phases timed inside their thread).
Every job submitted is cancelled at the end (only those ids),
the scratch directory removed and the Redis keys deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis.asyncio as aioredis  # noqa: E402
from redis.asyncio.connection import Connection, ConnectionPool  # noqa: E402

from bot.config import Config  # noqa: E402
from bot.store import RedisStore  # noqa: E402
from bot.sweep import Sweeper  # noqa: E402
from probes.config import SlurmCluster  # noqa: E402
from probes.slurm.probe import SlurmProbe  # noqa: E402
from probes.slurm.transport import CommandResult, Runner, make_runner  # noqa: E402
from tests.bench.bench_cli import submit  # noqa: E402
from tests.bench.bench_slurm import (  # noqa: E402
    ENV,
    clean_up,
    cluster,
    floor_once,
    ssh,
    wait_started,
)
from tests.probes.slurm.forwarding import ForwardingRunner  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"


class Counted(Connection):
    """Redis round trips: one packet per command or pipeline."""

    sent = 0

    async def send_packed_command(self, command: object, check_health: bool = True) -> None:
        Counted.sent += 1
        await super().send_packed_command(command, check_health)  # type: ignore[arg-type]


class Tap:
    """The real runner, noting the size and time of each collector answer."""

    def __init__(self) -> None:
        self.bytes = 0
        self.seconds = 0.0

    def factory(self, c: SlurmCluster, **options: Any) -> Runner:
        return _Tapped(make_runner(c, **options), self)


class _Tapped(ForwardingRunner):
    def __init__(self, inner: Runner, tap: Tap) -> None:
        super().__init__(inner)
        self._tap = tap

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        t0 = time.perf_counter()
        result = await super().run(argv, stdin=stdin, check=check)
        if list(argv) == ["python3", "-"]:
            self._tap.seconds += time.perf_counter() - t0
            self._tap.bytes += len(result.stdout.encode())
        return result

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        """The collector's streamed answer (probes.slurm.answer): timed and counted as it
        passes; its lines are parsed while it runs, so its time includes that overlap."""
        t0 = time.perf_counter()

        def count(chunk: bytes) -> None:
            self._tap.bytes += len(chunk)
            on_chunk(chunk)

        result = await super().run_streaming(argv, stdin=stdin, on_chunk=count)
        self._tap.seconds += time.perf_counter() - t0
        return result


class Phases:
    """Seconds spent per phase of a sweep: the bot's calls wrapped for this benchmark only."""

    seconds: ClassVar[dict[str, float]] = {}

    @classmethod
    def wrap(cls, owner: object, name: str, label: str) -> None:
        inner = getattr(owner, name)
        if asyncio.iscoroutinefunction(inner):
            async def timed_async(*a: object, **kw: object) -> object:
                t0 = time.perf_counter()
                try:
                    return await inner(*a, **kw)
                finally:
                    cls.add(label, time.perf_counter() - t0)
            setattr(owner, name, timed_async)
        else:
            def timed(*a: object, **kw: object) -> object:
                t0 = time.perf_counter()
                try:
                    return inner(*a, **kw)
                finally:
                    cls.add(label, time.perf_counter() - t0)
            setattr(owner, name, timed)

    @classmethod
    def add(cls, label: str, seconds: float) -> None:
        cls.seconds[label] = cls.seconds.get(label, 0.0) + seconds

    @classmethod
    def install(cls) -> None:
        import bot.sweep
        import bot.sweep_judging
        import probes.slurm.probe

        # What is left to fold once the answer is in (most jobs were folded as they came).
        cls.wrap(probes.slurm.probe, "fold_all", "fold")
        cls.wrap(bot.sweep, "build_report", "judge")
        cls.wrap(bot.sweep_judging, "next_memory", "memory")
        for name in ("load_memory", "save_memory", "merge_histories", "load_log_states",
                     "save_log_states"):
            cls.wrap(RedisStore, name, name)

    @classmethod
    def line(cls, collector: float) -> str:
        parts = [f"collector {collector:.3f}"]
        parts += [f"{k} {v:.3f}" for k, v in cls.seconds.items()]
        cls.seconds = {}
        return "  phases (s): " + ", ".join(parts)


def rss_mb() -> tuple[float, float]:
    """(current, peak) RSS of this process in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    current = pages * resource.getpagesize() / 2**20
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hf_steps(first: int, count: int, total: int) -> str:
    """More HF Trainer steps (a bar redraw and a per-step dict each), as bench_cli's log."""
    return "".join(
        f"\r  {min(100, 100 * s // total):3d}%|#         | {s}/{total} [00:{s % 60:02d}<00:11,"
        f"  8.10it/s]\r{{'loss': '{2.0 - s / (total * 2):.4g}', 'grad_norm': "
        f"'{0.3 + (s % 7) / 50:.4g}', 'learning_rate': '1e-06', 'epoch': '{s / total:.4g}'}}\n"
        for s in range(first, first + count))


async def append_all(run_dir: str, text: str) -> None:
    """Append ``text`` to every job's log in one remote shell (as the job user)."""
    await ssh(["bash", "-c", f"cd {run_dir} && cat > add.txt && "
               f'for f in logs/bench_*.out; do cat add.txt >> "$f"; done'], stdin=text)


async def median_floor(paths: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await floor_once(paths)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def one_sweep(sweeper: Sweeper, tap: Tap) -> tuple[float, int, int, int]:
    """(wall seconds, jobs, answer bytes, Redis round trips) of one bot sweep."""
    tap.bytes, tap.seconds = 0, 0.0
    before = Counted.sent
    t0 = time.perf_counter()
    result = await sweeper.sweep()
    wall = time.perf_counter() - t0
    assert result.degraded is None, result.degraded
    (facts,) = result.facts
    assert facts.status == "ok", facts.detail
    return wall, len(facts.jobs), tap.bytes, Counted.sent - before


def line(label: str, swept: tuple[float, int, int, int], floor: float, tap: Tap,
         target: str) -> None:
    wall, jobs, answer, trips = swept
    current, peak = rss_mb()
    print(f"{label}: {jobs} jobs, {wall:.2f}s beside floor {floor:.2f}s = {wall / floor:.2f}x "
          f"({target}); collector run {tap.seconds:.2f}s, answer {answer / 2**20:.2f} MiB, "
          f"Redis round trips {trips}; RSS {current:.0f} MB, peak {peak:.0f} MB", flush=True)
    print(Phases.line(tap.seconds), flush=True)


async def measure(args: argparse.Namespace, run_dir: str, ids: list[str]) -> None:
    paths = [f"{run_dir}/logs/bench_{i}.out" for i in ids]
    pool = ConnectionPool.from_url(REDIS_URL, connection_class=Counted)
    store = RedisStore(aioredis.Redis(connection_pool=pool),
                       prefix=f"jt-bench-{uuid.uuid4().hex[:8]}:")
    tap = Tap()
    config = Config(clusters=(cluster(),))

    def probe(c: SlurmCluster, **kw: object) -> SlurmProbe:
        return SlurmProbe(c, runner_factory=tap.factory, **kw)  # type: ignore[arg-type]

    sweeper = Sweeper(lambda: config, state=store, probe_factory=probe,
                      keep_connections=True)  # as bot.server builds it
    Phases.install()
    try:
        floor = await median_floor(paths, args.repeat)
        line("cold bot sweep (no stored states)", await one_sweep(sweeper, tap), floor, tap,
             "every log read whole")
        step = args.steps + 1
        for n in range(args.rounds):
            await append_all(run_dir, hf_steps(step, args.append, args.steps + 100))
            step += args.append
            floor = await median_floor(paths, args.repeat)
            line(f"warm bot sweep {n + 1} (+{args.append} steps per log)",
                 await one_sweep(sweeper, tap), floor, tap, "target <= 1.2x")
        for n in range(args.idle):
            floor = await median_floor(paths, args.repeat)
            line(f"warm bot sweep {n + 1}, nothing appended", await one_sweep(sweeper, tap),
                 floor, tap, "target <= 1.2x")
    finally:
        await sweeper.aclose()
        await store.delete_prefix()
        await store.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--append", type=int, default=3, help="steps appended per warm sweep")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=int, default=2,
                        help="sweeps with nothing appended, at the end")
    parser.add_argument("--repeat", type=int, default=3, help="floor runs (median)")
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-warm-{tag}"
    ids: list[str] = []
    try:
        ids = await submit(run_dir, tag, args.jobs, args.steps)
        await wait_started(ids)
        print(f"submitted {len(ids)} jobs (tag {tag})", flush=True)
        await measure(args, run_dir, ids)
    finally:
        await clean_up(ids, run_dir)


if __name__ == "__main__":
    asyncio.run(main())
