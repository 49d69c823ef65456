"""Benchmark of a SLURM sweep on the local 22.05 cluster over real SSH (a script, not a test).

    .venv/bin/python tests/bench/bench_slurm.py [--jobs 500] [--small 50] [--repeat 3]

Prints:
1. SSH round trips per sweep at --small and --jobs jobs (must be the same number);
2. the sweep's wall time beside the floor, measured directly: one connection, one
   `squeue --json`, then one batched tail of every log (target <= 1.5x);
3. the sweep time with one 2 GB log (sparse file + real tail lines) beside one 10 MB log
   (target <= 1.2x);
4. (``--hostile``, alone) at --jobs jobs: the sweep time with one job whose StdOut is a FIFO
   beside the same sweep without it, and the collector's answer size in bytes at a given
   ``answer_budget_bytes`` (``--budget``, default 1 MiB) beside the default budget's.
Every job it submits is cancelled at the end, and its scratch directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.config import SlurmCluster  # noqa: E402
from probes.models import ClusterFacts, JobState  # noqa: E402
from probes.slurm.parse import parse_squeue_json  # noqa: E402
from probes.slurm.probe import SlurmProbe  # noqa: E402
from probes.slurm.transport import SshRunner  # noqa: E402

ENV = dict(line.split("=", 1) for line in
           Path("/etc/jobtables-test/env").read_text().split() if "=" in line)
LOG_LINES = "".join(f"{{'loss': {1 / (i + 1):.4f}, 'grad_norm': 0.5, 'epoch': {i / 100:.2f}}}\n"
                    for i in range(40))
TAIL_SCRIPT = """
import json, os, sys
paths = json.loads(sys.stdin.readline())
out = {}
for p in paths:
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - %d))
            out[p] = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        out[p] = str(exc)
