"""End to end on the real SLURM 22.05 cluster over real SSH: real sbatch jobs writing real
trainer logs at a trainer's cadence, swept by SlurmProbe, judged by report.judge, and through
the `jobtables sweep` CLI.

All jobs are submitted at once by one module-scoped fixture (unique names per run) and
cancelled in its teardown. The --time=1 job would need 60-90 s to reach TIMEOUT: once the
early sweeps are done its end time is set to now (``end_now``), and the module waits for the
TIMEOUT slurmctld then gives it (within 30 s), with a bounded poll of `squeue --json`.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import secrets
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config
from bot.config_file import load_config
from bot.sweep import Sweeper
from probes.config import ReplayCluster, SlurmCluster
from probes.logs.parse import parse_log
from probes.models import ClusterFacts, JobFacts, JobState, SchedulerRecord
from probes.remote.script import COLLECTOR_ARGV
from probes.slurm.parse import parse_squeue_json
from probes.slurm.probe import SlurmProbe
from probes.slurm.recording import record
from probes.slurm.replay import ReplayProbe
from probes.slurm.runner import CommandResult, Runner
from probes.slurm.snapshot import Snapshot
from probes.slurm.transport import SshRunner, make_runner
from report.models import Report
from tests.probes.slurm.conftest import SlurmEnv, WalltimeChains
from tests.probes.slurm.forwarding import ForwardingRunner

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"
LOGS = {
    "rl_healthy": FIX / "trl-1.16.0" / "grpo_healthy.out",
    "rl_collapse": FIX / "skyrl-rebuilt" / "console_v03_collapse.log",
    "sft": FIX / "hf-transformers-5.24.0" / "sft_healthy.out",
    "crash": FIX / "torch-2.13.0" / "childfailed.out",
    "mismatch": FIX / "verl-0.9.1" / "console.log",
    "chain": FIX / "verl-0.4.1" / "console.log",
}
HARBOR = FIX / "harbor-0.26.0" / "jobs"

FEED = """#!/bin/bash
# feed FILE CHUNKS DELAY: print FILE in CHUNKS parts, DELAY s apart (a trainer's cadence)
f=$1; n=${2:-6}; d=${3:-0.5}
total=$(wc -l < "$f"); per=$(( total / n + 1 )); i=1
while [ "$i" -le "$total" ]; do
  sed -n "${i},$((i + per - 1))p" "$f"; i=$((i + per)); sleep "$d"
done
"""
SCRIPTS = {
    "rl_healthy": 'bash "$S/feed.sh" "$S/logs/rl_healthy" 6 0.5\nsleep 600\n',
    "rl_collapse": 'bash "$S/feed.sh" "$S/logs/rl_collapse" 6 0.5\nsleep 600\n',
    "sft": 'bash "$S/feed.sh" "$S/logs/sft" 6 0.5\nsleep 600\n',
    "crash": 'bash "$S/feed.sh" "$S/logs/crash" 3 0.5\nexit 1\n',
    # The scheduler's StdOut disappears; the trainer logs to train_<id>.out in the workdir.
    "mismatch": ('rm -f "$PWD/stdout_${SLURM_JOB_ID}.out"\n'
                 'exec >"$PWD/train_${SLURM_JOB_ID}.out" 2>&1\n'
                 'bash "$S/feed.sh" "$S/logs/mismatch" 6 0.5\nsleep 600\n'),
    "datagen": 'cp -r "$S/harbor" ./jobs\necho "datagen chunk done"\n',
    "eval": 'cp -r "$S/harbor" ./jobs\necho "eval running"\nsleep 600\n',
    "chain": 'bash "$S/feed.sh" "$S/logs/chain" 6 0.5\nsleep 600\n',
    "successor": 'echo "resuming chain"\nsleep 600\n',
}


@dataclass
class Run:
    """The submitted jobs and what the sweeps saw."""

    tag: str
    run_dir: str
    ids: dict[str, str]
    names: dict[str, str]
    early: ClusterFacts
    warm: ClusterFacts
    """The early sweep's probe, sweeping again at once (sacct's absence remembered)."""
    final: ClusterFacts
    trace: Trace
    """The final sweep's commands and separate collector runs."""
    report: Report
    cli: dict[str, Any]
    replay: ClusterFacts

    def job(self, key: str) -> JobFacts:
        return next(j for j in self.final.jobs if j.record.job_id == self.ids[key])

    def row(self, key: str, report: dict[str, Any] | None = None) -> dict[str, Any]:
        jobs = (report or self.report.model_dump(mode="json"))["jobs"]
        return next(j for j in jobs if j["job_id"] == self.ids[key])


