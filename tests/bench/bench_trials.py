"""Benchmark: counting result.json over a whole run, 100k trials in one job dir (a script).

    .venv/bin/python tests/bench/bench_trials.py [--trials 100000] [--budget 120]
        [--trajectory-kb 200]

Builds one Harbor job directory of ``--trials`` trials from the 32 real Harbor 0.26.0 mixed-eval
results (``tests/fixtures/harbor-0.26.0``, renamed, one second apart), then runs the shipped
collector script (``python3 -``, as on a login node) over it and prints:
1. the wall time of the collector run and the count it reports (and whether the time bound was
   hit), at ``--budget`` seconds and at the default bound (20 s);
2. the answer size in bytes beside the size the same trials would take sent as one record each
   (the shape before issue 11, which also stopped at 20 000 trials).
With ``--trajectory-kb``, every trial is an installed agent's (claude-code, openhands, ...):
its result.json counts no turns, and an ATIF ``agent/trajectory.json`` of that size lies beside
it, which is where the run's avg_turns comes from.
The scratch directory is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.harbor import summarize_trials  # noqa: E402
from probes.remote.harbor_reduce import reduce_trial  # noqa: E402
from probes.remote.script import build_collector_script  # noqa: E402
from probes.slurm.assemble import trial_tree  # noqa: E402

MIXED = ROOT / "tests" / "fixtures" / "harbor-0.26.0" / "jobs" / "2026-11-30__10-00-00"
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def trajectory(turns: int, kb: int) -> str:
    """An installed agent's ATIF ``agent/trajectory.json`` (Harbor 0.26.0's shape): system and
    user steps, then ``turns`` agent steps whose tool observations make it about ``kb`` KiB."""
    observation = "x" * max(0, (kb * 1024) // max(turns, 1) - 200)
    steps: list[dict[str, Any]] = [
        {"step_id": 1, "source": "system", "message": "You are OpenHands agent ..."},
        {"step_id": 2, "source": "user", "message": "Solve the task in /app."}]
    steps += [{"step_id": 3 + i, "source": "agent", "message": "running the tests",
               "tool_calls": [{"function_name": "execute_bash", "arguments": {"cmd": "pytest"}}],
               "observation": {"results": [{"content": observation}]},
               "metrics": {"prompt_tokens": 9283, "completion_tokens": 650}}
              for i in range(turns)]
    return json.dumps({"schema_version": "ATIF-v1.8", "agent": {"name": "openhands"},
                       "steps": steps, "final_metrics": {"total_steps": len(steps)}})


def build(job: Path, n: int, trajectory_kb: int = 0) -> int:
    """The job dir; returns the bytes the trials would take as one reduced record each. With
    ``trajectory_kb``, each trial is an installed agent's: no turns in its result.json, an ATIF
    trajectory of that size beside it."""
    templates = [json.loads(p.read_text()) for p in sorted(MIXED.glob("*/result.json"))]
    meta = json.loads((MIXED / "result.json").read_text())
    meta["n_total_trials"] = n
    job.mkdir(parents=True)
    (job / "result.json").write_text(json.dumps(meta))
    records = 0
    for i in range(n):
        data = dict(templates[i % len(templates)])
        data["trial_name"] = name = f"task-{i % 97:02d}__{i:06d}"
        data["finished_at"] = (T0 + timedelta(seconds=i)).isoformat()
        if trajectory_kb:
            data["agent_result"] = dict(data.get("agent_result") or {}, metadata=None)
        raw = json.dumps(data)
        (job / name).mkdir()
        (job / name / "result.json").write_text(raw)
        if trajectory_kb:
            (job / name / "agent").mkdir()
            (job / name / "agent" / "trajectory.json").write_text(
                trajectory(5 + i % 7, trajectory_kb))
        records += len(json.dumps({name: reduce_trial(raw)})) + 2
    return records


def run(job: Path, budget: float) -> tuple[float, int, dict[str, Any]]:
    stdout = job.parent / "slurm-1.out"
    stdout.write_text("step\n")
    request = {"tail_bytes": 4096, "min_lines": 1, "trial_budget_s": budget,
               "deadline_s": budget + 60, "read_timeout_s": 30,
               "jobs": [{"id": "1", "stdout": str(stdout), "workdir": str(job.parent),
                         "checkpoint_roots": [], "trial_roots": [str(job)]}]}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-"], input=build_collector_script(request),
                          capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - started
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, len(done.stdout.encode()), answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--trajectory-kb", type=int, default=0,
                        help="installed agents' trials: turns only in an ATIF trajectory of "
                             "this size (KiB) beside each result.json")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-trials-"))
    try:
        started = time.perf_counter()
        records = build(scratch / "run" / "jobs", args.trials, args.trajectory_kb)
        print(f"built {args.trials} trials in {time.perf_counter() - started:.1f}s")
        for budget in (args.budget, 20.0):
            elapsed, size, answer = run(scratch / "run" / "jobs", budget)
            tree = trial_tree(answer["jobs"]["1"]["trials"])
            assert tree is not None
            stats = summarize_trials(tree)
            print(f"budget {budget:g}s: counted {stats.trials}/{args.trials}"
                  f" (complete={stats.count_complete}, counting {stats.count_seconds}s,"
                  f" collector wall {elapsed:.1f}s), pass_rate {stats.pass_rate:.3f},"
                  f" records sent {len(tree.trials)}, avg_turns {stats.avg_turns}")
            print(f"  answer {size} bytes; one record per trial would be {records} bytes")
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
