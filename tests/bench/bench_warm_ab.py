"""Interleaved A/B of the bot's warm sweeps of two trees on the same jobs (not a test).

    flock /work/notes/slurm-bench.lock .venv/bin/python tests/bench/bench_warm_ab.py \\
        TREE_A TREE_B [--rounds 6] [--churn] [--crowd N] [--script [--ckpt-steps N]]

Each TREE needs its own ``.venv``. Submits 500 jobs of ``bench_warm`` (200-step logs) once;
one worker process per tree runs ``bench_warm``'s ``Sweeper`` on its own Redis key prefix
(its own cursors and states, kept in memory as the bot keeps them) and sweeps on request.
After a cold sweep by each (its wall, phases and megabytes sent to Redis printed), every
round appends 3 steps to every log, measures the floor (``bench_slurm.floor_once``) and has
both trees sweep in turn (A B, then B A), then does the same with nothing appended (with
``--churn``, one held job is submitted before each sweep pair, so the queue changed since
every sweep: a bot holding its last ``squeue --json`` document must print it again; with
``--crowd N``, N held jobs of another user are submitted first: a lab's queue, which
``squeue --json`` prints whole and the users' listing leaves out; they are cancelled at the
end too; with ``--cold N``, N more rounds follow in which each tree forgets its states and
sweeps cold, every log read whole, as a bot reads jobs new to it). Prints each round's walls
and ratios to that round's floor, then per tree the median ratio and median phases
(``bench_warm.Phases``). Every job is cancelled at the end (only those ids) and the scratch
directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


async def work() -> None:
    """A worker: one sweep per line on stdin, its figures as one JSON line on stdout."""
    import redis.asyncio as aioredis
    from redis.asyncio.connection import ConnectionPool

    from bot.config import Config
    from bot.store import RedisStore
    from bot.sweep import Sweeper
    from probes.config import SlurmCluster
    from probes.slurm.probe import SlurmProbe
    from tests.bench import bench_warm as bw
    from tests.bench.bench_slurm import cluster

    class Bytes(bw.Counted):
        """Also the bytes sent to Redis (what a sweep writes, and Sentinel copies)."""

        sent_bytes = 0

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            packed = [command] if isinstance(command, bytes | str) else command
            Bytes.sent_bytes += sum(len(part) for part in packed)
            await super().send_packed_command(command, check_health)

    pool = ConnectionPool.from_url(bw.REDIS_URL, connection_class=Bytes)
    tap = bw.Tap()
    config = Config(clusters=(cluster(),))

    def probe(c: SlurmCluster, **kw: object) -> SlurmProbe:
        return SlurmProbe(c, runner_factory=tap.factory, **kw)  # type: ignore[arg-type]

    # As the tree's bot builds it (bot.server): with kept connections where the tree has them.
    keep = ({"keep_connections": True}
            if "keep_connections" in inspect.signature(Sweeper).parameters else {})

    def fresh() -> tuple[RedisStore, Sweeper]:
        """A store on a new key prefix and a sweeper on it: no log states anywhere."""
        store = RedisStore(aioredis.Redis(connection_pool=pool),
                           prefix=f"jt-bench-ab-{uuid.uuid4().hex[:8]}:")
        return store, Sweeper(lambda: config, state=store, probe_factory=probe, **keep)

    store, sweeper = fresh()
    bw.Phases.install()
    loop = asyncio.get_running_loop()
    try:
        while command := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            if command == "cold":  # forget every state: this sweep reads every log whole
                await sweeper.aclose()
                await store.delete_prefix()
                store, sweeper = fresh()
            before = Bytes.sent_bytes
            wall, jobs, answer, _ = await bw.one_sweep(sweeper, tap)
            phases, bw.Phases.seconds = dict(bw.Phases.seconds), {}
            print(json.dumps({"wall": wall, "jobs": jobs, "answer": answer,
                              "collector": tap.seconds, **phases,
                              "redis_MB_sent": (Bytes.sent_bytes - before) / 1e6}), flush=True)
    finally:
        await sweeper.aclose()
        await store.delete_prefix()
        await store.aclose()


class Worker:
    """:func:`work` in the tree's own interpreter, that tree first on ``sys.path``."""

    def __init__(self, tree: str) -> None:
        self.tree = tree
        self.process = subprocess.Popen(
            [f"{tree}/.venv/bin/python", str(Path(__file__).resolve()), "--worker", tree],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree)

    def sweep(self, *, cold: bool = False) -> dict[str, Any]:
        """One sweep's figures; ``cold``: from no log states (every log read whole)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("cold\n" if cold else "sweep\n")
        self.process.stdin.flush()
        figures: dict[str, Any] = json.loads(self.process.stdout.readline())
        return figures

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        self.process.wait()


def crowd(tag: str, count: int) -> list[str]:
    """``count`` held jobs of this machine's own user (not the bench's): other people's jobs,
    which ``squeue --json`` prints and the bench user's listing does not."""
    out = subprocess.run(
        ["bash", "-c", f"for i in $(seq {count}); do sbatch --parsable --hold -J crowd-{tag} "
         "-o /dev/null --wrap true || exit 1; done"],
        capture_output=True, text=True, check=True).stdout
    return [line.split(";")[0] for line in out.split()]


