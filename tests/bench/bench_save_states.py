"""Benchmark: the bot's save of its log states, cold and warm, in a real Redis (not a test).

    .venv/bin/python tests/bench/bench_save_states.py [--jobs 256] [--rounds 7] [TREE ...]

Builds ``--jobs`` running jobs' states as a bot's first read makes them (the sweep benches'
200-step HF log, folded by ``probes.slurm.cursors.fold_job``), then ``--rounds`` warm states
(3 more steps each). Times ``RedisStore.save_log_states`` of the cold states, then of each
round's warm states, on a fresh key prefix, and counts the bytes sent to Redis (what Sentinel
copies again to each replica) and the memory the keys hold in Redis at the end (``MEMORY
USAGE``). With TREEs, each tree's own ``.venv`` runs the same figures in
turn (A B A B ...), each tree's code first on ``sys.path``, and the medians are printed side
by side: the same machine load for both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/0"


async def figures(jobs: int, rounds: int) -> dict[str, Any]:
    import redis.asyncio as aioredis
    from redis.asyncio.connection import Connection, ConnectionPool

    from bot.store import RedisStore
    from probes.models import JobState, SchedulerRecord
    from probes.slurm.cursors import fold_job
    from tests.bench.bench_cli import hf_log
    from tests.bench.bench_warm import hf_steps

    class Bytes(Connection):
        sent = 0

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            packed = [command] if isinstance(command, bytes | str) else command
            Bytes.sent += sum(len(part) for part in packed)
            await super().send_packed_command(command, check_health)

    def answer(text: str, offset: int, end: int, continued: bool) -> dict[str, Any]:
        cursor = {"path": "/scratch/run.out", "dev": 1, "ino": 2, "offset": end,
                  "digest": "0" * 32}
        log = {"requested": "/scratch/run.out", "path": "/scratch/run.out", "status": "ok",
               "size": end, "mtime": 1_790_000_000.0, "text": text, "offset": offset,
               "cursor": cursor}
        if continued:
            log["continued"] = True
        return {"log": log}

    head = hf_log(200)
    record = SchedulerRecord(cluster="c", job_id="7", name="run", state=JobState.RUNNING,
                             stdout_path="/scratch/run.out")
    _, state = fold_job(record, answer(head, 0, len(head.encode()), False), None, aliases={},
                        benign_patterns=())
    assert state is not None
    cold = {str(n): state for n in range(jobs)}
    warm_rounds = []
    prior, offset, step = state, len(head.encode()), 201
    for _ in range(rounds):
        more = hf_steps(step, 3, 400)
        step += 3
        end = offset + len(more.encode())
        _, prior = fold_job(record, answer(more, offset, end, True), prior, aliases={},
                            benign_patterns=())
        assert prior is not None
        offset = end
        warm_rounds.append({str(n): prior for n in range(jobs)})
    pool = ConnectionPool.from_url(REDIS_URL, connection_class=Bytes)
    store = RedisStore(aioredis.Redis(connection_pool=pool),
                       prefix=f"jt-bench-save-{uuid.uuid4().hex[:8]}:")
    await store.ping()
    try:
        t0, b0 = time.perf_counter(), Bytes.sent
        await store.save_log_states("c", cold)
        out: dict[str, Any] = {"cold_s": time.perf_counter() - t0,
                               "cold_MB": (Bytes.sent - b0) / 1e6}
        walls, sent = [], []
        for states in warm_rounds:
            t0, b0 = time.perf_counter(), Bytes.sent
            await store.save_log_states("c", states)
            walls.append(time.perf_counter() - t0)
            sent.append((Bytes.sent - b0) / 1e6)
        held = 0
        async for key in store._r.scan_iter(match=store.prefix + "*", count=500):
            held += await store._r.memory_usage(key) or 0
        out.update(warm_s=statistics.median(walls), warm_MB=statistics.median(sent),
                   held_MB=held / 1e6)
        return out
    finally:
        await store.delete_prefix()
        await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*")
    parser.add_argument("--jobs", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker or not args.trees:
        if args.trees:
            sys.path.insert(0, args.trees[0])
        else:
            sys.path.insert(0, str(ROOT))
        print(json.dumps(asyncio.run(figures(args.jobs, args.rounds))), flush=True)
        return
    got: dict[str, list[dict[str, float]]] = {t: [] for t in args.trees}
    for n in range(args.repeat):
        for tree in args.trees if n % 2 == 0 else args.trees[::-1]:
            out = subprocess.run(
                [f"{tree}/.venv/bin/python", str(Path(__file__).resolve()), "--worker", tree,
                 "--jobs", str(args.jobs), "--rounds", str(args.rounds)],
                capture_output=True, text=True, check=True, cwd=tree).stdout
            got[tree].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{args.jobs} jobs' log states (200-step HF logs), {args.repeat} runs each, medians:")
    for tree, runs in got.items():
        print(f"  {tree}: " + ", ".join(
            f"{k} {statistics.median(r[k] for r in runs):.3f}" for k in runs[0]))


if __name__ == "__main__":
    main()
