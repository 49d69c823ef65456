"""Benchmark: the deep probe's cost on a run with 10,000 trials and 1,000-line dump files.

    .venv/bin/python tests/bench/bench_deep_probe.py

Builds a Harbor job dir of 10,000 trials (real Harbor 0.26 result.json) and a verl
rollout_data dir of 50 step files x 1,000 lines, then runs the shipped reader as
``python3 -`` (what the login node runs) and the judgement, and prints time, files opened and
bytes read for the default bounds and for a "read everything" request (the unbounded cost the
sample avoids).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.remote.script import build_rollouts_script  # noqa: E402
from probes.rollouts import rollout_facts  # noqa: E402
from report.deep_probe import judge_rollouts  # noqa: E402

JOB = ROOT / "tests/fixtures/harbor-0.26.0/jobs/2026-11-30__10-00-00"
TRIAL = next(JOB.glob("*/result.json"))


def build(tmp: Path) -> tuple[Path, Path]:
    job = tmp / "jobs" / "2026-12-01__00-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    raw = TRIAL.read_bytes()
    for i in range(10_000):
        (job / f"task-{i:05d}__abcdefg").mkdir()
        (job / f"task-{i:05d}__abcdefg" / "result.json").write_bytes(raw)
    dump = tmp / "rollout_data"
    dump.mkdir()
    for step in range(1, 51):
        rows = [json.dumps({"input": f"prompt {i // 8}", "output": f"answer {i} for step {step} "
                            "with a few more words to look like text" * 4,
                            "gts": None, "score": float(i % 2), "step": step})
                for i in range(1000)]
        (dump / f"{step}.jsonl").write_text("\n".join(rows) + "\n")
    return tmp / "jobs", dump


def run(request: dict[str, object]) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    out = subprocess.run(["python3", "-"], input=build_rollouts_script(request),
                         capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - started, json.loads(out)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jobs, dump = build(Path(tmp))
        base = {"trial_roots": [str(jobs)], "dump_dirs": [str(dump)]}
        for label, extra in (("bounded (defaults)", {}),
                             ("read everything", {"max_trials": 10_000, "max_files": 50,
                                                  "max_lines": 1000, "max_file_bytes": 1 << 30,
                                                  "deadline_s": 600})):
            wall, answer = run({**base, **extra})
            started = time.perf_counter()
            verdict = judge_rollouts(rollout_facts(answer))
            judge_s = time.perf_counter() - started
            node_ms = answer["elapsed_s"] * 1000
            print(f"{label:20s} reader {wall * 1000:8.1f} ms (on-node {node_ms:8.1f} ms)"
                  f", files {answer['files_opened']:6d}, bytes {answer['bytes_read']:11,d}, "
                  f"answer {len(json.dumps(answer)):10,d} B, judge {judge_s * 1000:7.1f} ms, "
                  f"{verdict.verdict}")


if __name__ == "__main__":
    main()
