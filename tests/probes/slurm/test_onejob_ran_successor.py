"""``jobtables job <TIMEOUT>``: a restart that already ran and ended is still its successor.

Replayed on the real SLURM as jtuser: 3130 -> 3131 -> 3132 chained ``afterany`` (one name and
workdir, ``--time=1`` each), all three TIMEOUT. The sweep names 3131 as 3130's restart, but
``jobtables job 3130`` asked for the user's PENDING/RUNNING jobs only and read 'Walltime
TIMEOUT; no successor queued', failed. A stand-in ``squeue`` answers as 22.05 does (``-j`` one
job, ``-u`` the user's, ``-t`` filtering states) through the real collector.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from probes.config import SlurmCluster
from report.judge import build_report
from report.settings import ReportSettings
from tests.probes.slurm.test_onejob import LocalCollector

T0 = 1796400000
# (%i, %u, %T, %r, %V, %S, %e, %l, %E, %M, %j, %Z, %o), then -O EligibleTime: a dependant
# released by its predecessor's end is eligible then (SLURM 22.05: job 390, queued afterany
# on 389 in the same second, eligible at 389's end + 1 s), not at its submission.
QUEUE = [
    ("3130", "jtuser", "TIMEOUT", "TimeLimit", str(T0), str(T0 + 10), str(T0 + 70), "1:00",
     "(null)", "1:00", "rl-lc-ch3", "/w/ch3", "/w/verl.sh", str(T0)),
    ("3131", "jtuser", "TIMEOUT", "TimeLimit", str(T0), str(T0 + 70), str(T0 + 130), "1:00",
     "(null)", "1:00", "rl-lc-ch3", "/w/ch3", "/w/verl.sh", str(T0 + 70)),
    ("3132", "jtuser", "COMPLETED", "None", str(T0), str(T0 + 130), str(T0 + 170), "1:00",
     "(null)", "0:40", "rl-lc-ch3", "/w/ch3", "/w/verl.sh", str(T0 + 130)),
]
STAND_IN = """\
import sys
args = sys.argv[1:]
def opt(name):
    return args[args.index(name) + 1] if name in args else None
states = opt("-t")
rows = [r for r in ROWS
        if (opt("-j") is None or r[0] == opt("-j")) and (opt("-u") is None or r[1] == opt("-u"))
        and (states in (None, "all") or r[2] in states.split(","))]
if "-O" in args:
    for r in rows:
        print(r[0].ljust(64) + r[13].ljust(24))
    sys.exit(0)
fmt = opt("-o")
codes = ("%i", "%u", "%T", "%r", "%V", "%S", "%e", "%l", "%E", "%M", "%j", "%Z", "%o")
for row in rows:
    out = fmt
    for code, value in zip(codes, row):
        out = out.replace(code, value)
    sys.stdout.write(out + "\\n")
"""


def _bin(tmp: Path) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (tmp / "squeue.py").write_text(f"ROWS = {QUEUE!r}\n" + STAND_IN)
    for name, body in (("squeue", f"exec {shlex.quote(sys.executable)} "
                                  f"{shlex.quote(str(tmp / 'squeue.py'))} \"$@\""),
                       ("scontrol", "exit 0"), ("sacct", "exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_job_names_a_restart_that_already_ran(tmp_path: Path) -> None:
    runner = LocalCollector(_bin(tmp_path))
    cluster = SlurmCluster(name="c", local=True, users=("jtuser",))
    from probes.slurm.probe import SlurmProbe

    facts = asyncio.run(SlurmProbe(cluster, runner_factory=lambda _c: runner)
                        .collect_one("3130"))
    assert facts.status == "ok", facts.detail
    now = datetime.fromtimestamp(T0 + 300, tz=UTC)
    report, _ = build_report([facts], settings=ReportSettings(), now=now)
    (row,) = [j for j in report.jobs if j.job_id == "3130"]
    assert row.successor == "3131" and row.verdict == "restarting"