json.dump(out, sys.stdout)
"""


def cluster(**over: object) -> SlurmCluster:
    fields: dict[str, object] = {
        "name": "bench", "host": ENV["JOBTABLES_TEST_SSH_HOST"],
        "port": int(ENV["JOBTABLES_TEST_SSH_PORT"]), "user": ENV["JOBTABLES_TEST_SSH_USER"],
        "client_keys": (ENV["JOBTABLES_TEST_SSH_KEY"],),
        "known_hosts": ENV["JOBTABLES_TEST_KNOWN_HOSTS"], "timeout_s": 300.0,
        "command_timeout_s": 240.0, "recent_hours": 0.002,
    }
    fields.update(over)
    return SlurmCluster(**fields)  # type: ignore[arg-type]


async def ssh(argv: list[str], stdin: str | None = None) -> str:
    runner = SshRunner(cluster())
    try:
        return (await runner.run(argv, stdin=stdin)).stdout
    finally:
        await runner.aclose()


async def clean_up(ids: list[str], run_dir: str) -> None:
    """Cancel the bench's own jobs (only those ids, 200 to a ``scancel``) and remove its scratch
    directory."""
    for start in range(0, len(ids), 200):
        await ssh(["scancel", *ids[start:start + 200]])
    await ssh(["rm", "-rf", run_dir])


async def submit(run_dir: str, tag: str, start: int, count: int) -> list[str]:
    """Submit `count` jobs in one remote shell loop; each writes a small log then sleeps."""
    script = (f"mkdir -p {run_dir}/logs && cd {run_dir} && "
              f"printf '%s' {json.dumps(LOG_LINES)} > lines.txt && "
              f"for i in $(seq {start} {start + count - 1}); do "
              f"sbatch --parsable -J bench-{tag}-$i -o {run_dir}/logs/bench_%j.out "
              f"--wrap 'cat {run_dir}/lines.txt; sleep 600'; done")
    return (await ssh(["bash", "-c", script])).split()


async def wait_started(ids: list[str], bound_s: float = 180) -> None:
    """Until every job has left PENDING or the node is full (256 running)."""
    deadline = time.monotonic() + bound_s
    want = set(ids)
    while time.monotonic() < deadline:
        records = parse_squeue_json(await ssh(["squeue", "--json"]), cluster="b",
                                    now=datetime.now(UTC))
        mine = [r for r in records if r.job_id in want]
        running = sum(r.state is JobState.RUNNING for r in mine)
        if len(mine) == len(want) and (running == len(want) or running >= 250):
            await asyncio.sleep(3)  # let the last ones print their lines
            return
        await asyncio.sleep(2)


async def timed(fn: Callable[[], Awaitable[object]], repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


PROBE: list[SlurmProbe] = []


async def sweep_once() -> tuple[int, int]:
    """One sweep by a long-lived probe (as the Sweeper keeps one per cluster)."""
    if not PROBE:
        PROBE.append(SlurmProbe(cluster()))
    facts = await PROBE[0].collect()
    assert facts.status == "ok", facts.detail
    return facts.round_trips, len(facts.jobs)


async def phases() -> str:
    """Where a warm sweep's time goes: connect + the one collector run (squeue inside) + parsing
    squeue's JSON, any follow-up commands (scontrol/second collector: none expected), and local
    assembly (log parsing)."""
    probe = PROBE[0]
    runner = SshRunner(cluster())
    now = datetime.now(UTC)
    try:
        t0 = time.perf_counter()
        snap = await probe.snapshot(runner, now, (ENV["JOBTABLES_TEST_SSH_USER"],),
                                    one_trip=True)
        t1 = time.perf_counter()
        selected = probe.select(snap.records, runner, now)
        collected = await probe.complete_files(runner, selected, snap, None)
        t2 = time.perf_counter()
        probe._facts(selected, collected)
        t3 = time.perf_counter()
        sent = runner.commands_sent
    finally:
        await runner.aclose()
    return (f"connect+collector(squeue inside)+parse {t1 - t0:.2f}s, follow-up {t2 - t1:.2f}s, "
            f"assemble {t3 - t2:.2f}s ({sent} command(s))")


async def floor_once(paths: list[str]) -> None:
    """The floor: one connection, `squeue --json`, one batched tail of every log."""
    runner = SshRunner(cluster())
    try:
        await runner.run(["squeue", "--json"])
        await runner.run(["python3", "-c", TAIL_SCRIPT % (1 << 20)],
                         stdin=json.dumps(paths) + "\n")
    finally:
        await runner.aclose()


async def measure_jobs(run_dir: str, tag: str, small: int, total: int, repeat: int) -> list[str]:
    ids = await submit(run_dir, tag, 0, small)
    await wait_started(ids)
    for n in (small, total):
        if n == total:
            ids += await submit(run_dir, tag, small, total - small)
            await wait_started(ids)
        wall, result = await timed(sweep_once, repeat)
        trips, jobs = result  # type: ignore[misc]
        paths = [f"{run_dir}/logs/bench_{i}.out" for i in ids]
        floor, _ = await timed(lambda p=paths: floor_once(p), repeat)  # type: ignore[misc]
        print(f"{n:4d} submitted jobs ({jobs} in sweep): round trips {trips}, "
              f"sweep {wall:.2f}s, floor {floor:.2f}s, ratio {wall / floor:.2f}x (target <= 1.5x)"
              f"\n      phases: {await phases()}")
    return ids


async def measure_big_log(run_dir: str, tag: str, repeat: int) -> None:
    results = {}
    for label, size in (("10 MB", "10M"), ("2 GB", "2G")):
        log = f"{run_dir}/logs/{label.replace(' ', '')}_%j.out"
        wrap = (f"truncate -s {size} {log.replace('%j', '$SLURM_JOB_ID')}; "
                f"cat {run_dir}/lines.txt; sleep 600")
        job = (await ssh(["sbatch", "--parsable", "-J", f"bench-{tag}-big", "-o", log,
                          "--open-mode=append", "--wrap", wrap])).strip()
        await wait_started([job])
        wall, _ = await timed(sweep_once, repeat)
        results[label] = wall
        await ssh(["scancel", job])
        await asyncio.sleep(5)
    ratio = results["2 GB"] / results["10 MB"]
    print(f"one 10 MB log: sweep {results['10 MB']:.2f}s; one 2 GB sparse log: "
          f"{results['2 GB']:.2f}s; ratio {ratio:.2f}x (target <= 1.2x)")


class CountingRunner:
    """An SshRunner that remembers how many bytes each collector run answered."""

    def __init__(self, cluster_: SlurmCluster) -> None:
        self._inner = SshRunner(cluster_)
        self.target, self.login_user = self._inner.target, self._inner.login_user

    @property
    def commands_sent(self) -> int:
        return self._inner.commands_sent

    async def run(self, argv: list[str], *, stdin: str | None = None,
                  check: bool = True) -> object:
        res = await self._inner.run(argv, stdin=stdin, check=check)
        if argv[0] == "python3":
            ANSWERS.append(len(res.stdout.encode()))
        return res

    async def aclose(self) -> None:
        await self._inner.aclose()


ANSWERS: list[int] = []


async def hostile_sweep(repeat: int, **over: object) -> tuple[float, ClusterFacts, int]:
    probe = SlurmProbe(cluster(**over), runner_factory=CountingRunner)  # type: ignore[arg-type]
    ANSWERS.clear()
    wall, facts = await timed(probe.collect, repeat)
    assert isinstance(facts, ClusterFacts)
    return wall, facts, max(ANSWERS, default=0)


async def measure_hostile(run_dir: str, tag: str, total: int, repeat: int, budget: int,
                          ) -> list[str]:
    """One FIFO StdOut among ``total`` jobs; the collector's answer at a budget."""
    fifo = f"{run_dir}/logs/fifo.out"
    await ssh(["mkdir", "-p", f"{run_dir}/logs"])
    # Submitted first, so it runs (the node runs 256 jobs at once; the rest wait).
    ids = [(await ssh(["sbatch", "--parsable", "-J", f"bench-{tag}-fifo", "-o", fifo,
                       "--wrap", f"rm -f {fifo}; mkfifo {fifo}; sleep 600"])).strip()]
    ids += await submit(run_dir, tag, 0, total - 1)
    await wait_started(ids)
    wall, facts, size = await hostile_sweep(repeat, recent_hours=1.0)
    (job,) = [j for j in facts.jobs if j.record.job_id == ids[0]]
    fifo_log = job.log.status if job.log else None, job.log.error if job.log else None
    await ssh(["rm", "-f", fifo])  # the same jobs, the FIFO gone: the baseline
    base, _, _ = await hostile_sweep(repeat, recent_hours=1.0)
    print(f"{total} jobs ({len(facts.jobs)} in the sweep): sweep {base:.2f}s; with one FIFO"
          f" StdOut {wall:.2f}s (cluster {facts.status}, FIFO job {fifo_log[0]}: {fifo_log[1]})")
    _, facts, capped_size = await hostile_sweep(1, recent_hours=1.0,
                                                answer_budget_bytes=budget)
    over = sum(1 for j in facts.jobs
               if j.log is not None and "answer budget" in (j.log.error or ""))
    print(f"collector answer: {size} bytes at the default budget (32 MiB); "
          f"{capped_size} bytes at a {budget}-byte budget ({over} jobs fetch-failed beyond it)")
    return ids


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--budget", type=int, default=1 << 20)
    args = parser.parse_args()
    tag = secrets.token_hex(3)
    run_dir = f"{ENV['JOBTABLES_TEST_SCRATCH']}/bench-{tag}"
    ids: list[str] = []
    try:
        if args.hostile:
            ids = await measure_hostile(run_dir, tag, args.jobs, args.repeat, args.budget)
            return
        ids = await measure_jobs(run_dir, tag, args.small, args.jobs, args.repeat)
        await ssh(["scancel", *ids])
        ids = []
        await asyncio.sleep(10)  # cancelled jobs fall out of the 0.002 h recent window
        await measure_big_log(run_dir, tag, args.repeat)
    finally:
        if ids:
            await ssh(["scancel", *ids])
        await ssh(["bash", "-c", f"squeue -h -u jobtables -o '%i %j' | awk '$2 ~ /^bench-{tag}-/"
                   f" {{print $1}}' | xargs -r scancel; rm -rf {run_dir}"])


if __name__ == "__main__":
    asyncio.run(main())