class _TracedRunner(ForwardingRunner):
    """A real runner, each command's argv noted in ``argvs`` as it is sent."""

    def __init__(self, inner: Runner, argvs: list[tuple[str, ...]]) -> None:
        super().__init__(inner)
        self._argvs = argvs

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self._argvs.append(tuple(argv))
        return await super().run(argv, stdin=stdin, check=check)

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        self._argvs.append(tuple(argv))
        return await super().run_streaming(argv, stdin=stdin, on_chunk=on_chunk)


@dataclass
class Trace:
    """What one probe sent: every command's argv, and the job ids of each collector run made
    apart from the sweep's first (``complete_files``: jobs the first could not read)."""

    argvs: list[tuple[str, ...]]
    separate: list[set[str]]


class TracedProbe(SlurmProbe):
    """The real probe, its commands noted (:class:`Trace`)."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.trace = Trace([], [])
        super().__init__(cluster, runner_factory=lambda c, **kw: _TracedRunner(
            make_runner(c, **kw), self.trace.argvs))

    async def complete_files(self, runner: Runner, selected: Sequence[SchedulerRecord],
                             snap: Snapshot, offsets: Mapping[str, int] | None,
                             cursors: Mapping[str, Any] | None = None, **kw: Any,
                             ) -> dict[str, Any]:
        have = snap.collected or {}
        missing = {r.job_id for r in selected
                   if r.state is not JobState.PENDING and r.job_id not in have}
        if missing:
            self.trace.separate.append(missing)
        return await super().complete_files(runner, selected, snap, offsets, cursors, **kw)


def _stage_tar(tag: str) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        add("stage/feed.sh", FEED.encode(), 0o755)
        for key, path in LOGS.items():
            add(f"stage/logs/{key}", path.read_bytes())
        for key, body in SCRIPTS.items():
            add(f"stage/{key}.sbatch", f"#!/bin/bash\nS=$(dirname $PWD)/stage\n{body}".encode(),
                0o755)
            add(f"{key}/.keep", b"")
        for path in HARBOR.rglob("*"):
            if path.is_file():
                add(f"stage/harbor/{path.relative_to(HARBOR)}", path.read_bytes())
    return base64.b64encode(buf.getvalue()).decode()


_EXTRACT = ("import base64,io,sys,tarfile;"
            "tarfile.open(fileobj=io.BytesIO(base64.b64decode(sys.stdin.read()))).extractall(sys.argv[1])")


async def _submit(env: SlurmEnv, tag: str, run_dir: str) -> tuple[dict[str, str], dict[str, str]]:
    runner = SshRunner(env.cluster())
    ids: dict[str, str] = {}
    names = {
        "rl_healthy": f"rl-grpo-healthy-{tag}", "rl_collapse": f"rl-skyrl-collapse-{tag}",
        "sft": f"sft-qwen-{tag}", "crash": f"sft-crash-{tag}", "mismatch": f"rl-verl-{tag}",
        "datagen": f"datagen-tb-{tag}", "eval": f"eval-qwen-tb-{tag}",
        "chain": f"rl-chain-{tag}", "successor": f"rl-chain-{tag}",
    }
    try:
        await runner.run(["python3", "-c", _EXTRACT, run_dir], stdin=_stage_tar(tag))
        for key in SCRIPTS:
            workdir = f"{run_dir}/{'chain' if key == 'successor' else key}"
            argv = ["sbatch", "--parsable", "-J", names[key], "--chdir", workdir]
            if key == "mismatch":
                argv += ["-o", f"{workdir}/stdout_%j.out"]
            if key == "chain":
                argv += ["--time=1"]
            if key == "successor":
                argv += [f"--dependency=afterany:{ids['chain']}"]
            res = await runner.run([*argv, f"{run_dir}/stage/{key}.sbatch"])
            ids[key] = res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()
    return ids, names


async def _wait_for(env: SlurmEnv, ids: dict[str, str], want: dict[str, set[JobState]],
                    bound_s: float, settle_s: float) -> None:
    """Poll squeue --json until every wanted job is in one of its states (bounded)."""
    deadline = time.monotonic() + bound_s
    states: dict[str, JobState] = {}
    while time.monotonic() < deadline:
        runner = SshRunner(env.cluster())
        try:
            res = await runner.run(["squeue", "--json"])
        finally:
            await runner.aclose()
        records = parse_squeue_json(res.stdout, cluster="x", now=datetime.now(UTC))
        states = {r.job_id: r.state for r in records}
        if all(states.get(ids[k]) in ok for k, ok in want.items()):
            await asyncio.sleep(settle_s)
            return
        await asyncio.sleep(3)
    pytest.fail(f"jobs did not reach {want} within {bound_s}s: "
                f"{ {k: states.get(i) for k, i in ids.items()} }")


def end_now(job_ids: Sequence[str]) -> None:
    """Bring these running ``--time=1`` jobs' walltime TIMEOUT forward: their end time set to
    now (as root), slurmctld's own time-limit check ends them at its next pass (every 30 s
    here), state TIMEOUT, reason TimeLimit, TimeLimit still 1 minute, and their ``afterany``
    successors released as by any TIMEOUT. It would come 60-90 s after the start; the suite
    waited for it twice."""
    left, deadline = set(job_ids), time.monotonic() + 60
    while left and time.monotonic() < deadline:  # a job not started yet has no end to move
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", ",".join(left)],
                             capture_output=True, text=True, check=False, timeout=60).stdout
        for job_id, state in (line.split() for line in out.splitlines() if line.strip()):
            if state == "RUNNING":
                subprocess.run(["scontrol", "update", f"JobId={job_id}", "EndTime=now"],
                               capture_output=True, check=False, timeout=60)
            if state != "PENDING":
                left.discard(job_id)
        if left:
            time.sleep(0.5)


async def _cleanup(env: SlurmEnv, ids: dict[str, str], run_dir: str) -> None:
    runner = SshRunner(env.cluster())
    try:
        if ids:
            await runner.run(["scancel", *ids.values()], check=False)
        await runner.run(["rm", "-rf", "--", run_dir], check=False)
    finally:
        await runner.aclose()


def _config_toml(env: SlurmEnv, tmp: Path) -> Path:
    return env.config_toml(tmp, recent_hours=1, timeout_s=120, command_timeout_s=60)


def _cli_sweep(config: Path) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-m", "bot.cli", "sweep", "--format", "json",
                          "--config", str(config)], capture_output=True, text=True,
                         cwd=ROOT, timeout=240, check=False)
    assert run.returncode == 0, run.stderr
    data: dict[str, Any] = json.loads(run.stdout)
    return data


@pytest.fixture(scope="module")
def run(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
        request: pytest.FixtureRequest) -> Iterator[Run]:
    """Submit every job once, sweep early (chain still pending) and after the TIMEOUT."""
    chained: list[str] = []  # test_e2e_chains' predecessors: their TIMEOUT waits beside ours
    if any(item.path.name == "test_e2e_chains.py" for item in request.session.items):
        chains: WalltimeChains = request.getfixturevalue("walltime_chains")
        chained = [chains.ids[key] for key in ("ok_pred", "resume_pred", "moved_pred",
                                                "shared_pred")]
    tag = f"t{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/e2e-{tag}"
    tmp = tmp_path_factory.mktemp("e2e")
    ids: dict[str, str] = {}
    try:
        ids, names = asyncio.run(_submit(slurm_env, tag, run_dir))
        done = {JobState.COMPLETED, JobState.FAILED}
        running = {JobState.RUNNING}
        asyncio.run(_wait_for(slurm_env, ids, {
            "crash": done, "datagen": done, "rl_healthy": running, "mismatch": running,
            "chain": running, "successor": {JobState.PENDING},
        }, bound_s=120, settle_s=5))
        probe = SlurmProbe(slurm_env.cluster())
        early = asyncio.run(probe.collect())
        warm = asyncio.run(probe.collect())
        end_now([ids["chain"], *chained])
        asyncio.run(_wait_for(slurm_env, ids, {"chain": {JobState.TIMEOUT},
                                               "successor": running}, bound_s=200, settle_s=2))
        traced = TracedProbe(slurm_env.cluster())
        final = asyncio.run(traced.collect())
        config_path = _config_toml(slurm_env, tmp)
        config: Config = load_config(config_path)

        async def sweep() -> Report:
            sweeper = Sweeper(lambda: config)
            try:
                return (await sweeper.sweep()).report
            finally:
                await sweeper.aclose()

        report = asyncio.run(sweep())
        cli = _cli_sweep(config_path)
        dest = asyncio.run(record(slurm_env.cluster(), tmp / "recording"))
        replay = asyncio.run(ReplayProbe(ReplayCluster(name="local22", path=str(dest))).collect())
        yield Run(tag, run_dir, ids, names, early, warm, final, traced.trace, report, cli,
                  replay)
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))


def _last_step(path: Path) -> int:
    points = parse_log(path.read_text()).points
    assert points
    return points[-1].step


def _program(argv: tuple[str, ...]) -> str:
    return "collector" if argv == tuple(COLLECTOR_ARGV) else argv[0]


def test_sweep_is_ok_with_a_fixed_number_of_round_trips(run: Run) -> None:
    """Both sweeps are ok, and this module's jobs cost a fresh probe two round trips: the
    collector (squeue inside, every log read) and sacct (tried once: accounting disabled).

    The sweep reads every job of the SSH user, and the main suite, running beside this one,
    submits that user's jobs too: one whose log path only scontrol can give (a relative
    ``--output``, no workdir) costs the probe its documented extra commands, scontrol and a
    collector run for the jobs the first could not read. Those are counted apart: only a
    foreign job may be in such a run, and with no foreign job there is none."""
    assert run.early.status == "ok" and run.final.status == "ok"
    seen = {j.record.job_id for j in run.final.jobs}
    ours = set(run.ids.values())
    assert ours <= seen
    programs = [_program(argv) for argv in run.trace.argvs]
    assert len(programs) == run.final.round_trips
    assert sorted(programs[:2]) == ["collector", "sacct"]
    assert all(not (ids & ours) for ids in run.trace.separate)  # ours read in the one trip
    extra = programs[2:]
    if not seen - ours:
        assert extra == []
    assert extra.count("scontrol") <= 1
    # One separate run at most (retried once for the jobs it did not answer: run_collector).
    assert len(run.trace.separate) <= 1
    assert len(run.trace.separate) <= extra.count("collector") <= 2 * len(run.trace.separate)
    assert len(extra) == extra.count("scontrol") + extra.count("collector")


def test_warm_sweep_is_one_round_trip(run: Run) -> None:
    """A warm sweep is one command and reads the same jobs and logs as the one before it."""
    assert run.warm.status == "ok" and run.warm.round_trips == 1
    early = {j.record.job_id: j for j in run.early.jobs if j.record.job_id in run.ids.values()}
    warm = {j.record.job_id: j for j in run.warm.jobs if j.record.job_id in run.ids.values()}
    assert warm.keys() == early.keys() == set(run.ids.values())
    same = 0
    for job_id, job in early.items():
        again = warm[job_id]
        assert again.record.stdout_path == job.record.stdout_path
        if again.record.state is not job.record.state:
            continue  # the --time=1 chain job may reach TIMEOUT between the two sweeps
        same += 1
        assert (again.log.status if again.log else None) == (job.log.status if job.log else None)
    assert same >= len(early) - 1



@pytest.mark.parametrize(("key", "state"), [
    ("rl_healthy", JobState.RUNNING), ("rl_collapse", JobState.RUNNING),
    ("sft", JobState.RUNNING), ("crash", JobState.FAILED), ("mismatch", JobState.RUNNING),
    ("datagen", JobState.COMPLETED), ("eval", JobState.RUNNING), ("chain", JobState.TIMEOUT),
    ("successor", JobState.RUNNING),
])
def test_states(run: Run, key: str, state: JobState) -> None:
    """Every job's scheduler state is what the real cluster did."""
    assert run.job(key).record.state is state


