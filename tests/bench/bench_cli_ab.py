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

It also prints where the machine's CPU went (``/proc/stat`` across each run, medians): the
CLI process's own CPU seconds, the rest of the machine's (here the login node is this
machine: sshd, the collector, squeue, slurmctld) and the cores left idle, beside the same
for the floor. Where the floor alone keeps the cores busy, no sweep doing more can stay
within a small multiple of it on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.bench_cli import ENV, config_text  # noqa: E402
from tests.bench.bench_cli import submit as bench_cli_submit  # noqa: E402
from tests.bench.bench_slurm import clean_up, floor_once, wait_started  # noqa: E402

__test__ = False


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far (``/proc/stat``'s first line)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / tick, idle / tick


@dataclass
class Cpu:
    """CPU seconds across one run: its own process's, the rest of the machine's, idle."""

    own: float
    rest: float
    idle: float

    @staticmethod
    def median(runs: list[Cpu]) -> Cpu:
        return Cpu(*(statistics.median(getattr(r, f) for r in runs)
                     for f in ("own", "rest", "idle")))

    def __str__(self) -> str:
        return (f"CPU own {self.own:.2f}s + rest of machine {self.rest:.2f}s, "
                f"idle {self.idle:.2f}s of {os.cpu_count()} cores")


def child(argv: list[str]) -> tuple[float, float, Cpu]:
    """(wall seconds, peak RSS MB, CPU) of one child process."""
    busy0, idle0 = machine_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    busy1, idle1 = machine_cpu()
    if code := os.waitstatus_to_exitcode(status):
        assert proc.stderr is not None
        print("  ! exit", code, proc.stderr.read().decode()[-400:])
    own = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024, Cpu(own, busy1 - busy0 - own, idle1 - idle0)


async def submit(run_dir: str, tag: str, script: bool = False) -> list[str]:
    return await bench_cli_submit(run_dir, tag, 500, 200, script=script, sleep_s=3000)


async def measure(args: argparse.Namespace, ids: list[str], paths: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "c.toml"
        config.write_text(config_text(args.clusters))
        walls: dict[str, list[float]] = {t: [] for t in args.trees}
        starts: dict[str, list[float]] = {t: [] for t in args.trees}
        rss = dict.fromkeys(args.trees, 0.0)
        cpus: dict[str, list[Cpu]] = {t: [] for t in args.trees}
        floors: list[float] = []
        floor_cpus: list[Cpu] = []
        for n in range(args.rounds):
            busy0, idle0 = machine_cpu()
            own0 = resource.getrusage(resource.RUSAGE_SELF)
            began = time.perf_counter()
            await asyncio.gather(*(floor_once(paths) for _ in range(args.clusters)))
            floors.append(time.perf_counter() - began)
            own1 = resource.getrusage(resource.RUSAGE_SELF)
            busy1, idle1 = machine_cpu()
            own = own1.ru_utime - own0.ru_utime + own1.ru_stime - own0.ru_stime
            floor_cpus.append(Cpu(own, busy1 - busy0 - own, idle1 - idle0))
            for tree in args.trees if n % 2 == 0 else args.trees[::-1]:
                exe = f"{tree}/.venv/bin/jobtables"
                starts[tree].append(child([exe, "--help"])[0])
                command = ["sweep"] if args.cmd == "sweep" else ["job", ids[0]]
                wall, peak, cpu = child([exe, *command, "--config", str(config)])
                walls[tree].append(wall)
                cpus[tree].append(cpu)
                rss[tree] = max(rss[tree], peak)
        floor = statistics.median(floors)
        print(f"floor median {floor:.3f}s ({args.clusters} cluster(s), {args.rounds} rounds, "
              f"cmd {args.cmd}); {Cpu.median(floor_cpus)} (own: this bench process)")
        for tree in args.trees:
            wall, start = statistics.median(walls[tree]), statistics.median(starts[tree])
            print(f"{tree}: {wall:.3f}s = {wall / floor:.2f}x floor; CLI start {start:.3f}s; "
                  f"{wall / (floor + start):.2f}x floor+start; min {min(walls[tree]):.3f} "
                  f"max {max(walls[tree]):.3f}; peak RSS {rss[tree]:.0f} MB\n"
                  f"    {Cpu.median(cpus[tree])}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument("--cmd", choices=("sweep", "job"), default="sweep")
    parser.add_argument("--script", action="store_true",
                        help="jobs run from a batch script with arguments (run.sh --ckpt_path "
                             "DIR), as most real jobs are, not --wrap")
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/ab-{tag}"
    ids: list[str] = []
    try:
        ids = await submit(run_dir, tag, args.script)
        await wait_started(ids)
        await measure(args, ids, [f"{run_dir}/logs/bench_{i}.out" for i in ids])
    finally:
        await clean_up(ids, run_dir)


if __name__ == "__main__":
    asyncio.run(main())
