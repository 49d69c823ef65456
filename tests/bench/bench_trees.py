"""What the in-process A/B benches share (``bench_fold.py --vs``, ``bench_judge.py --vs``): a
copy of the repository at a git revision, and a worker process timing figures on one tree.

A worker runs ``script --serve`` in a fresh interpreter with its tree first on ``sys.path``:
its first line of output is a JSON object (what it built, e.g. sizes), then it answers each
request line it reads with one number (the figure's time). Two workers asked in turn (A B A B)
see the same machine load; the bench prints medians and the median of the pairwise ratios.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

__test__ = False


@contextlib.contextmanager
def tree_at(rev: str, prefix: str) -> Iterator[Path]:
    """The repository's files at ``rev`` (``git archive``) in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


class Worker:
    """``script --serve`` in a fresh interpreter with ``tree`` first on ``sys.path``;
    :attr:`info` is its first line (JSON)."""

    def __init__(self, script: str, tree: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.process = subprocess.Popen(
            [sys.executable, script, "--serve"], env=env, cwd=tree, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdout is not None
        self.info: dict[str, Any] = json.loads(self.process.stdout.readline())

    def time(self, request: str) -> float:
        """The worker's answer (a number) to one request line."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(request + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()
