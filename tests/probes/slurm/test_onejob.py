"""One job in depth on the real SLURM 22.05 over SSH: that job only, in at most two commands.

The module submits one short array job (tasks 3-4) and one two-component hetjob under unique
names, waits until the array has run, and cancels both in its teardown (only its own ids). The
one-node test cluster never starts a hetjob (its components want nodes of their own), so the
hetjob is read pending: its records and paths, no log. Each
test counts the commands through a runner that records every argv and forwards it to the real
SSH runner. The TIMEOUT chain case lives in ``test_e2e`` (its --time=1 job takes a minute).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.models import ClusterFacts
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import CommandResult, SshRunner
from tests.probes.slurm.conftest import ROOT, SlurmEnv, fake_squeue_bin, run_with_path

ARRAY = "#!/bin/sh\nfor i in 1 2 3 4 5; do echo \"step $i task $SLURM_ARRAY_TASK_ID\"; done\n"
HET = ("#!/bin/sh\n#SBATCH hetjob\n"
       "for i in 1 2 3 4 5; do echo \"step $i het $SLURM_JOB_ID\"; done\n")


class CountingRunner:
    """The real SSH runner, with every argv it is asked to run recorded."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self._inner = SshRunner(cluster)
        self.calls: list[tuple[str, ...]] = []

    @property
    def target(self) -> str:
        return self._inner.target

    @property
    def commands_sent(self) -> int:
        return len(self.calls)

    @property
    def login_user(self) -> str:
        return self._inner.login_user

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self.calls.append(tuple(argv))
        return await self._inner.run(argv, stdin=stdin, check=check)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Jobs:
    env: SlurmEnv
    run_dir: str
    array: str
    het: str
    het_second: str
    """The hetjob's second component's own job id (squeue calls it ``<het>+1``)."""


async def _ssh(env: SlurmEnv, argv: list[str], stdin: str | None = None) -> str:
    runner = SshRunner(env.cluster())
    try:
        return (await runner.run(argv, stdin=stdin)).stdout
    finally:
        await runner.aclose()


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> tuple[str, str]:
    await _ssh(env, ["mkdir", "-p", run_dir])
    await _ssh(env, ["tee", f"{run_dir}/array.sh"], stdin=ARRAY)
    await _ssh(env, ["tee", f"{run_dir}/het.sh"], stdin=HET)
    array = await _ssh(env, ["sbatch", "--parsable", "-J", f"jt1-arr-{tag}", "--array=3-4",
                             "--chdir", run_dir, "-o", f"{run_dir}/a_%A_%a.out",
                             f"{run_dir}/array.sh"])
    het = await _ssh(env, ["sbatch", "--parsable", "-J", f"jt1-het-{tag}", "--chdir", run_dir,
                           "-o", f"{run_dir}/h_%j.out", f"{run_dir}/het.sh"])
    return array.strip().split(";")[0], het.strip().split(";")[0].split("+")[0]


async def _wait_done(env: SlurmEnv, array: str, het: str, bound_s: float) -> str:
    """Until the array's tasks have ended; returns the queue lines of the het job."""
    deadline = time.monotonic() + bound_s
    lines = ""
    while time.monotonic() < deadline:
        lines = await _ssh(env, ["squeue", "-h", "-t", "all", "-j", array, "-o", "%i %A %T"])
        if lines.strip() and not any(s in lines for s in ("PENDING", "RUNNING", "CONFIGURING",
                                                           "COMPLETING")):
            return await _ssh(env, ["squeue", "-h", "-t", "all", "-j", het, "-o", "%i %A %T"])
        await asyncio.sleep(2)
    pytest.fail(f"array {array} did not finish within {bound_s}s: {lines}")


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[Jobs]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/onejob-{tag}"
    ids: list[str] = []
    try:
        array, het = asyncio.run(_submit(slurm_env, run_dir, tag))
        ids = [array, het]
        lines = asyncio.run(_wait_done(slurm_env, array, het, bound_s=240))
        second = next(ln.split()[1] for ln in lines.splitlines() if ln.startswith(f"{het}+1 "))
        yield Jobs(slurm_env, run_dir, array, het, second)
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def _collect(env: SlurmEnv, job_id: str) -> tuple[ClusterFacts, CountingRunner]:
    runners: list[CountingRunner] = []

    def factory(cluster: SlurmCluster) -> CountingRunner:
        runners.append(CountingRunner(cluster))
        return runners[-1]

    facts = asyncio.run(SlurmProbe(env.cluster(), runner_factory=factory).collect_one(job_id))
    (runner,) = runners
    return facts, runner


