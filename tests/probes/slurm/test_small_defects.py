"""Small defects a user sees at once, on the real SLURM 22.05 (issue 15), and the eval stall
rule reading the collector's result.json mtimes through a real sweep (issue 8).

* A job held with ``--begin=now+12hours`` is PENDING with reason BeginTime: no elapsed time
  (``null``), its trend gives the reason and the expected start.
* The plain ``squeue -o`` path (a stand-in squeue that refuses ``--json`` as SLURM < 21.08
  does, the real scontrol behind it): a job logging to ``-o custom-%j.log`` is read at that
  StdOut (``ok``, not the ``slurm-%j.out`` guess), and every job id appears exactly once.
* Two running eval jobs with the same Harbor tree: one's result.json files were written just
  now, the other's two hours ago (mtime). Only the second is ``stall``: the rule reads the
  files' mtimes (the trials' ``finished_at`` are a day old in both, so a rule falling back to
  them would flag both).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config
from bot.sweep import Sweeper
from probes.config import SlurmCluster
from probes.models import ClusterFacts, JobState
from probes.slurm.probe import SlurmProbe
from report.judge import build_report
from report.models import Report
from report.settings import ReportSettings
from tests.probes.slurm.conftest import SlurmEnv

ROOT = Path(__file__).resolve().parents[3]
HARBOR = ROOT / "tests" / "fixtures" / "harbor-0.26.0" / "jobs" / "2026-11-30__10-00-00"
pytestmark = pytest.mark.slurm
OLD = timedelta(hours=2)


@dataclass
class Swept:
    ids: dict[str, str]
    dirs: dict[str, Path]
    report: Report
    ssh: ClusterFacts
    plain: ClusterFacts
    old_mtime: float
    swept_at: datetime

    def row(self, key: str) -> Any:
        (row,) = [j for j in self.report.jobs if j.job_id == self.ids[key]]
        return row


def _sbatch(env: SlurmEnv, key: str, tag: str, workdir: Path, *extra: str) -> str:
    script = workdir / "job.sh"
    script.write_text(f"#!/bin/bash\necho {key} step 1\nsleep 600\n")
    subprocess.run(["chown", "-R", f"{env.user}:", str(workdir)], check=True)
    run = subprocess.run(["sbatch", "--parsable", f"--uid={env.user}", "-J", f"{key}-{tag}",
                          "--chdir", str(workdir), "--time=10", *extra, str(script)],
                         capture_output=True, text=True, check=True, timeout=60)
    return run.stdout.strip()


def _old_squeue(tmp: Path) -> Path:
    real = shutil.which("squeue")
    assert real
    bin_dir = tmp / "old-slurm"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --json ] && "
        "{ echo \"squeue: unrecognized option '--json'\" >&2; exit 1; }; done\n"
        f"exec {real} \"$@\"\n")
    (bin_dir / "squeue").chmod(0o755)
    return bin_dir


def _wait(ids: dict[str, str], running: set[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(ids.values())],
                             capture_output=True, text=True, check=False).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(ids[k]) == "RUNNING" for k in running):
            time.sleep(2)
            return
        time.sleep(1)
    pytest.fail(f"jobs did not start: {ids}")


@pytest.fixture(scope="module")
def swept(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swept]:
    tag = f"d{secrets.token_hex(3)}"
    tmp = tmp_path_factory.mktemp("defects")
    base = Path(slurm_env.scratch) / f"defects-{tag}"
    dirs = {k: base / k for k in ("begin", "custom", "eval_fresh", "eval_old")}
    for path in dirs.values():
        path.mkdir(parents=True)
    for key in ("eval_fresh", "eval_old"):
        shutil.copytree(HARBOR, dirs[key] / "jobs", copy_function=shutil.copy)  # mtime: now
        # Still running: more trials to come, the job not finished (else it is a zombie).
        job = dirs[key] / "jobs" / "result.json"
        meta = json.loads(job.read_text())
        meta.update(n_total_trials=100, finished_at=None)
        job.write_text(json.dumps(meta))
    old_mtime = time.time() - OLD.total_seconds()
    for path in (dirs["eval_old"] / "jobs").rglob("result.json"):
        os.utime(path, (old_mtime, old_mtime))
    ids: dict[str, str] = {}
    try:
        ids["begin"] = _sbatch(slurm_env, "rl-begin", tag, dirs["begin"], "--begin=now+12hours")
        ids["custom"] = _sbatch(slurm_env, "rl-custom", tag, dirs["custom"],
                                "-o", f"{dirs['custom']}/custom-%j.log")
        ids["eval_fresh"] = _sbatch(slurm_env, "eval-fresh", tag, dirs["eval_fresh"])
        ids["eval_old"] = _sbatch(slurm_env, "eval-old", tag, dirs["eval_old"])
        _wait(ids, {"custom", "eval_fresh", "eval_old"})
        swept_at = datetime.now(UTC)
        cluster = slurm_env.cluster(recent_hours=1.0)

        async def sweep() -> Report:
            sweeper = Sweeper(lambda: Config(clusters=(cluster,)))
            try:
                return (await sweeper.sweep()).report
            finally:
                await sweeper.aclose()

        report = asyncio.run(sweep())
        ssh = asyncio.run(SlurmProbe(cluster).collect())
        local = SlurmCluster(name="plain", local=True, users=(slurm_env.user,),
                             recent_hours=1.0)
        old_path = os.environ["PATH"]
        os.environ["PATH"] = f"{_old_squeue(tmp)}{os.pathsep}{old_path}"
        try:
            plain = asyncio.run(SlurmProbe(local).collect())
        finally:
            os.environ["PATH"] = old_path
        yield Swept(ids, dirs, report, ssh, plain, old_mtime, swept_at)
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("sweep", ["ssh", "plain"])
def test_begin_job_has_no_elapsed_time(swept: Swept, sweep: str) -> None:
    """--begin=now+12hours: PENDING, BeginTime, elapsed null, start projected ~12 h ahead."""
    facts: ClusterFacts = getattr(swept, sweep)
    (job,) = [j for j in facts.jobs if j.record.job_id == swept.ids["begin"]]
    record = job.record
    assert (record.state, record.reason, record.elapsed_s) == (
        JobState.PENDING, "BeginTime", None)
    assert record.start_time is not None
    assert record.start_time > swept.swept_at + timedelta(hours=11)


def test_begin_job_row_shows_reason_and_expected_start(swept: Swept) -> None:
    """The report row: elapsed null, the trend says why it waits and when it should start."""
    row = swept.row("begin")
    assert row.elapsed_s is None
    assert "Pending (BeginTime), expected start" in row.trend


def test_plain_path_reads_the_real_stdout(swept: Swept) -> None:
    """squeue -o has no StdOut: scontrol's is used, so `-o custom-%j.log` reads `ok`."""
    (job,) = [j for j in swept.plain.jobs if j.record.job_id == swept.ids["custom"]]
    expected = f"{swept.dirs['custom']}/custom-{swept.ids['custom']}.log"
    assert job.record.stdout_path == expected
    assert job.log is not None and (job.log.status, job.log.path) == ("ok", expected)
    assert "rl-custom step 1" in job.log.text