@pytest.mark.parametrize("key", ["rl_healthy", "rl_collapse", "sft", "chain"])
def test_logs_read_at_stdout_with_every_step(run: Run, key: str) -> None:
    """The log at StdOut is read whole and parses to the fixture's last step."""
    job = run.job(key)
    assert job.log is not None and job.log.status == "ok"
    assert job.log.path == job.record.stdout_path
    assert job.summary is not None and job.summary.points
    assert job.summary.points[-1].step == _last_step(LOGS[key])


def test_log_path_mismatch_is_found_in_the_workdir(run: Run) -> None:
    """StdOut deleted, trainer logging to train_<id>.out: read that, status mismatch."""
    job = run.job("mismatch")
    job_id = run.ids["mismatch"]
    assert job.log is not None and job.log.status == "mismatch"
    assert job.log.requested_path == f"{run.run_dir}/mismatch/stdout_{job_id}.out"
    assert job.log.path == f"{run.run_dir}/mismatch/train_{job_id}.out"
    assert job.summary is not None and job.summary.points[-1].step == _last_step(LOGS["mismatch"])


def test_crash_exit_code_and_child_failed(run: Run) -> None:
    """exit 1 after a ChildFailedError block: exit code 1 and the child-failed fault."""
    job = run.job("crash")
    assert job.record.exit_code == 1
    assert job.summary is not None
    assert "child-failed" in {f.kind for f in job.summary.faults}