def test_array_task_is_that_task_in_two_commands(jobs: Jobs) -> None:
    """`A_4` is task 4 (its own log), read by at most two collector runs."""
    facts, runner = _collect(jobs.env, f"{jobs.array}_4")
    assert facts.status == "ok"
    job = facts.jobs[0]
    assert job.record.job_id == f"{jobs.array}_4"
    assert job.log is not None and job.log.status == "ok"
    assert job.log.path == f"{jobs.run_dir}/a_{jobs.array}_4.out"
    assert "step 5 task 4" in job.log.text and "task 3" not in job.log.text
    assert len(runner.calls) <= 2 and all(c == ("python3", "-I", "-") for c in runner.calls)
    assert facts.round_trips == len(runner.calls)


@pytest.mark.parametrize("component", [0, 1])
def test_hetjob_component_has_its_own_log_path(jobs: Jobs, component: int) -> None:
    """`H+N` keeps squeue's id and gets its own StdOut (``%j`` is the component's job id);
    pending, it has no files to read: one command."""
    facts, runner = _collect(jobs.env, f"{jobs.het}+{component}")
    (job,) = facts.jobs
    own = jobs.het if component == 0 else jobs.het_second
    assert job.record.job_id == f"{jobs.het}+{component}"
    assert job.record.stdout_path == f"{jobs.run_dir}/h_{own}.out"
    assert job.record.name.startswith("jt1-het-") and job.log is None
    assert runner.calls == [("python3", "-I", "-")]


def test_a_sweep_names_hetjob_components_as_job_does(jobs: Jobs) -> None:
    """The whole sweep (``squeue --json``, whose components are separate job objects with
    ``het_job_id``/``het_job_offset``) lists ``H+0`` and ``H+1``, the ids ``jobtables job``
    takes and squeue prints, each with its own StdOut; they were listed as their own job ids
    (``H`` and the second's id), which ``job`` then did not find."""
    facts = asyncio.run(SlurmProbe(jobs.env.cluster()).collect())
    assert facts.status == "ok"
    mine = {j.record.job_id: j.record for j in facts.jobs
            if j.record.name.startswith("jt1-het-") and jobs.run_dir in (j.record.workdir or "")}
    assert sorted(mine) == [f"{jobs.het}+0", f"{jobs.het}+1"]
    assert mine[f"{jobs.het}+0"].stdout_path == f"{jobs.run_dir}/h_{jobs.het}.out"
    assert mine[f"{jobs.het}+1"].stdout_path == f"{jobs.run_dir}/h_{jobs.het_second}.out"
    for component in (0, 1):
        one, _ = _collect(jobs.env, f"{jobs.het}+{component}")
        (job,) = one.jobs
        assert job.record.job_id == f"{jobs.het}+{component}"
        assert job.record.stdout_path == mine[job.record.job_id].stdout_path


def test_a_job_of_a_user_the_cluster_does_not_report_is_not_shown(jobs: Jobs) -> None:
    """A cluster configured for other ``users`` reports none of this user's jobs in a sweep,
    and `job ID` does not show one either (it did, log and all): not found, after the one
    command that found out whose it is, no file read."""
    runners: list[CountingRunner] = []

    def factory(cluster: SlurmCluster) -> CountingRunner:
        runners.append(CountingRunner(cluster))
        return runners[-1]

    others = jobs.env.cluster(users=("nobody-else",))
    facts = asyncio.run(SlurmProbe(others, runner_factory=factory).collect_one(
        f"{jobs.array}_4"))
    assert facts.status == "ok" and facts.jobs == ()
    assert runners[0].calls == [("python3", "-I", "-")]
    mine, _ = _collect(jobs.env, f"{jobs.array}_4")
    # The COMPLETED task, then its user's other jobs SLURM holds as records only (a planned
    # stop's successor may be among them, live or already ran: report.chain), no file read.
    assert mine.jobs[0].record.job_id == f"{jobs.array}_4"
    assert all(j.log is None and j.summary is None for j in mine.jobs[1:])


