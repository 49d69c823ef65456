"""Benchmark: judging a sweep whose RL jobs are one user's attempts of one run (not a test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_judge.py [--jobs 256,1000,5000]

Each job is the sweep benches' 200-step log (``bench_cli.hf_log``) assembled as a collector
answer (``bench_memory.facts_for``: RL names ``rl-grpo-<i>``, one user, one name stem: each
job's earlier attempts are all the jobs before it). Printed per size: ``build_report`` time,
per job, and per job against the smallest size's (the floor measured in the same run): 1.0x
is linear. Before ``report.fingerprint.Attempts`` each job scanned the user's every job.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.models import ClusterFacts  # noqa: E402
from report.judge import build_report  # noqa: E402
from report.settings import ReportSettings  # noqa: E402
from tests.bench.bench_cli import hf_log  # noqa: E402
from tests.bench.bench_memory import NOW, facts_for  # noqa: E402

__test__ = False


def judge_seconds(jobs: int, repeat: int) -> float:
    facts = facts_for(jobs, hf_log(200))
    cluster = ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW,
                           jobs=tuple(facts))
    histories = {("alpha", f.record.job_id): f.summary.points for f in facts if f.summary}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        build_report([cluster], settings=ReportSettings(), now=NOW, histories=histories)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="256,1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.jobs.split(",")]
    floor: float | None = None
    for jobs in sizes:
        took = judge_seconds(jobs, args.repeat)
        per_job = took / jobs
        floor = per_job if floor is None else floor
        print(f"judge {jobs:>5} RL jobs of one run: {took * 1e3:8.1f} ms, "
              f"{per_job * 1e6:6.0f} us per job = {per_job / floor:.2f}x the {sizes[0]}-job "
              "sweep's per-job cost (1.0x: linear)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