def test_timeout_record(run: Run) -> None:
    """The --time=1 job: 60 s limit, TIMEOUT, its successor running in the same workdir."""
    chain, succ = run.job("chain").record, run.job("successor").record
    assert chain.time_limit_s == 60 and chain.reason == "TimeLimit"
    assert (succ.name, succ.workdir) == (chain.name, chain.workdir)


def test_dependency_seen_while_pending(run: Run) -> None:
    """Before the TIMEOUT the successor is PENDING with depends_on naming the chain job."""
    succ = next(j for j in run.early.jobs if j.record.job_id == run.ids["successor"])
    assert succ.record.state is JobState.PENDING
    assert succ.record.depends_on == (run.ids["chain"],)
    assert succ.log is None  # a pending job has no log to fetch yet


@pytest.mark.parametrize("key", ["datagen", "eval"])
def test_harbor_trial_tree_in_the_workdir(run: Run, key: str) -> None:
    """The jobs/ tree copied into the workdir is read: every trial result.json."""
    job = run.job(key)
    assert job.trials is not None and job.trials.exists
    assert len(job.trials.trials) == sum(1 for _ in HARBOR.rglob("*/result.json")) - sum(
        1 for p in HARBOR.iterdir() if (p / "result.json").exists())


@pytest.mark.parametrize(("key", "bucket"), [
    ("rl_healthy", "rl"), ("rl_collapse", "rl"), ("sft", "sft"), ("crash", "sft"),
    ("mismatch", "rl"), ("datagen", "datagen"), ("eval", "eval"), ("chain", "rl"),
])
def test_report_buckets(run: Run, key: str, bucket: str) -> None:
    """The judged report puts every job in its bucket (sweeper and CLI agree)."""
    assert run.row(key)["bucket"] == bucket
    assert run.row(key, run.cli)["bucket"] == bucket