def test_a_job_slurm_does_not_know_costs_one_command(jobs: Jobs) -> None:
    """An id no queue holds is answered with no job after one collector run."""
    facts, runner = _collect(jobs.env, "99999999")
    assert facts.status == "ok" and facts.jobs == ()
    assert runner.calls == [("python3", "-I", "-")]


def test_cli_job_shows_the_array_task(jobs: Jobs, tmp_path: Path) -> None:
    """`jobtables job A_3 --format json` prints task 3, its log and no successor."""
    env = jobs.env
    config = env.config_toml(tmp_path)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "job", f"{jobs.array}_3",
                          "--format", "json", "--config", str(config)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    row = data.get("job", data)
    assert row["job_id"] == f"{jobs.array}_3"
    assert row["log_path"] == f"{jobs.run_dir}/a_{jobs.array}_3.out"
    assert row["successor"] is None


class LocalCollector:
    """Runs each argv here (the collector as on a login node) with a stand-in ``squeue``."""

    def __init__(self, first: Path) -> None:
        self.first = first
        self.calls: list[tuple[str, ...]] = []

    target = "local"
    login_user = "nobody"

    @property
    def commands_sent(self) -> int:
        return len(self.calls)

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self.calls.append(tuple(argv))
        return await run_with_path(tuple(argv), stdin or "", self.first)

    async def aclose(self) -> None:
        return None


def test_a_failing_squeue_is_an_unreachable_cluster_not_an_unknown_job(tmp_path: Path) -> None:
    """squeue that cannot reach slurmctld makes the cluster ``unreachable`` with its words,
    where an id squeue calls invalid is simply no job (above)."""
    bin_dir = fake_squeue_bin(tmp_path, "", error="slurm_load_jobs error: Unable to contact"
                                                  " slurm controller (connect failure)")
    runner = LocalCollector(bin_dir)
    probe = SlurmProbe(SlurmCluster(name="c", local=True), runner_factory=lambda _c: runner)
    facts = asyncio.run(probe.collect_one("4242"))
    assert facts.status == "unreachable"
    assert facts.detail is not None and "Unable to contact slurm controller" in facts.detail
    assert runner.calls == [("python3", "-I", "-")]


def test_parse_eligible_reads_squeue_format_columns() -> None:
    """``squeue -h -O JobID:64,EligibleTime:24`` with SLURM_TIME_FORMAT=%s (22.05's padding):
    id -> eligible time; a pending array's unsplit ``12_[0-3]`` and junk are skipped."""
    from datetime import UTC, datetime

    from probes.slurm.onejob import parse_eligible

    text = ("1520" + " " * 60 + "1796331586" + " " * 14 + "\n"
            "1528_1" + " " * 58 + "1796331520" + " " * 14 + "\n"
            "1529_[0-3]" + " " * 54 + "1796331520\n"
            "1530" + " " * 60 + "0\n"
            "garbage line\n")
    got = parse_eligible(text)
    assert got == {"1520": datetime.fromtimestamp(1796331586, tz=UTC),
                   "1528_1": datetime.fromtimestamp(1796331520, tz=UTC)}


@pytest.mark.parametrize(("state", "named"), [("RUNNING", True), ("TIMEOUT", False)])
def test_a_running_jobs_attempts_are_listed_by_its_name(
        tmp_path: Path, state: str, named: bool) -> None:
    """A RUNNING job's command 2 lists the user's jobs of its name only (its earlier attempts,
    for the first-launch rule): listing every job of the user cost ``jobtables job`` 0.50 ->
    0.60 s on the 500-job bench (2b25746). A TIMEOUT's successor query still lists them all
    (a restart may be renamed)."""
    from datetime import UTC, datetime

    from probes.models import JobState, SchedulerRecord
    from probes.slurm.onejob import job_files

    bin_dir = fake_squeue_bin(tmp_path, "{}")
    runner = LocalCollector(bin_dir)
    record = SchedulerRecord(cluster="c", job_id="4242", name="rl-verl-grpo", user="alice",
                             state=JobState(state), stdout_path=str(tmp_path / "x.out"))
    asyncio.run(job_files(runner, SlurmCluster(name="c", local=True), record,
                          datetime.now(UTC)))
    calls = (tmp_path / "squeue.calls").read_text().splitlines()
    listing = [c for c in calls if "-u alice" in c and " -O " not in c]
    assert len(listing) == 1, calls
    assert ("--name=rl-verl-grpo" in listing[0]) is named, listing
