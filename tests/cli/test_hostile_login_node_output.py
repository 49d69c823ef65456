"""``jobtables sweep`` of a login node whose collector prints without end: the cluster is
reported unreachable with the reason, the sweep exits 0, in bounded memory
(``probes.slurm.runner.output_limit``; the runners' own tests are
``tests/probes/slurm/test_output_limit.py``). Before, the sweep grew until the memory ran out
(3.8 GB in 27 s, then killed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LIMIT = 1 << 20


def test_a_sweep_of_a_login_node_answering_without_end_reports_it(tmp_path: Path) -> None:
    """Through the CLI: ``jobtables sweep`` of a ``local`` cluster whose collector prints
    without end exits 0 with the cluster unreachable and the reason, in bounded memory."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nexec cat /dev/zero\n")
    (fake / "python3").chmod(0o755)
    config = tmp_path / "jobtables.toml"
    config.write_text('[[clusters]]\nname = "hostile"\nkind = "slurm"\nlocal = true\n'
                      f"max_output_bytes = {LIMIT}\nanswer_budget_bytes = {LIMIT // 4}\n")
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    # A 2 GiB address-space bound: without the fix the sweep dies (SIGSEGV/MemoryError).
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    done = subprocess.run(
        [sys.executable, "-c", limit + "from bot.cli import launch; launch()", "sweep",
         "--config", str(config), "--format", "json"],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (cluster,) = json.loads(done.stdout)["clusters"]
    assert cluster["status"] == "unreachable"
    assert "printed more than 1048576 bytes" in cluster["detail"]
