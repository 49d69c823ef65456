"""Interleaved A/B of several trees' cold ``jobtables sweep`` (or ``job``) on the same jobs
(not a test).

    .venv/bin/python tests/bench/bench_cli_ab.py TREE_A TREE_B [--rounds 7] [--clusters 10]
                                                 [--cmd sweep|job]

Each TREE needs its own ``.venv`` (``./scripts/install --dev``) with compiled bytecode
(``.venv/bin/python -m compileall -q bot probes report``). Submits 500 ``bench_cli`` jobs
(200-step HF logs; the node runs 256) once, then per round measures the floor
(``bench_slurm.floor_once``, once per cluster, concurrently) and runs each tree's CLI start
(``jobtables --help``) and command, the trees' order alternating round by round, so both see
the same machine. Prints per tree the median wall, its ratio to the median floor and to floor +
that tree's CLI start, and its peak RSS. Every job is cancelled at the end and the scratch
directory removed.
"""
import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.bench_cli import ENV, config_text, hf_log  # noqa: E402
from tests.bench.bench_slurm import clean_up, floor_once, ssh, wait_started  # noqa: E402

__test__ = False


def child(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if code := os.waitstatus_to_exitcode(status):
        assert proc.stderr is not None
        print("  ! exit", code, proc.stderr.read().decode()[-400:])
    return wall, usage.ru_maxrss / 1024


async def submit(run_dir: str, tag: str) -> list[str]:
    await ssh(["bash", "-c", f"mkdir -p {run_dir}/logs && cat > {run_dir}/lines.txt"],
              stdin=hf_log(200))
    script = (f"cd {run_dir} && for i in $(seq 1 500); do sbatch --parsable "
              f"-J sft-bench-{tag}-$i -o {run_dir}/logs/bench_%j.out "
              f"--wrap 'cat {run_dir}/lines.txt; sleep 3000'; done")
    return (await ssh(["bash", "-c", script])).split()


async def measure(args: argparse.Namespace, ids: list[str], paths: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "c.toml"
        config.write_text(config_text(args.clusters))
        walls: dict[str, list[float]] = {t: [] for t in args.trees}
        starts: dict[str, list[float]] = {t: [] for t in args.trees}
        rss = dict.fromkeys(args.trees, 0.0)
        floors = []
        for n in range(args.rounds):
            began = time.perf_counter()
            await asyncio.gather(*(floor_once(paths) for _ in range(args.clusters)))
            floors.append(time.perf_counter() - began)
            for tree in args.trees if n % 2 == 0 else args.trees[::-1]:
                exe = f"{tree}/.venv/bin/jobtables"
                starts[tree].append(child([exe, "--help"])[0])
                command = ["sweep"] if args.cmd == "sweep" else ["job", ids[0]]
                wall, peak = child([exe, *command, "--config", str(config)])
                walls[tree].append(wall)
                rss[tree] = max(rss[tree], peak)
        floor = statistics.median(floors)
        print(f"floor median {floor:.3f}s ({args.clusters} cluster(s), {args.rounds} rounds, "
              f"cmd {args.cmd})")
        for tree in args.trees:
            wall, start = statistics.median(walls[tree]), statistics.median(starts[tree])
            print(f"{tree}: {wall:.3f}s = {wall / floor:.2f}x floor; CLI start {start:.3f}s; "
                  f"{wall / (floor + start):.2f}x floor+start; min {min(walls[tree]):.3f} "
                  f"max {max(walls[tree]):.3f}; peak RSS {rss[tree]:.0f} MB")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument("--cmd", choices=("sweep", "job"), default="sweep")
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/ab-{tag}"
    ids: list[str] = []
    try:
        ids = await submit(run_dir, tag)
        await wait_started(ids)
        await measure(args, ids, [f"{run_dir}/logs/bench_{i}.out" for i in ids])
    finally:
        await clean_up(ids, run_dir)


if __name__ == "__main__":
    asyncio.run(main())
