"""Benchmark: one log's parse on the CLI's cold path and the bot's fold, before and after.

Run from the repo root (no SLURM, no Redis: in process, on real text):

    PYTHONPATH=. .venv/bin/python tests/bench/bench_fold.py [--vs REV] [--rounds 5]

For each log (``bench_cli.hf_log(200)``, the sweep benches' 200-step HF Trainer log, and the
recorded trainer logs under ``tests/fixtures``) it prints the median microseconds of

- ``cold``: ``parse_log`` + ``excerpt.retain``, what ``assemble.job_facts`` costs a CLI sweep;
- ``first``: ``parse_increment(None, whole)``, a bot's first read of a log (its fold, no carry);
- ``fold_cold``: ``cursors.fold_job`` of that first read (the fold, retention, the state);
- ``warm``: ``cursors.fold_job`` of the log's last few lines appended to a live state (the bot
  keeps its states in memory between sweeps), i.e. one warm sweep of that job;
- ``warm_json``: the same with the state through its stored JSON first (a restarted bot).

With ``--vs REV`` the same measurement runs, in turn with this tree (A B A B ...), on a copy of
the repository at git revision ``REV`` (``git archive``, in a temporary directory), and the two
are printed side by side with their ratio (before / after): one run, one machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REAL = [
    "hf-transformers-5.24.0/sft_healthy.out", "trl-1.16.0/grpo_healthy.out",
    "trl-1.16.0/probe_healthy.out", "verl-0.4.1/console.log", "verl-0.9.1/console.log",
    "verl-0.9.1/config_a.log", "skyrl-rebuilt/console_v04.log", "megatron-rebuilt/args.log",
    "torch-2.13.0/childfailed.out",
]
APPENDED_LINES = 6
"""The warm sweep's increment: the log's last lines (3 HF steps: a bar redraw and a dict each)."""

__test__ = False


def logs() -> dict[str, bytes]:
    from tests.bench.bench_cli import hf_log

    found = {"bench hf_log(200)": hf_log(200).encode()}
    for name in REAL:
        path = FIXTURES / name
        if path.exists():
            found[name] = path.read_bytes()
    return found


def median_us(run: Callable[[], object], budget_s: float = 0.25, least: int = 5) -> float:
    """Median microseconds of ``run``, repeated for about ``budget_s`` (at least ``least``)."""
    run()
    times: list[float] = []
    spent = 0.0
    while len(times) < least or spent < budget_s:
        start = time.perf_counter()
        run()
        took = time.perf_counter() - start
        times.append(took)
        spent += took
    return statistics.median(times) * 1e6


def split_tail(data: bytes) -> tuple[bytes, bytes]:
    """(the log but its last ``APPENDED_LINES`` lines, those lines)."""
    at = len(data.rstrip(b"\n"))
    for _ in range(APPENDED_LINES):
        at = data.rfind(b"\n", 0, at)
        if at < 0:
            return b"", data
    return data[: at + 1], data[at + 1 :]


def collected(text: bytes, offset: int, *, continued: bool) -> dict[str, Any]:
    """A collector's answer for one tracked read of ``text`` at byte ``offset``."""
    cursor = {"path": "/scratch/run.out", "dev": 1, "ino": 1, "offset": offset + len(text),
              "digest": "0" * 32}
    log = {"requested": "/scratch/run.out", "path": "/scratch/run.out", "status": "ok",
           "size": offset + len(text), "mtime": 1_790_000_000.0,
           "text": text.decode("utf-8", "replace"), "offset": offset, "cursor": cursor}
    if continued:
        log["continued"] = True
    return {"log": log}


def measure() -> dict[str, dict[str, float]]:
    """Every figure of every log, in microseconds, with the code on ``sys.path``."""
    from probes.logs.excerpt import retain
    from probes.logs.incremental import parse_increment
    from probes.logs.parse import parse_log
    from probes.models import JobState, LogFetch, SchedulerRecord
    from probes.slurm.cursors import decode_state, encode_state, fold_job

    record = SchedulerRecord(cluster="c", job_id="7", name="run", state=JobState.RUNNING,
                             stdout_path="/scratch/run.out")
    out: dict[str, dict[str, float]] = {}
    for name, data in logs().items():
        text = data.decode("utf-8", "replace")
        fetch = LogFetch(requested_path="/scratch/run.out", path="/scratch/run.out",
                         status="ok", text=text)

        def cold(text: str = text, fetch: LogFetch = fetch) -> object:
            return retain(fetch, parse_log(text))

        head, tail = split_tail(data)
        first_read = collected(data, 0, continued=False)

        def fold_cold(answer: dict[str, Any] = first_read) -> object:
            return fold_job(record, answer, None, aliases={}, benign_patterns=())

        _, state = fold_job(record, collected(head, 0, continued=False), None, aliases={},
                            benign_patterns=())
        assert state is not None
        stored = encode_state(state)
        assert stored is not None
        increment = collected(tail, len(head), continued=True)

        def warm(state: Any = state, answer: dict[str, Any] = increment) -> object:
            return fold_job(record, answer, state, aliases={}, benign_patterns=())

        def warm_json(stored: str = stored, answer: dict[str, Any] = increment) -> object:
            return fold_job(record, answer, decode_state(stored), aliases={},
                            benign_patterns=())

        out[name] = {
            "bytes": float(len(data)),
            "cold": median_us(cold),
            "first": median_us(lambda data=data: parse_increment(None, data)),
            "fold_cold": median_us(fold_cold),
            "warm": median_us(warm),
            "warm_json": median_us(warm_json),
        }
    return out


def run_tree(tree: Path) -> dict[str, dict[str, float]]:
    """``measure()`` in a fresh interpreter with ``tree`` first on ``sys.path``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, __file__, "--measure"], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)
    result: dict[str, dict[str, float]] = json.loads(done.stdout.splitlines()[-1])
    return result


def medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {log: {k: statistics.median(r[log][k] for r in runs) for k in runs[0][log]}
            for log in runs[0]}


FIGURES = ("cold", "first", "fold_cold", "warm", "warm_json")


def show(now: dict[str, dict[str, float]], before: dict[str, dict[str, float]] | None) -> None:
    for log, figures in now.items():
        print(f"{log} ({figures['bytes'] / 1024:.1f} KiB)")
        for key in FIGURES:
            after = figures[key]
            if before is None or log not in before:
                print(f"  {key:<10} {after:10.1f} us")
                continue
            was = before[log][key]
            print(f"  {key:<10} {was:10.1f} us -> {after:10.1f} us   {was / after:5.2f}x")
        first, cold = figures["first"], figures["cold"]
        print(f"  first fold / cold parse_log+retain: {first / cold:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", metavar="REV", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return 0
    if args.vs is None:
        show(medians([run_tree(ROOT) for _ in range(args.rounds)]), None)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_fold_") as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.vs],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        ours: list[dict[str, dict[str, float]]] = []
        theirs: list[dict[str, dict[str, float]]] = []
        for _ in range(args.rounds):  # A B A B: the two see the same machine load
            ours.append(run_tree(ROOT))
            theirs.append(run_tree(base))
        print(f"before: {args.vs}   after: this tree   (medians of {args.rounds} rounds each,"
              " run in turn; ratio = before / after)")
        show(medians(ours), medians(theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
