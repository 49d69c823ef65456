"""Benchmark of the ``jobtables`` CLI as a user runs it, on the local SLURM over SSH (not a test).

    .venv/bin/python tests/bench/bench_cli.py [--jobs 500] [--steps 200] [--repeat 3]
                                              [--clusters 10] [--skip-multi]

Submits ``--jobs`` jobs whose logs hold ``--steps`` HF Trainer steps (a banner, a tqdm redraw
and a per-step dict each; the node runs at most 256 of them at once, FORCE:4 x 64 cores, the rest
stay PENDING), then prints, each figure the median of ``--repeat`` runs and every ratio measured
side by side in the same run:

1. cold ``jobtables sweep`` (a child process) beside the floor: one SSH connection, one
   ``squeue --json``, one batched 1 MiB tail of every log (target <= 1.5x, peak RSS <= 200 MB);
2. ``jobtables job ID`` beside the one-job floor: CLI start (``jobtables --help``) + one
   connection with one ``scontrol show job`` and one tail (target <= 1.5x);
3. ``--clusters`` clusters, each the same local cluster, in one config, beside that many floors
   run concurrently (target <= 1.5x, <= 600 MB).

Peak RSS is the child's own ``ru_maxrss`` from ``os.wait4``. Every job submitted is cancelled
at the end (only those ids) and the scratch directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.slurm.transport import SshRunner  # noqa: E402
from tests.bench.bench_slurm import (  # noqa: E402
    ENV,
    TAIL_SCRIPT,
    clean_up,
    cluster,
    floor_once,
    ssh,
    wait_started,
)

JOBTABLES = str(ROOT / ".venv" / "bin" / "jobtables")


def hf_log(steps: int) -> str:
    """An HF Trainer log: banner, then per step a bar redraw and a string-valued dict."""
    head = ("***** Running training *****\n  Num examples = 51,200\n"
            f"  Total optimization steps = {steps:,}\n")
    body = "".join(
        f"\r  {100 * s // steps:3d}%|#         | {s}/{steps} [00:{s % 60:02d}<00:11,  8.10it/s]"
        f"\r{{'loss': '{2.0 - s / (steps * 2):.4g}', 'grad_norm': '{0.3 + (s % 7) / 50:.4g}', "
        f"'learning_rate': '{1e-5 * (1 - s / steps):.4g}', 'epoch': '{s / steps:.4g}'}}\n"
        for s in range(1, steps + 1))
    return head + body


async def submit(run_dir: str, tag: str, count: int, steps: int, *, script: bool = False,
                 sleep_s: int = 900, ckpt_steps: int = 0) -> list[str]:
    """``count`` jobs, each printing the same ``steps``-step log then sleeping, in one shell.
    With ``script``, each runs ``run.sh --ckpt_path <dir>`` as most real jobs run (SLURM's
    command is then the script and its arguments; a ``--wrap`` job has none); with
    ``ckpt_steps``, each such dir holds that many saves (``global_step_10``, ``_20``, ...)
    written an hour ago, as a running job's folder holds its earlier saves."""
    await ssh(["bash", "-c", f"mkdir -p {run_dir}/logs && cat > {run_dir}/lines.txt"],
              stdin=hf_log(steps))
    if script and ckpt_steps:
        saves = " ".join(f"global_step_{10 * s}" for s in range(1, ckpt_steps + 1))
        await ssh(["bash", "-c", f"cd {run_dir} && for i in $(seq 1 {count}); do "
                   f"mkdir -p ckpt-$i && (cd ckpt-$i && mkdir -p {saves}); done && "
                   f"touch -d '1 hour ago' ckpt-*/* ckpt-*"])
    if script:
        await ssh(["bash", "-c", f"cat > {run_dir}/run.sh && chmod +x {run_dir}/run.sh"],
                  stdin=f"#!/bin/bash\ncat {run_dir}/lines.txt\nsleep {sleep_s}\n")
        body = f"{run_dir}/run.sh --ckpt_path {run_dir}/ckpt-$i"
    else:
        body = f"--wrap 'cat {run_dir}/lines.txt; sleep {sleep_s}'"
    loop = (f"cd {run_dir} && for i in $(seq 1 {count}); do "
            f"sbatch --parsable -J sft-bench-{tag}-$i -o {run_dir}/logs/bench_%j.out "
            f"{body}; done")
    return (await ssh(["bash", "-c", loop])).split()


