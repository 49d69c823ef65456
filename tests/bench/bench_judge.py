"""Benchmark: judging a sweep, ``report.judge.build_report`` (not a test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_judge.py [--jobs 256,1000,5000]
    PYTHONPATH=. .venv/bin/python tests/bench/bench_judge.py --vs REV [--rounds 7]

Without ``--vs``: RL jobs that are one user's attempts of one run. Each job is the sweep
benches' 200-step log (``bench_cli.hf_log``) assembled as a collector answer
(``bench_memory.facts_for``: RL names ``rl-grpo-<i>``, one user, one name stem: each job's
earlier attempts are all the jobs before it). Printed per size: ``build_report`` time, per job,
and per job against the smallest size's (the floor measured in the same run): 1.0x is linear.
Before ``report.fingerprint.Attempts`` each job scanned the user's every job.

With ``--vs REV``: three sweeps judged by this tree and by a copy of the repository at git
revision ``REV`` (``git archive``, in a temporary directory), each in its own worker process,
in turn (A B A B ...), so both see the same machine load; printed are the medians and the
median of the pairwise ratios (before / after). Each timing is the least process CPU time
of three judgings (``time.process_time``: on a shared machine the wall clock also counts other
processes' turns; their load only ever adds time). The sweeps:

- ``sft``: 256 RUNNING SFT jobs (``sft-bench-x-<i>``), each the 200-step HF log: the cold CLI
  sweep of ``bench_cli``;
- ``rl``: the 256-job RL sweep above;
- ``mixed``: 1,000 jobs of two users on two clusters, names cycling through RL, SFT (a grid
  at two scales), datagen, eval and catch-all tasks, mostly RUNNING with pending, completed,
  failed and timed-out ones, on the HF log and a SkyRL-shaped RL log
  (``tests.probes.retained.rl_log``).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.bench.bench_trees import Worker

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ("sft", "rl", "mixed")

__test__ = False

_MIXED_NAMES = (
    "rl-grpo-qwen-{i}", "sft-qwen3-8b-lr{i}", "sft-qwen3-72b-lr{i}", "datagen-swe-chunk{i}",
    "eval-qwen-swebench-{i}", "consolidate-rows-{i}", "grpo-math-{i}-r2", "pretokenize-{i}",
    "my-run-{i}", "rl-grpo-zclip-{i}",
)
_MIXED_STATES = ("RUNNING",) * 12 + ("PENDING", "PENDING", "COMPLETED", "FAILED", "TIMEOUT")


def sweep(kind: str) -> tuple[list[Any], dict[tuple[str, str], Any]]:
    """The clusters and histories of one sweep (module docstring), built by the tree imported."""
    from probes.models import ClusterFacts, JobState, SchedulerRecord
    from probes.slurm.assemble import job_facts
    from tests.bench.bench_cli import hf_log
    from tests.bench.bench_memory import NOW, answer, facts_for
    from tests.probes.retained import rl_log

    def job(cluster: str, i: int, name: str, *, state: str, text: str, user: str) -> Any:
        record = SchedulerRecord(
            cluster=cluster, job_id=str(1000 + i), name=name, user=user, state=JobState(state),
            workdir=f"/w/{i}", stdout_path=f"/w/{i}/slurm-{1000 + i}.out",
            submit_time=NOW - timedelta(hours=3, seconds=i), start_time=NOW - timedelta(hours=2))
        return job_facts(record, answer(text, i), aliases={}, benign_patterns=())

    hf = hf_log(200)
    by_cluster: dict[str, list[Any]] = {}
    if kind == "rl":
        by_cluster["alpha"] = facts_for(256, hf)
    elif kind == "sft":
        by_cluster["alpha"] = [
            job("alpha", i, f"sft-bench-x-{i + 1}", state="RUNNING", text=hf, user="bench")
            for i in range(256)]
    else:
        rl = rl_log(30_000)
        for i in range(1000):
            name = _MIXED_NAMES[i % len(_MIXED_NAMES)].format(i=i // len(_MIXED_NAMES))
            text = rl if name.startswith(("rl-", "grpo-")) else hf
            cluster = ("alpha", "beta")[i % 2]
            by_cluster.setdefault(cluster, []).append(job(
                cluster, i, name, state=_MIXED_STATES[i % len(_MIXED_STATES)], text=text,
                user=("alice", "bob")[(i // 3) % 2]))
    clusters = [ClusterFacts(name=name, kind="slurm", status="ok", collected_at=NOW,
                             jobs=tuple(jobs)) for name, jobs in by_cluster.items()]
    histories = {(c.name, f.record.job_id): f.summary.points
                 for c in clusters for f in c.jobs if f.summary}
    return clusters, histories


def judge_seconds(clusters: list[Any], histories: dict[tuple[str, str], Any],
                  repeat: int, *, least: bool = False) -> float:
    """The median (or, with ``least``, the least CPU) seconds of ``repeat`` judgings."""
    from report.judge import build_report
    from report.settings import ReportSettings
    from tests.bench.bench_memory import NOW

    times = []
    for _ in range(repeat):
        gc.collect()
        clock = time.process_time if least else time.perf_counter
        start = clock()
        build_report(clusters, settings=ReportSettings(), now=NOW, histories=histories)
        times.append(clock() - start)
    return min(times) if least else statistics.median(times)


def scaling(sizes: list[int], repeat: int) -> None:
    """The RL sweep at each size, per job against the first size's (module docstring)."""
    from probes.models import ClusterFacts
    from tests.bench.bench_cli import hf_log
    from tests.bench.bench_memory import NOW, facts_for

    floor: float | None = None
    for jobs in sizes:
        facts = facts_for(jobs, hf_log(200))
        cluster = ClusterFacts(name="alpha", kind="slurm", status="ok", collected_at=NOW,
                               jobs=tuple(facts))
        histories = {("alpha", f.record.job_id): f.summary.points for f in facts if f.summary}
        took = judge_seconds([cluster], histories, repeat)
        per_job = took / jobs
        floor = per_job if floor is None else floor
        print(f"judge {jobs:>5} RL jobs of one run: {took * 1e3:8.1f} ms, "
              f"{per_job * 1e6:6.0f} us per job = {per_job / floor:.2f}x the {sizes[0]}-job "
              "sweep's per-job cost (1.0x: linear)", flush=True)


