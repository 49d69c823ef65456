"""Benchmark: ten clusters swept at once in one process, beside ten concurrent floors.

    .venv/bin/python tests/bench/bench_many_clusters.py [--jobs 50] [--clusters 10] [--repeat 3]

(``--jobs 500`` is the issue's figure; the default is modest because the single-node SLURM is
shared.) All ten clusters are the one local SLURM over SSH (127.0.0.1:2222), so each sees the
same jobs. Prints, measured side by side in one run:

1. the sweep of all clusters by the bot's own :class:`bot.sweep.Sweeper` (no Redis), in a
   fresh child process: its wall time and the child's peak RSS (target <= 600 MB);
2. the floor, ten times at once: per cluster one SSH connection, one ``squeue --json`` and one
   batched tail (1 MiB) of every log the sweep read; ten of them concurrently;
3. the ratio (target <= 1.5x).

It submits ``--jobs`` jobs tagged ``bench-<tag>-`` and cancels only those, by id, at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import secrets
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bot.config import Config  # noqa: E402
from bot.sweep import Sweeper  # noqa: E402
from probes.config import SlurmCluster  # noqa: E402
from probes.models import JobState  # noqa: E402
from probes.slurm.parse import parse_squeue_json  # noqa: E402
from probes.slurm.transport import SshRunner  # noqa: E402

ENV = dict(line.split("=", 1) for line in
           Path("/etc/jobtables-test/env").read_text().split() if "=" in line)
LINES = "".join(f"{{'loss': {1 / (i + 1):.4f}, 'grad_norm': 0.5, 'epoch': {i / 100:.2f}}}\n"
                for i in range(200))
TAIL = """
import json, os, sys
out = {}
for p in json.loads(sys.stdin.readline()):
    try:
        with open(p, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - (1 << 20)))
            out[p] = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        out[p] = str(exc)
json.dump(out, sys.stdout)
"""


def cluster(name: str = "bench") -> SlurmCluster:
    return SlurmCluster(
        name=name, host=ENV["JOBTABLES_TEST_SSH_HOST"], port=int(ENV["JOBTABLES_TEST_SSH_PORT"]),
        user=ENV["JOBTABLES_TEST_SSH_USER"], client_keys=(ENV["JOBTABLES_TEST_SSH_KEY"],),
        known_hosts=ENV["JOBTABLES_TEST_KNOWN_HOSTS"], timeout_s=600.0,
        command_timeout_s=500.0, recent_hours=0.002,
    )


async def ssh(argv: list[str], stdin: str | None = None) -> str:
    runner = SshRunner(cluster())
    try:
        return (await runner.run(argv, stdin=stdin)).stdout
    finally:
        await runner.aclose()


async def submit(run_dir: str, tag: str, count: int) -> list[str]:
    """``count`` jobs in one remote loop; each prints 200 steps then sleeps."""
    script = (f"mkdir -p {run_dir}/logs && cd {run_dir} && "
              f"printf '%s' {json.dumps(LINES)} > lines.txt && "
              f"for i in $(seq 1 {count}); do "
              f"sbatch --parsable -J bench-{tag}-$i -o {run_dir}/logs/bench_%j.out "
              f"--wrap 'cat {run_dir}/lines.txt; sleep 900'; done")
    return (await ssh(["bash", "-c", script])).split()


async def wait_running(ids: list[str], bound_s: float = 300) -> int:
    """Until every job runs (or the bound passes); the number running."""
    deadline, want, running = time.monotonic() + bound_s, set(ids), 0
    while time.monotonic() < deadline:
        records = parse_squeue_json(await ssh(["squeue", "--json"]), cluster="b",
                                    now=datetime.now(UTC))
        running = sum(r.state is JobState.RUNNING for r in records if r.job_id in want)
        if running == len(want):
            await asyncio.sleep(3)  # let the last ones print their lines
            break
        await asyncio.sleep(2)
    return running


def child(clusters: int, out: str) -> None:
    """One sweep of ``clusters`` clusters by the Sweeper; wall time, peak RSS, logs read."""
    config = Config(clusters=tuple(cluster(f"c{i}") for i in range(clusters)))

    async def once() -> tuple[float, list[str], int]:
        sweeper = Sweeper(lambda: config)
        try:
            started = time.perf_counter()
            result = await sweeper.sweep()
            wall = time.perf_counter() - started
        finally:
            await sweeper.aclose()
        bad = [f"{f.name}: {f.detail}" for f in result.facts if f.status != "ok"]
        assert not bad, bad
        first = result.facts[0]
        paths = [j.log.path for j in first.jobs if j.log is not None and j.log.path]
        return wall, paths, sum(len(f.jobs) for f in result.facts)

    wall, paths, jobs = asyncio.run(once())
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).write_text(json.dumps({"wall": wall, "rss_mb": rss_mb, "paths": paths,
                                     "jobs": jobs}))


def run_child(clusters: int, out: str) -> dict[str, Any]:
    """Run :func:`child` in a fresh interpreter and read back what it measured."""
    subprocess.run([sys.executable, __file__, "--child", out, "--clusters", str(clusters)],
                   check=True)
    data: dict[str, Any] = json.loads(Path(out).read_text())
    Path(out).unlink()
    return data


async def floor_once(paths: list[str]) -> None:
    runner = SshRunner(cluster())
    try:
        await runner.run(["squeue", "--json"])
        await runner.run(["python3", "-c", TAIL], stdin=json.dumps(paths) + "\n")
    finally:
        await runner.aclose()


async def floors(clusters: int, paths: list[str]) -> float:
    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(clusters):
            group.create_task(floor_once(paths))
    return time.perf_counter() - started


async def measure(args: argparse.Namespace, tag: str) -> None:
    sweeps, rss, floor_times, seen = [], [], [], 0
    for round_ in range(args.repeat):
        data = await asyncio.to_thread(run_child, args.clusters,
                                       f"/tmp/bench-many-{tag}-{round_}.json")
        sweeps.append(data["wall"])
        rss.append(data["rss_mb"])
        seen = data["jobs"]
        floor_times.append(await floors(args.clusters, data["paths"]))
    sweep, floor = statistics.median(sweeps), statistics.median(floor_times)
    print(f"{args.clusters} clusters x {seen // args.clusters} jobs ({args.jobs} submitted by "
          f"this bench): sweep {sweep:.2f}s, peak RSS {max(rss):.0f} MB (target <= 600 MB); "
          f"{args.clusters} concurrent floors {floor:.2f}s; ratio {sweep / floor:.2f}x "
          f"(target <= 1.5x); median of {args.repeat}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-{tag}"
    ids: list[str] = []
    try:
        ids = await submit(run_dir, tag, args.jobs)
        running = await wait_running(ids)
        print(f"{running}/{len(ids)} submitted jobs running")
        await measure(args, tag)
    finally:
        if ids:
            await ssh(["scancel", *ids])  # only this bench's own jobs, by id
        await ssh(["rm", "-rf", run_dir])


if __name__ == "__main__":
    if "--child" in sys.argv:  # the measured sweep, in a process of its own (its own peak RSS)
        at = sys.argv.index("--child")
        child(int(sys.argv[sys.argv.index("--clusters") + 1]), sys.argv[at + 1])
    else:
        asyncio.run(main())
