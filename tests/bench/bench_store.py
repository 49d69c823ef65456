"""Benchmark: the bot's history merge against a real Redis (not a test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_store.py [--jobs 500] [--window 200]
                                                              [--append 3] [--rounds 5]

``--jobs`` windows of ``--window`` points (7 RL metrics each, the steady state of a long run)
are stored once, then, each figure the median of ``--rounds``, side by side in one run for
redis-py's pure-Python reply parser and for hiredis (``redis[hiredis]``, the C parser redis-py
picks when it is installed):

1. a process's first merge (nothing kept in memory: every window read back whole, as after a
   restart or a failover of the bot);
2. a warm merge of ``--append`` new points per job (``bot.store_windows``: the new points go,
   a token and a count per job come back);
3. one ``/job`` window read (``load_history``).

Each line gives the bytes Redis answered and the bytes sent (the payload of a merge's
replies and commands). Keys live under a throw-away prefix, deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis.asyncio as aioredis  # noqa: E402
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser  # noqa: E402
from redis.asyncio.connection import Connection, ConnectionPool  # noqa: E402

from bot.store import RedisStore  # noqa: E402
from probes.models import MetricPoint  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"
NOW = datetime(2026, 2, 12, 15, 0, tzinfo=UTC)
NAMES = ("reward", "pass_at_n", "policy_loss", "entropy", "grad_norm", "clip_ratio",
         "avg_num_tokens")


class Measured(Connection):
    """Bytes of every string Redis answers, and of every command sent."""

    received = 0
    sent = 0

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        reply = await super().read_response(*args, **kwargs)
        Measured.received += _payload(reply)
        return reply

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        parts = command if isinstance(command, list) else [command]
        Measured.sent += sum(len(part) for part in parts)
        await super().send_packed_command(command, check_health)


def _payload(reply: Any) -> int:
    if isinstance(reply, bytes | str):
        return len(reply)
    if isinstance(reply, list | tuple):
        return sum(_payload(item) for item in reply)
    return 0


def points(first: int, count: int, seed: int) -> list[MetricPoint]:
    return [MetricPoint(step=s, values={n: (seed * 7 + s * 13 + k) % 97 / 97 + 0.01
                                        for k, n in enumerate(NAMES)},
                        wall_time=NOW + timedelta(minutes=2 * s), line_no=10 * s)
            for s in range(first, first + count)]


def store_on(parser: type) -> RedisStore:
    pool = ConnectionPool.from_url(REDIS_URL, connection_class=Measured, parser_class=parser)
    return RedisStore(aioredis.Redis(connection_pool=pool),
                      prefix=f"jt-bench-store-{uuid.uuid4().hex[:8]}:")


async def timed(step: Any) -> tuple[float, int, int]:
    Measured.received = Measured.sent = 0
    t0 = time.perf_counter()
    await step()
    return time.perf_counter() - t0, Measured.received, Measured.sent


Runs = list[tuple[float, int, int]]


async def measure(parser: type, args: argparse.Namespace, out: dict[str, Runs]) -> None:
    """One round with ``parser``: its figures appended to ``out``."""
    jobs = [str(1000 + n) for n in range(args.jobs)]
    store = store_on(parser)
    try:
        await store.merge_histories("alpha", {j: points(1, args.window, n)
                                              for n, j in enumerate(jobs)})
        restarted = RedisStore(store._r, prefix=store.prefix, window_len=store.window_len)
        out["first"].append(await timed(
            lambda: restarted.merge_histories("alpha", dict.fromkeys(jobs, ()))))
        batch = {j: points(args.window + 1, args.append, n) for n, j in enumerate(jobs)}
        out["warm"].append(await timed(lambda: restarted.merge_histories("alpha", batch)))
        out["job"].append(await timed(lambda: restarted.load_history("alpha", jobs[0])))
    finally:
        await store.delete_prefix()
        await store.aclose()


def line(label: str, runs: Runs) -> str:
    seconds = statistics.median(r[0] for r in runs)
    got, sent = runs[-1][1], runs[-1][2]
    return (f"{label} {seconds * 1000:8.1f} ms, answered {got / 2**20:6.2f} MiB, "
            f"sent {sent / 2**20:5.2f} MiB")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--append", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.jobs} jobs, {args.window}-point windows, +{args.append} points a warm merge "
          f"(median of {args.rounds}; both parsers in this run)")
    parsers = {"python ": _AsyncRESP2Parser, "hiredis": _AsyncHiredisParser}
    found: dict[str, dict[str, Runs]] = {n: {"first": [], "warm": [], "job": []} for n in parsers}
    for _ in range(args.rounds):  # the parsers alternate: a load change hits both alike
        for name, parser_class in parsers.items():
            await measure(parser_class, args, found[name])
    for name, runs in found.items():
        print(f"  {name}: " + line("first merge (windows read back)", runs["first"]))
        print("           " + line("warm merge                     ", runs["warm"]))
        print("           " + line("one /job window                ", runs["job"]))


if __name__ == "__main__":
    asyncio.run(main())
