"""Benchmark: the incremental parse against the cold full parse (not a pytest test).

Run from the repo root:  PYTHONPATH=. .venv/bin/python tests/bench/bench_incremental.py [--mb 1]

On a log of ``--mb`` MiB in real trainer formats (SkyRL, verl and HF steps, ANSI colour, Ray
prefixes, ``\\r`` bars: ``bench_parse``'s blocks) it prints, each against ``parse_log`` of the
whole log measured in the same run (the floor):

1. ``parse_increment(None, whole)``: a bot's first read of a log;
2. the fold over the log in N chunks (the carry through JSON between each, as Redis holds it);
3. one warm sweep: one more training step appended to the long log, read as an increment with
   the carry loaded from and saved to JSON: the per-sweep cost against a cold re-read;
4. the carry's JSON size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import parse_log
from tests.bench.bench_parse import hf_block, skyrl_block, verl_line

__test__ = False


def training_log(mb: float, seed: int = 7) -> tuple[bytes, int]:
    """A log of about ``mb`` MiB and its step count."""
    rng = random.Random(seed)
    parts = ["***** Running training *****\n  Total optimization steps = 100,000\n"]
    size, step = 0, 0
    while size < mb * (1 << 20):
        step += 1
        block = skyrl_block(step, rng) + verl_line(step, rng) + hf_block(step, rng)
        parts.append(block)
        size += len(block)
    return "".join(parts).encode(), step


def best(run: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fold(data: bytes, chunks: int) -> LogCarry:
    size = -(-len(data) // chunks)
    carry = None
    for start in range(0, len(data), size):
        _, carry = parse_increment(carry, data[start : start + size])
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    assert carry is not None
    return carry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data, steps = training_log(args.mb)
    lines = data.count(b"\n")
    print(f"log: {len(data) / (1 << 20):.2f} MiB, {lines:,} lines, {steps:,} steps")

    cold = best(lambda: parse_log(data), args.repeat)
    print(f"floor  parse_log(whole)                    {cold * 1e3:9.1f} ms   1.00x")
    first = best(lambda: parse_increment(None, data), args.repeat)
    print(f"       parse_increment(None, whole)        {first * 1e3:9.1f} ms   {first / cold:.2f}x")
    for chunks in (10, 100, 1000):
        folded = best(lambda n=chunks: fold(data, n), max(1, args.repeat // 2))
        print(f"       fold in {chunks:>4} chunks (JSON carry)     {folded * 1e3:9.1f} ms   "
              f"{folded / cold:.2f}x")

    carry_json = fold(data, 10).model_dump_json()
    rng = random.Random(11)
    step = steps + 1
    increment = (skyrl_block(step, rng) + verl_line(step, rng) + hf_block(step, rng)).encode()

    def sweep() -> None:
        carry = LogCarry.model_validate_json(carry_json)
        _, after = parse_increment(carry, increment)
        after.model_dump_json()

    warm = best(sweep, args.repeat * 20)
    cold_after = best(lambda: parse_log(data + increment), args.repeat)
    print(f"warm sweep: one step ({len(increment):,} B) on the long log, JSON in and out "
          f"{warm * 1e3:8.2f} ms   {warm / cold_after:.4f}x of the cold re-read "
          f"({cold_after * 1e3:.1f} ms), {cold_after / warm:.0f}x faster")
    print(f"carry JSON: {len(carry_json):,} bytes ({len(carry_json) / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
