"""``jobtables job ID`` reads the log of a job whose ``--output`` holds a backslash.

Replayed on the real SLURM 22.05 as jtuser: ``sbatch -o 'esc\\_%x_%j.out'`` (job 2675).
slurmstepd expands nothing in such a path and drops the backslash: the log is
``esc_%x_%j.out``. The sweep reads the raw pattern from squeue --json (8efbafa), but the one-job
path took scontrol's StdOut, which 22.05 prints expanded (``esc\\_sft-h5esc_2675.out``): the
healthy running job read 'No log found', ``log-missing``, verdict unknown. Stand-ins answer as
22.05 does (``squeue -o``, ``squeue -O`` printing the raw pattern, scontrol's expanded line)
through the real collector.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from probes.config import SlurmCluster
from probes.slurm.probe import SlurmProbe
from report.judge import build_report
from report.settings import ReportSettings
from tests.probes.slurm.test_onejob import LocalCollector

T0 = 1796400000
USER = pwd.getpwuid(os.getuid()).pw_name
"""The log must be the job's user's to be read (the collector's owner check)."""
STAND_IN = """\
import sys
args = sys.argv[1:]
if "-O" in args:
    fmt = args[args.index("-O") + 1]
    nonce = fmt.split("<F:")[1].split(">")[0]
    end = fmt.split(",STDOUT:0")[1]  # the record's end marker, printed as the format gives it
    sys.stdout.write(f"2675<F:{nonce}>{WORKDIR}/esc\\\\_%x_%j.out{end}\\n")
    sys.exit(0)
row = ("2675", USER, "RUNNING", "None", str(T0), str(T0 + 1), "0", "10:00", "(null)",
       "2:00", "sft-h5esc", WORKDIR, "(null)")
out = args[args.index("-o") + 1]
for code, value in zip(("%i", "%u", "%T", "%r", "%V", "%S", "%e", "%l", "%E", "%M", "%j",
                        "%Z", "%o"), row):
    out = out.replace(code, value)
sys.stdout.write(out + "\\n")
"""
SCONTROL = (
    "JobId=2675 JobName=sft-h5esc UserId={u}(1002) GroupId={u}(1002) MCS_label=N/A "
    "Priority=4294901536 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:02:00 TimeLimit=00:10:00 TimeMin=N/A NodeList=vm BatchHost=vm NumNodes=1 "
    "Command=(null) WorkDir={w} StdErr={w}/esc\\_sft-h5esc_2675.out StdIn=/dev/null "
    "StdOut={w}/esc\\_sft-h5esc_2675.out Power= ")
LOG = "".join(f'{{"loss": 1.2, "grad_norm": 0.5, "learning_rate": 1e-05, "epoch": 0.{i}}}\n'
              f"{i}/200 [00:10<00:20, 1.5s/it]\n" for i in range(1, 14))


def _bin(tmp: Path, workdir: Path) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (tmp / "squeue.py").write_text(f"T0 = {T0}\nWORKDIR = {str(workdir)!r}\nUSER = {USER!r}\n"
                                   + STAND_IN)
    (tmp / "scontrol.txt").write_text(SCONTROL.format(w=workdir, u=USER) + "\n")
    for name, body in (("squeue", f"exec {shlex.quote(sys.executable)} "
                                  f"{shlex.quote(str(tmp / 'squeue.py'))} \"$@\""),
                       ("scontrol", f"cat {shlex.quote(str(tmp / 'scontrol.txt'))}"),
                       ("sacct", "exit 1")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_job_reads_the_log_of_an_output_path_with_a_backslash(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    (workdir / "esc_%x_%j.out").write_text(LOG)
    runner = LocalCollector(_bin(tmp_path, workdir))
    cluster = SlurmCluster(name="c", local=True, users=(USER,))
    facts = asyncio.run(SlurmProbe(cluster, runner_factory=lambda _c: runner)
                        .collect_one("2675"))
    assert facts.status == "ok", facts.detail
    now = datetime.fromtimestamp(T0 + 120, tz=UTC)
    report, _ = build_report([facts], settings=ReportSettings(), now=now)
    (row,) = report.jobs
    assert row.log_path == f"{workdir}/esc_%x_%j.out"
    assert "log-missing" not in row.flags and row.step == 13
