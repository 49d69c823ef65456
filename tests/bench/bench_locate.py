"""Benchmark: the collector finding logs whose StdOut is gone, in one busy directory (not a test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_locate.py [--jobs 1000] [--files 5000]

In a temporary directory: ``--files`` other jobs' logs (``train_<n>.out``) and, for
``--jobs`` jobs whose scheduler StdOut does not exist, half with their trainer's own log
there (``train_<id>.out``: found, ``mismatch``) and half with none (``missing``). Times one
in-process ``collector.collect`` of those jobs (what one sweep's collector does on the login
node) beside the floor, one listing of the directory and one ``stat`` of every job's StdOut,
and prints the ratio. Before this bench each job matched its own regex against every name in
the directory: O(jobs x files).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from probes.remote import collector  # noqa: E402
from probes.remote.tree import SEEN  # noqa: E402

__test__ = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.files):
            Path(tmp, f"train_{900000 + n}.out").write_text("x\n")
        ids = [str(100000 + n) for n in range(args.jobs)]
        for job_id in ids[::2]:
            Path(tmp, f"train_{job_id}.out").write_text("step 1\n")
        user = getpass.getuser()
        specs = [{"id": i, "user": user, "stdout": f"{tmp}/gone_{i}.out", "workdir": tmp,
                  "checkpoint_roots": [], "trial_roots": []} for i in ids]
        request = {"tail_bytes": 4096, "min_lines": 1, "jobs": specs}
        walls, floors = [], []
        for _ in range(args.rounds):
            SEEN.clear()
            start = time.perf_counter()
            answer = collector.collect(request)
            walls.append(time.perf_counter() - start)
            start = time.perf_counter()
            os.listdir(tmp)
            for spec in specs:
                with contextlib.suppress(FileNotFoundError):
                    os.stat(spec["stdout"])
            floors.append(time.perf_counter() - start)
        found = sum(1 for j in answer["jobs"].values() if j["log"]["status"] == "mismatch")
        wall, floor = min(walls), min(floors)
        print(f"{args.jobs} jobs without StdOut in a directory of {args.files + args.jobs // 2}"
              f" files: collect {wall * 1e3:.1f} ms, floor {floor * 1e3:.1f} ms ="
              f" {wall / floor:.1f}x; {found} logs found (mismatch)")


if __name__ == "__main__":
    main()
