"""Benchmark of the bot's ``/job`` answer with and without its kept SSH connection (not a test).

    .venv/bin/python tests/bench/bench_bot_job.py [--jobs 500] [--calls 12]

Submits ``--jobs`` ``bench_cli`` jobs (200-step HF logs; the node runs 256), then, with two
``Sweeper``s in this one process, each warmed by one sweep, asks both for the first job in
turn (``Sweeper.job``, what ``/job ID`` runs; the order alternating call by call, so both see
the same machine): one as ``bot.server`` builds it (``keep_connections=True``: the sweep's SSH
connection borrowed), one connecting anew for every answer (the CLI's way, and the bot's
before). Prints the median, least and most milliseconds of each. Every job submitted is
cancelled at the end and the scratch directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bot.config import Config  # noqa: E402
from bot.sweep import Sweeper  # noqa: E402
from tests.bench.bench_cli import ENV, submit  # noqa: E402
from tests.bench.bench_slurm import clean_up, cluster, wait_started  # noqa: E402

__test__ = False


async def measure(job: str, calls: int) -> None:
    config = Config(clusters=(cluster(),))
    sweepers = {"kept connection": Sweeper(lambda: config, keep_connections=True),
                "connect per answer": Sweeper(lambda: config)}
    walls: dict[str, list[float]] = {name: [] for name in sweepers}
    try:
        for sweeper in sweepers.values():
            await sweeper.sweep()
        for n in range(calls):
            order = list(sweepers.items())
            for name, sweeper in order if n % 2 == 0 else order[::-1]:
                began = time.perf_counter()
                result = await sweeper.job(None, job)
                walls[name].append(time.perf_counter() - began)
                result.find(None, job)  # raises if the job was not found
    finally:
        for sweeper in sweepers.values():
            await sweeper.aclose()
    for name, times in walls.items():
        print(f"bot /job, {name}: median {statistics.median(times) * 1000:.0f} ms "
              f"(least {min(times) * 1000:.0f}, most {max(times) * 1000:.0f}, {calls} calls)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--calls", type=int, default=12)
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-bot-job-{tag}"
    ids: list[str] = []
    try:
        ids = await submit(run_dir, tag, args.jobs, 200)
        await wait_started(ids)
        await measure(ids[0], args.calls)
    finally:
        await clean_up(ids, run_dir)


if __name__ == "__main__":
    asyncio.run(main())