def test_plain_path_lists_every_job_once(swept: Swept) -> None:
    """Every job id squeue knows appears exactly once, as on the JSON path."""
    plain = [j.record.job_id for j in swept.plain.jobs]
    ssh = {j.record.job_id for j in swept.ssh.jobs}
    assert len(plain) == len(set(plain)) and set(swept.ids.values()) <= set(plain)
    assert set(swept.ids.values()) <= ssh


def test_collector_sends_result_json_mtimes(swept: Swept) -> None:
    """The trials' newest result time is the files' mtime, not a day-old finished_at."""
    (old,) = [j for j in swept.ssh.jobs if j.record.job_id == swept.ids["eval_old"]]
    assert old.trials is not None and old.trials.newest_result_at is not None
    assert abs(old.trials.newest_result_at.timestamp() - swept.old_mtime) < 2


def test_eval_stall_rule_reads_the_mtimes(swept: Swept) -> None:
    """Result files two hours old, from before this job started (a resumed eval): no stall
    minutes in (the silence is this job's own, rulebook: a CURRENT window); the same facts
    judged 90 minutes later are a stall. Written just now: no stall (same finished_at)."""
    old, fresh = swept.row("eval_old"), swept.row("eval_fresh")
    assert "stall" not in old.flags and "stall" not in fresh.flags
    later, _ = build_report([swept.ssh], settings=ReportSettings(),
                            now=swept.swept_at + timedelta(minutes=90))
    (row,) = [j for j in later.jobs if j.job_id == swept.ids["eval_old"]]
    assert "stall" in row.flags and "since the job started" in row.trend
