"""``jobtables job <array id>``: the task read in the array's place is a running one.

squeue ``-j 1528`` of an array with a task limit (``--array=3-9%2``) prints the pending
remainder first (``1528_[5-9%2]``), then the running tasks, highest first, as SLURM 22.05 did
on the test cluster. A stand-in ``squeue`` prints those three records in that order through the
real collector (argv, no shell), ``scontrol`` knows nothing more.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

from probes.config import SlurmCluster
from probes.models import JobState
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.test_onejob import LocalCollector

# (%i, %u, %T, %r, %V, %S, %e, %l, %E, %M, %j, %Z, %o) as squeue printed them for 1528.
QUEUE = [
    ("1528_[5-9%2]", "jtuser", "PENDING", "JobArrayTaskLimit", "1796400000", "0", "0",
     "UNLIMITED", "(null)", "0:00", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
    ("1528_4", "jtuser", "RUNNING", "None", "1796400000", "1796400005", "0", "UNLIMITED",
     "(null)", "1:02", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
    ("1528_3", "jtuser", "RUNNING", "None", "1796400000", "1796400005", "0", "UNLIMITED",
     "(null)", "1:02", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
]
STAND_IN = """\
import sys
args = sys.argv[1:]
if "-O" in args:
    sys.exit(0)
fmt = args[args.index("-o") + 1]
codes = ("%i", "%u", "%T", "%r", "%V", "%S", "%e", "%l", "%E", "%M", "%j", "%Z", "%o")
for row in ROWS:
    out = fmt
    for code, value in zip(codes, row):
        out = out.replace(code, value)
    sys.stdout.write(out + "\\n")
"""


def _bin(tmp: Path, rows: list[tuple[str, ...]] = QUEUE) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (tmp / "squeue.py").write_text(f"ROWS = {rows!r}\n" + STAND_IN)
    for name, body in (("squeue", f"exec {shlex.quote(sys.executable)} "
                                  f"{shlex.quote(str(tmp / 'squeue.py'))} \"$@\""),
                       ("scontrol", "exit 0"), ("sacct", "exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_an_arrays_own_id_reads_a_running_task_not_the_pending_remainder(
        tmp_path: Path) -> None:
    """``1528`` reads 1528_3 (running, lowest index), not ``1528_[5-9%2]`` (squeue's first)."""
    runner = LocalCollector(_bin(tmp_path))
    cluster = SlurmCluster(name="c", local=True, users=("jtuser",))
    probe = SlurmProbe(cluster, runner_factory=lambda _c: runner)
    facts = asyncio.run(probe.collect_one("1528"))
    assert facts.status == "ok", facts.detail
    job = facts.jobs[0].record
    assert (job.job_id, job.state) == ("1528_3", JobState.RUNNING)


# The same array later: tasks 3 and 4 done (squeue -t all keeps them for MinJobAge), the rest
# held (``scontrol hold``) or waiting for a node, none running.
QUEUE_BETWEEN = [
    ("1528_[5-9%2]", "jtuser", "PENDING", "JobHeldUser", "1796400000", "0", "0",
     "UNLIMITED", "(null)", "0:00", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
    ("1528_4", "jtuser", "COMPLETED", "None", "1796400000", "1796400005", "1796400065",
     "UNLIMITED", "(null)", "1:00", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
    ("1528_3", "jtuser", "COMPLETED", "None", "1796400000", "1796400005", "1796400065",
     "UNLIMITED", "(null)", "1:00", "rl-lc-arr", "/w/arr", "/w/verl.sh"),
]


def test_an_array_with_tasks_left_is_not_read_as_a_finished_task(tmp_path: Path) -> None:
    """``1528`` with tasks still pending and none running reads the pending remainder, not a
    COMPLETED task (which would say the array is done and route it to cleanup)."""
    runner = LocalCollector(_bin(tmp_path, QUEUE_BETWEEN))
    cluster = SlurmCluster(name="c", local=True, users=("jtuser",))
    probe = SlurmProbe(cluster, runner_factory=lambda _c: runner)
    facts = asyncio.run(probe.collect_one("1528"))
    assert facts.status == "ok", facts.detail
    job = facts.jobs[0].record
    assert job.state is JobState.PENDING, (job.job_id, job.state)
