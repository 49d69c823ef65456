"""Benchmark: one log's parse on the CLI's cold path and the bot's fold, before and after.

Run from the repo root (no SLURM, no Redis: in process, on real text):

    PYTHONPATH=. .venv/bin/python tests/bench/bench_fold.py [--vs REV] [--rounds 5]

For each log (``bench_cli.hf_log(200)``, the sweep benches' 200-step HF Trainer log; a long
``disable_tqdm`` HF log whose 1 MiB tail is cut from it, read with its 256 KiB head as the
collector sends it (``CUT``), and the same with no banner, so that nothing can number its dicts
(``BARE``); and the recorded trainer logs under ``tests/fixtures``) it prints
the median microseconds of

- ``cold``: ``parse_log`` + ``excerpt.retain``, what ``assemble.job_facts`` costs a CLI sweep;
- ``first``: ``parse_increment(None, whole)``, a bot's first read of a log (its fold, no carry);
- ``fold_cold``: ``cursors.fold_job`` of that first read (the fold, retention, the state);
- ``warm``: ``cursors.fold_job`` of the log's last few lines appended to a live state (the bot
  keeps its states in memory between sweeps), i.e. one warm sweep of that job;
- ``warm_json``: the same with the state through its stored JSON first (a restarted bot).

With ``--vs REV`` a second worker process runs the same figures on a copy of the repository at
git revision ``REV`` (``git archive``, in a temporary directory); the two workers time each
figure in turn (A B A B ...), so both see the same machine load, and the two are printed side
by side with the median of the pairwise ratios (before / after). Each timing is the least of
three short repeats: other processes' load only ever adds time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.bench.bench_trees import Worker

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REAL = [
    "hf-transformers-5.24.0/sft_healthy.out", "trl-1.16.0/grpo_healthy.out",
    "trl-1.16.0/probe_healthy.out", "verl-0.4.1/console.log", "verl-0.9.1/console.log",
    "verl-0.9.1/config_a.log", "skyrl-rebuilt/console_v04.log", "megatron-rebuilt/args.log",
    "torch-2.13.0/childfailed.out",
]
APPENDED_LINES = 6
CUT = "cut tail + head: HF disable_tqdm, 20k steps"
BARE = "cut tail, no banner: HF disable_tqdm, 20k steps"
"""A log longer than the tail read: its last ``TAIL_BYTES`` are the text, its first
``HEAD_BYTES`` the head (a cut tail's banner is found there; 724baf8 once made that 10x dearer)."""
TAIL_BYTES = 1 << 20
HEAD_BYTES = 256 << 10
"""The warm sweep's increment: the log's last lines (3 HF steps: a bar redraw and a dict each)."""

__test__ = False


def cut_log(steps: int = 20_000, *, banner: bool = True) -> bytes:
    """An HF Trainer log with ``disable_tqdm``: a config dump, the banner (without it, none of
    the dicts' steps can be known from a cut tail), one dict a step."""
    config = "".join(f"  config_key_{i} = {i * 7919 % 104729}\n" for i in range(2_000))
    head = ("***** Running training *****\n  Num examples = 5,120,000\n  Num Epochs = 1\n"
            "  Instantaneous batch size per device = 32\n"
            "  Total train batch size (w. parallel, distributed & accumulation) = 256\n"
            f"  Gradient Accumulation steps = 1\n  Total optimization steps = {steps:,}\n"
            "  Number of trainable parameters = 494,032,768\n")
    body = "".join(
        f"{{'loss': '{2.0 - s / (steps * 2):.4g}', 'grad_norm': '{0.3 + (s % 7) / 50:.4g}', "
        f"'learning_rate': '{1e-5 * (1 - s / steps):.4g}', 'epoch': '{s / steps:.4g}'}}\n"
        for s in range(1, steps + 1))
    return (config + (head if banner else "") + body).encode()


def logs() -> dict[str, bytes]:
    from tests.bench.bench_cli import hf_log

    found = {"bench hf_log(200)": hf_log(200).encode(), CUT: cut_log(),
             BARE: cut_log(banner=False)}
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


def collected(text: bytes, offset: int, *, continued: bool,
              head: str | None = None) -> dict[str, Any]:
    """A collector's answer for one tracked read of ``text`` at byte ``offset`` (with the
    log's ``head`` when the read starts past its beginning)."""
    cursor = {"path": "/scratch/run.out", "dev": 1, "ino": 1, "offset": offset + len(text),
              "digest": "0" * 32}
    log = {"requested": "/scratch/run.out", "path": "/scratch/run.out", "status": "ok",
           "size": offset + len(text), "mtime": 1_790_000_000.0,
           "text": text.decode("utf-8", "replace"), "offset": offset, "cursor": cursor}
    if continued:
        log["continued"] = True
    if head is not None:
        log["head"] = head
    return {"log": log}


Run = Callable[[], object]


def figures() -> dict[str, dict[str, Run]]:
    """Per log, each figure's run (see the module docstring), with the code on ``sys.path``."""
    from probes.logs.excerpt import retain
    from probes.logs.incremental import parse_increment
    from probes.logs.parse import parse_log
    from probes.models import JobState, LogFetch, SchedulerRecord
    from probes.slurm.cursors import decode_state, encode_state, fold_job

    record = SchedulerRecord(cluster="c", job_id="7", name="run", state=JobState.RUNNING,
                             stdout_path="/scratch/run.out")

    def fold(answer: dict[str, Any], state: Any) -> Run:
        return lambda: fold_job(record, answer, state, aliases={}, benign_patterns=())

    out: dict[str, dict[str, Run]] = {}
    for name, whole in logs().items():
        # A cut log is read as the collector sends it: its last TAIL_BYTES, with its head.
        base = max(0, len(whole) - TAIL_BYTES) if name in (CUT, BARE) else 0
        cut_head = whole[:HEAD_BYTES].decode("utf-8", "replace") if base else None
        data = whole[base:]
        text = data.decode("utf-8", "replace")
        fetch = LogFetch(requested_path="/scratch/run.out", path="/scratch/run.out",
                         status="ok", text=text, offset=base)
        head, tail = split_tail(data)
        _, state = fold_job(record, collected(head, base, continued=False, head=cut_head),
                            None, aliases={}, benign_patterns=())
        assert state is not None
        stored = encode_state(state)
        assert stored is not None
        increment = collected(tail, base + len(head), continued=True)

        def cold(text: str = text, fetch: LogFetch = fetch, at_start: bool = not base,
                 cut_head: str | None = cut_head) -> object:
            return retain(fetch, parse_log(text, log_start=at_start, head=cut_head))

        def first(data: bytes = data, at_start: bool = not base,
                  cut_head: str | None = cut_head) -> object:
            return parse_increment(None, data, log_start=at_start, head=cut_head)

        def warm_json(stored: str = stored, answer: dict[str, Any] = increment) -> object:
            return fold_job(record, answer, decode_state(stored), aliases={},
                            benign_patterns=())

        out[name] = {"cold": cold, "first": first,
                     "fold_cold": fold(collected(data, base, continued=False, head=cut_head),
                                       None),
                     "warm": fold(increment, state), "warm_json": warm_json}
    return out


def serve() -> None:
    """A worker: reads ``log<TAB>figure`` lines, answers each with its time in microseconds."""
    runs = figures()
    print(json.dumps({name: len(data) for name, data in logs().items()}), flush=True)
    for line in sys.stdin:
        name, figure = line.rstrip("\n").split("\t")
        run = runs[name][figure]
        print(min(median_us(run, budget_s=0.05, least=3) for _ in range(3)), flush=True)


FIGURES = ("cold", "first", "fold_cold", "warm", "warm_json")


def compare(ours: Worker, theirs: Worker | None, rounds: int) -> None:
    """Each figure of each log timed ``rounds`` times by each worker in turn, printed as
    medians with the median of the pairwise ratios; and the first fold against the cold
    parse (target: within about 1.3x)."""
    for name, size in ours.info.items():
        print(f"{name} ({size / 1024:.1f} KiB)")
        medians: dict[str, float] = {}
        for figure in FIGURES:
            pairs = []
            for _ in range(rounds):
                after = ours.time(f"{name}\t{figure}")
                pairs.append((theirs.time(f"{name}\t{figure}") if theirs else after, after))
            after = medians[figure] = statistics.median(a for _, a in pairs)
            if theirs is None:
                print(f"  {figure:<10} {after:10.1f} us")
                continue
            before = statistics.median(b for b, _ in pairs)
            ratio = statistics.median(b / a for b, a in pairs)
            print(f"  {figure:<10} {before:10.1f} us -> {after:10.1f} us   {ratio:5.2f}x")
        print(f"  first fold / cold parse_log+retain: {medians['first'] / medians['cold']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", metavar="REV", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    sys.path.insert(0, str(ROOT))
    from tests.bench.bench_trees import Worker, tree_at  # here: a worker's tree may lack it

    ours = Worker(__file__, ROOT)
    if args.vs is None:
        compare(ours, None, args.rounds)
        ours.close()
        return 0
    with tree_at(args.vs, "bench_fold_") as base:
        theirs = Worker(__file__, base)
        print(f"before: {args.vs}   after: this tree   ({args.rounds} rounds, A B A B; each "
              "time the least of 3 repeats; medians; ratio = median of before / after)")
        try:
            compare(ours, theirs, args.rounds)
        finally:
            ours.close()
            theirs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