def serve() -> None:
    """A worker: builds the sweeps, then answers each sweep name read with its milliseconds."""
    built = {kind: sweep(kind) for kind in SWEEPS}
    import report
    print(json.dumps({"report": report.__file__,
                      "jobs": {k: sum(len(c.jobs) for c in v[0]) for k, v in built.items()}}),
          flush=True)
    for line in sys.stdin:
        clusters, histories = built[line.strip()]
        print(judge_seconds(clusters, histories, 3, least=True) * 1e3, flush=True)


def compare(ours: Worker, theirs: Worker, rounds: int) -> None:
    for kind in SWEEPS:
        pairs = []
        for _ in range(rounds):
            before = theirs.time(kind)
            pairs.append((before, ours.time(kind)))
        before, after = (statistics.median(p[i] for p in pairs) for i in (0, 1))
        ratio = statistics.median(b / a for b, a in pairs)
        jobs = ours.info["jobs"][kind]
        print(f"  {kind:<6} {jobs:>5} jobs  {before:8.1f} ms -> {after:8.1f} ms   "
              f"({before * 1e3 / jobs:5.0f} -> {after * 1e3 / jobs:5.0f} us/job)   {ratio:5.2f}x",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="256,1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vs", metavar="REV", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    if args.vs is None:
        sys.path.insert(0, str(ROOT))
        scaling([int(n) for n in args.jobs.split(",")], args.repeat)
        return 0
    sys.path.insert(0, str(ROOT))
    from tests.bench.bench_trees import Worker, tree_at  # here: a worker's tree may lack it

    with tree_at(args.vs, "bench_judge_") as base:
        ours, theirs = Worker(__file__, ROOT), Worker(__file__, base)
        for worker, tree in ((ours, ROOT), (theirs, base)):
            assert Path(worker.info["report"]).resolve().is_relative_to(tree.resolve())
        print(f"before: {args.vs}   after: this tree   ({args.rounds} rounds, A B A B; each "
              "time the least CPU time of 3 judgings; medians; ratio = median of before / after)")
        try:
            compare(ours, theirs, args.rounds)
        finally:
            ours.close()
            theirs.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
