"""Benchmark of ``jobtables job ID`` on the local 22.05 cluster over real SSH (a script).

    .venv/bin/python tests/bench/bench_job.py [--small 50] [--jobs 500] [--repeat 3]

At --small and then --jobs jobs of ours on the cluster, prints for one running job (a small
log, then sleep) among held ones (``sbatch --hold``: on the queue, in every squeue answer,
but taking no CPU from the other users of this shared one-node cluster):

1. ``jobtables job ID`` as a user runs it (a cold ``python -m bot.cli`` process), median wall;
2. the one-job floor, measured directly and cold as well: one ``python`` process that imports
   the CLI (``bot.cli``) and the SSH client, connects, and runs ``scontrol show job -o ID``
   and one ``tail -c`` of the job's log (beside it: ``--help`` alone, and the two commands
   alone in this warm process);
3. the ratio (target <= 1.5x, the same at both sizes);
4. the remote commands the one-job path sent (``SlurmProbe.collect_one``; target <= 2);
5. for comparison, ``jobtables sweep`` (what ``job ID`` used to cost: a whole sweep).
Only the jobs it submitted are cancelled at the end, and its scratch directory removed.
"""

from __future__ import annotations

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
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from bench_slurm import ENV, cluster, ssh, submit, wait_started  # noqa: E402

from probes.slurm.probe import SlurmProbe  # noqa: E402
from probes.slurm.transport import SshRunner  # noqa: E402


def _median_wall(argv: list[str], repeat: int) -> float:
    times = []
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'bench'}"}
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True, timeout=600, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def submit_held(run_dir: str, tag: str, start: int, count: int) -> list[str]:
    """``count`` held jobs in one remote shell loop (they never start)."""
    script = (f"mkdir -p {run_dir}/logs && for i in $(seq {start} {start + count - 1}); do "
              f"sbatch --parsable --hold -J bench-{tag}-$i -o {run_dir}/logs/bench_%j.out "
              f"--wrap 'sleep 600'; done")
    return (await ssh(["bash", "-c", script])).split()


async def _floor_remote(job_id: str, log: str) -> float:
    t0 = time.perf_counter()
    runner = SshRunner(cluster())
    try:
        await runner.run(["scontrol", "show", "job", "-o", job_id])
        await runner.run(["tail", "-c", str(1 << 20), log])
    finally:
        await runner.aclose()
    return time.perf_counter() - t0


def _config(tmp: Path) -> Path:
    path = tmp / "jobtables.toml"
    path.write_text(f"""
[[clusters]]
name = "bench"
kind = "slurm"
host = "{ENV['JOBTABLES_TEST_SSH_HOST']}"
port = {ENV['JOBTABLES_TEST_SSH_PORT']}
user = "{ENV['JOBTABLES_TEST_SSH_USER']}"
known_hosts = "{ENV['JOBTABLES_TEST_KNOWN_HOSTS']}"
client_keys = ["{ENV['JOBTABLES_TEST_SSH_KEY']}"]
recent_hours = 0.002
timeout_s = 300
command_timeout_s = 240
""")
    return path


FLOOR = """
import asyncio, sys
import bot.cli
from bench_slurm import cluster
from probes.slurm.transport import SshRunner
async def main():
    runner = SshRunner(cluster())
    try:
        await runner.run(["scontrol", "show", "job", "-o", sys.argv[1]])
        await runner.run(["tail", "-c", str(1 << 20), sys.argv[2]])
    finally:
        await runner.aclose()
asyncio.run(main())
"""


async def measure(job_id: str, log: str, config: Path, repeat: int, total: int) -> None:
    cli = [sys.executable, "-m", "bot.cli"]
    jobs, floors = [], []
    for _ in range(repeat):  # side by side: the shared machine's load hits both alike
        jobs.append(_median_wall([*cli, "job", job_id, "--config", str(config),
                                  "--format", "json"], 1))
        floors.append(_median_wall([sys.executable, "-c", FLOOR, job_id, log], 1))
    job, floor = statistics.median(jobs), statistics.median(floors)
    start = _median_wall([*cli, "--help"], repeat)
    remote = statistics.median([await _floor_remote(job_id, log) for _ in range(repeat)])
    facts = await SlurmProbe(cluster()).collect_one(job_id)
    sweep = _median_wall([*cli, "sweep", "--config", str(config), "--format", "json"], 1)
    print(f"{total:>4} jobs: job ID {job:.2f}s | floor {floor:.2f}s (--help {start:.2f}s,"
          f" warm scontrol+tail {remote:.2f}s) | ratio {job / floor:.2f}x | remote commands"
          f" {facts.round_trips} | whole sweep (old job ID) {sweep:.2f}s", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/benchjob-{tag}"
    ids: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp))
        try:
            ids = await submit(run_dir, tag, 0, 1)
            await wait_started(ids)
            target = ids[0]
            log = f"{run_dir}/logs/bench_{target}.out"
            ids += await submit_held(run_dir, tag, 1, args.small - 1)
            await measure(target, log, config, args.repeat, args.small)
            ids += await submit_held(run_dir, tag, args.small, args.jobs - args.small)
            await measure(target, log, config, args.repeat, args.jobs)
        finally:
            if ids:
                await ssh(["scancel", *ids])
            await ssh(["rm", "-rf", "--", run_dir])


if __name__ == "__main__":
    asyncio.run(main())