@pytest.mark.parametrize("report", ["sweeper", "cli"])
def test_report_flags(run: Run, report: str) -> None:
    """Flags from real jobs: mismatch, child-failed, collapse, chain-restart with successor."""
    source = run.cli if report == "cli" else None
    assert "log-path-mismatch" in run.row("mismatch", source)["flags"]
    crash = run.row("crash", source)
    assert "child-failed" in crash["flags"] and crash["verdict"] == "failed"
    assert "collapse" in run.row("rl_collapse", source)["flags"]
    chain = run.row("chain", source)
    assert "chain-restart" in chain["flags"] and chain["verdict"] == "restarting"
    assert chain["successor"] == run.ids["successor"]
    assert run.row("rl_healthy", source)["step"] == _last_step(LOGS["rl_healthy"])
    clusters = (run.cli if report == "cli" else run.report.model_dump(mode="json"))["clusters"]
    assert clusters[0]["status"] == "ok"


def test_recording_replays_the_same_jobs(run: Run) -> None:
    """`record` writes a replay directory that reads back the same jobs, states and logs."""
    live = {j.record.job_id: j for j in run.final.jobs if j.record.job_id in run.ids.values()}
    replayed = {j.record.job_id: j for j in run.replay.jobs}
    assert run.replay.status == "ok"
    for job_id, job in live.items():
        again = replayed[job_id]
        assert again.record.state is job.record.state
        assert (again.log.status if again.log else None) == (job.log.status if job.log else None)


def test_job_path_names_the_chain_successor_in_two_commands(
    run: Run, slurm_env: SlurmEnv,
) -> None:
    """`collect_one` of the TIMEOUT job: two collector runs, and the sweeper's one-job answer
    names its running successor (found among the job user's live jobs only)."""
    calls: list[tuple[str, ...]] = []

    def factory(cluster: SlurmCluster) -> SshRunner:
        runner = SshRunner(cluster)
        real = runner.run

        async def run_(argv: Any, **kw: Any) -> Any:
            calls.append(tuple(argv))
            return await real(argv, **kw)

        runner.run = run_  # type: ignore[method-assign]
        return runner

    probe = SlurmProbe(slurm_env.cluster(), runner_factory=factory)
    facts = asyncio.run(probe.collect_one(run.ids["chain"]))
    assert calls == [("python3", "-I", "-"), ("python3", "-I", "-")]
    assert facts.jobs[0].record.state is JobState.TIMEOUT
    assert run.ids["successor"] in {j.record.job_id for j in facts.jobs[1:]}
    config = Config(clusters=(slurm_env.cluster(name="local22", recent_hours=1),))

    async def one_job() -> dict[str, Any]:
        sweeper = Sweeper(lambda: config)
        try:
            detail = (await sweeper.job(None, run.ids["chain"])).find(None, run.ids["chain"])
        finally:
            await sweeper.aclose()
        return detail.report.model_dump(mode="json")

    row = asyncio.run(one_job())
    assert row["state"] == "TIMEOUT" and row["successor"] == run.ids["successor"]
    assert "chain-restart" in row["flags"]