async def compare(trees: list[str], rounds: int, churn: bool = False,
                  crowded: int = 0, cold_rounds: int = 0, *, script: bool = False,
                  ckpt_steps: int = 0) -> None:
    from tests.bench import bench_warm as bw
    from tests.bench.bench_cli import submit
    from tests.bench.bench_slurm import ENV, clean_up, floor_once, ssh, wait_started

    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-warm-ab-{tag}"
    ids: list[str] = []
    others: list[str] = []
    loop = asyncio.get_running_loop()
    try:
        if crowded:
            others = await loop.run_in_executor(None, crowd, tag, crowded)
        ids = await submit(run_dir, tag, 500, 200, script=script, ckpt_steps=ckpt_steps)
        await wait_started(ids)
        paths = [f"{run_dir}/logs/bench_{i}.out" for i in ids]
        workers = [Worker(t) for t in trees]
        for w in workers:  # the cold sweeps: every log read whole, states kept
            cold = await loop.run_in_executor(None, w.sweep)
            print(f"cold sweep (one, no states), {w.tree}: {cold['wall']:.2f}s; "
                  + ", ".join(f"{k} {v:.3f}" for k, v in cold.items()
                              if k not in ("wall", "jobs") and isinstance(v, float)),
                  flush=True)
        got: dict[tuple[str, str], list[tuple[float, dict[str, Any]]]] = {}
        step = 201
        for n in range(rounds):
            for kind in ("+3 steps", "nothing appended"):
                if kind == "+3 steps":
                    await bw.append_all(run_dir, bw.hf_steps(step, 3, 400))
                    step += 3
                if churn:  # one more job in the queue: every tree's held document is stale
                    out = await ssh(["sbatch", "--parsable", "--hold", "-J", f"churn-{tag}",
                                     "-o", "/dev/null", "--wrap", "true"])
                    ids.append(out.strip().split(";")[0])
                t0 = time.perf_counter()
                await floor_once(paths)
                floor = time.perf_counter() - t0
                order = workers if (n + (kind != "+3 steps")) % 2 == 0 else workers[::-1]
                said = []
                for w in order:
                    figures = await loop.run_in_executor(None, w.sweep)
                    got.setdefault((w.tree, kind), []).append((figures["wall"] / floor, figures))
                    said.append(f"{w.tree} {figures['wall']:.2f}s = {figures['wall'] / floor:.2f}x")
                print(f"round {n + 1}, {kind}: floor {floor:.2f}s; " + "; ".join(said),
                      flush=True)
        for n in range(cold_rounds):  # cold bot sweeps, interleaved as the warm ones
            said = []
            for w in workers if n % 2 == 0 else workers[::-1]:
                figures = await loop.run_in_executor(None, lambda w=w: w.sweep(cold=True))
                got.setdefault((w.tree, "cold"), []).append((figures["wall"], figures))
                said.append(f"{w.tree} {figures['wall']:.2f}s")
            print(f"cold round {n + 1}: " + "; ".join(said), flush=True)
        for w in workers:
            w.close()
        for (tree, kind), runs in got.items():
            if kind == "cold":
                print(f"cold, {tree}: median {statistics.median(r[0] for r in runs):.3f}s "
                      f"(min {min(r[0] for r in runs):.3f}s); collector median "
                      f"{statistics.median(r[1]['collector'] for r in runs):.3f}s")
                continue
            names = [k for k in runs[0][1] if k != "jobs"]
            phases = ", ".join(f"{k} {statistics.median(r[1].get(k, 0.0) for r in runs):.3f}"
                               for k in names)
            print(f"{kind}, {tree}: median {statistics.median(r[0] for r in runs):.2f}x the "
                  f"floor (min {min(r[0] for r in runs):.2f}x); medians: {phases}")
    finally:
        await clean_up(ids, run_dir)
        for start in range(0, len(others), 500):
            await loop.run_in_executor(None, lambda part=others[start:start + 500]:
                                       subprocess.run(["scancel", *part], check=False))


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        sys.path.insert(0, sys.argv[2])
        asyncio.run(work())
        return
    sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--churn", action="store_true",
                        help="submit one held job before each sweep pair (a queue that changes "
                             "every sweep: no held squeue document can be reused)")
    parser.add_argument("--cold", type=int, default=0, metavar="N",
                        help="then N rounds of cold sweeps (each tree's states forgotten "
                             "first: every log read whole), the trees alternating")
    parser.add_argument("--crowd", type=int, default=0, metavar="N",
                        help="first submit N held jobs as this machine's user: other people's "
                             "jobs in the queue, which squeue --json prints in full")
    parser.add_argument("--script", action="store_true",
                        help="jobs run from a batch script with arguments (run.sh --ckpt_path "
                             "DIR), as most real jobs are, not --wrap")
    parser.add_argument("--ckpt-steps", type=int, default=0, metavar="N",
                        help="with --script, each job's DIR holds N saves written an hour ago "
                             "(default: no such dir)")
    args = parser.parse_args()
    asyncio.run(compare([str(Path(t).resolve()) for t in args.trees], args.rounds, args.churn,
                        args.crowd, args.cold, script=args.script,
                        ckpt_steps=args.ckpt_steps))


if __name__ == "__main__":
    main()
