"""Benchmark: what the fingerprint and outcome readers add to parse_log (not a pytest test).

Run from the repo root:  PYTHONPATH=. .venv/bin/python tests/bench/bench_fingerprint.py

Builds 1 MiB and 4 MiB tails from the real fixtures (verl config dump + verl steps, TRL dicts
between tqdm redraws, SkyRL pprint step dicts), then prints the median time of parse_log on
each and of read_fingerprint/read_outcome alone on the same split lines (their share).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from probes.logs.fingerprint import read_fingerprint
from probes.logs.lines import split_lines
from probes.logs.outcome import read_outcome
from probes.logs.parse import parse_log

__test__ = False
FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _tail(mib: int) -> str:
    parts = [(FIX / "verl-0.9.1/config_a.log").read_text()]
    body = "".join((FIX / rel).read_text() for rel in (
        "verl-0.9.1/console.log", "trl-1.16.0/grpo_healthy.out", "skyrl-rebuilt/console_v03.log"))
    while sum(map(len, parts)) < mib * 1024 * 1024:
        parts.append(body)
    return "".join(parts)[: mib * 1024 * 1024]


def _median(fn: object, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    for mib in (1, 4):
        text = _tail(mib)
        _, lines = split_lines(text, 65536)
        whole = _median(lambda t=text: parse_log(t))
        extra = _median(lambda ls=lines: (read_fingerprint(ls), read_outcome(ls[-400:])))
        print(f"{mib} MiB tail: parse_log {whole * 1000:.0f} ms, of which fingerprint+outcome "
              f"{extra * 1000:.0f} ms ({extra / whole:.0%})")


if __name__ == "__main__":
    main()