def config_text(clusters: int) -> str:
    entries = []
    for n in range(clusters):
        entries.append(
            f'[[clusters]]\nname = "bench{n}"\nkind = "slurm"\n'
            f'host = "{ENV["JOBTABLES_TEST_SSH_HOST"]}"\nport = {ENV["JOBTABLES_TEST_SSH_PORT"]}\n'
            f'user = "{ENV["JOBTABLES_TEST_SSH_USER"]}"\n'
            f'known_hosts = "{ENV["JOBTABLES_TEST_KNOWN_HOSTS"]}"\n'
            f'client_keys = ["{ENV["JOBTABLES_TEST_SSH_KEY"]}"]\nrecent_hours = 0.002\n')
    return "\n".join(entries)


def write_configs(tmp: Path, clusters: int) -> tuple[Path, Path]:
    """One config with the cluster once, one with it ``clusters`` times."""
    one, many = tmp / "one.toml", tmp / "many.toml"
    one.write_text(config_text(1))
    many.write_text(config_text(clusters))
    return one, many


def run_child(argv: Sequence[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one child process, from its own rusage."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        assert proc.stderr is not None
        print(f"  ! {' '.join(argv[1:3])} exit {proc.returncode}: "
              f"{proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def median_child(argv: Sequence[str], repeat: int) -> tuple[float, float]:
    runs = [run_child(argv) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


async def median_async(make: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await make()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def one_job_floor(job_id: str, path: str) -> None:
    """The one-job floor's remote part: one connection, `scontrol show job`, one tail."""
    runner = SshRunner(cluster())
    try:
        await runner.run(["scontrol", "show", "job", job_id])
        await runner.run(["python3", "-c", TAIL_SCRIPT % (1 << 20)],
                         stdin=json.dumps([path]) + "\n")
    finally:
        await runner.aclose()


def report(label: str, wall: float, floor: float, rss: float, target: str) -> None:
    print(f"{label}: {wall:.2f}s beside floor {floor:.2f}s = {wall / floor:.2f}x, "
          f"peak RSS {rss:.0f} MB ({target})", flush=True)


async def measure(args: argparse.Namespace, run_dir: str, ids: list[str]) -> None:
    paths = [f"{run_dir}/logs/bench_{i}.out" for i in ids]
    with tempfile.TemporaryDirectory() as tmp:
        one, many = write_configs(Path(tmp), args.clusters)
        for _ in range(args.rounds):
            start, _ = median_child([JOBTABLES, "--help"], args.repeat)
            wall, rss = median_child([JOBTABLES, "sweep", "--config", str(one)], args.repeat)
            floor = await median_async(lambda: floor_once(paths), args.repeat)
            report(f"jobtables sweep, {len(ids)} jobs x {args.steps} steps", wall, floor, rss,
                   f"target <= 1.5x, <= 200 MB; with CLI start {start:.2f}s in the floor: "
                   f"{wall / (floor + start):.2f}x")
            wall, rss = median_child([JOBTABLES, "job", ids[0], "--config", str(one)],
                                     args.repeat)
            remote = await median_async(lambda: one_job_floor(ids[0], paths[0]), args.repeat)
            report(f"jobtables job {ids[0]}", wall, start + remote, rss,
                   f"floor = CLI start {start:.2f}s + remote {remote:.2f}s; target <= 1.5x")
            if args.skip_multi:
                continue
            wall, rss = median_child([JOBTABLES, "sweep", "--config", str(many)], args.repeat)
            floor = await median_async(
                lambda: asyncio.gather(*(floor_once(paths) for _ in range(args.clusters))),
                args.repeat)
            report(f"{args.clusters} clusters x {len(ids)} jobs", wall, floor, rss,
                   f"floor = {args.clusters} concurrent floors; target <= 1.5x, <= 600 MB")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the whole set")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--skip-multi", action="store_true")
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-cli-{tag}"
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
