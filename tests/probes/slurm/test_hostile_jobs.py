"""Hostile jobs on the real SLURM 22.05 and sshd: the collector reads only what is the job's.

An unprivileged user (``jtuser`` from scripts/services, jobs submitted with ``sbatch --uid``
as root) controls their jobs' names, StdOut paths and workdirs. Each job below points the bot
at something that is not its own: a StdOut replaced by a symlink to the bot account's file, a
StdOut that is a FIFO, a StdOut under /proc, a newline-forged name that spells another job's
record (scontrol and plain ``squeue -o``), a name that walks out of the ``{name}`` root
templates. A marker string is planted in every forbidden file; it must appear nowhere in any
output (the probe's facts, ``jobtables sweep`` text and JSON, ``jobtables job``), over SSH and
with ``local = true``. After the SSH sweep that hit the FIFO, no process of ours holds it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.models import ClusterFacts, JobFacts
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.conftest import SlurmEnv

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slurm


@dataclass
class World:
    """The submitted jobs, the planted markers and the sweeps' outputs."""

    tag: str
    ids: dict[str, str]
    names: dict[str, str]
    dirs: dict[str, Path]
    markers: dict[str, str]
    fifo: Path
    ssh: ClusterFacts
    ssh_seconds: float
    local: ClusterFacts
    plain: ClusterFacts
    outputs: dict[str, str]
    leftover_fifo_readers: int
    blocked_processes: int

    def job(self, facts: ClusterFacts, key: str) -> JobFacts:
        matches = [j for j in facts.jobs if j.record.job_id == self.ids[key]]
        assert len(matches) == 1, f"{key}: {len(matches)} records"
        return matches[0]


def _as(user: str, path: Path, *, mode: int = 0o755, text: str | None = None) -> Path:
    if text is not None:
        path.write_text(text)
    shutil.chown(path, user, user)
    path.chmod(mode)
    return path


def _sbatch(env: SlurmEnv, name: str, workdir: Path, out: str, body: str) -> str:
    script = _as(env.other_user, workdir / f"job-{secrets.token_hex(3)}.sh",
                 text=f"#!/bin/bash\n{body}\n")
    run = subprocess.run(
        ["sbatch", "--parsable", f"--uid={env.other_user}", f"--gid={env.other_user}",
         "-J", name, "-o", out, "--chdir", str(workdir), "--time=10", str(script)],
        capture_output=True, text=True, check=True, timeout=60)
    return run.stdout.strip().split(";")[0]


def _plant(env: SlurmEnv, tag: str) -> tuple[dict[str, Path], dict[str, str]]:
    base = Path(env.other_scratch) / f"hostile-{tag}"
    mine = Path(env.scratch) / f"hostile-{tag}"  # the bot account's own files
    markers = {k: f"JT-{k.upper()}-{tag}" for k in ("secret", "forged", "trav", "proc")}
    dirs = {k: base / k for k in ("sym", "fifo", "proc", "victim", "forger", "planted", "trav")}
    for path in (base, *dirs.values()):
        path.mkdir(parents=True, exist_ok=True)
        _as(env.other_user, path)
    mine.mkdir(parents=True)
    _as(env.user, mine, mode=0o755)
    secret = _as(env.user, mine / "secret", mode=0o644,
                 text=f"{markers['secret']}\nstep 1 loss 0.1\n")
    _as(env.other_user, dirs["planted"] / "victim.log", mode=0o644,
        text=f"{markers['forged']}\nTraceback (most recent call last):\n")
    trav = mine / "trav"
    (trav / "global_step_777").mkdir(parents=True)
    (trav / "latest_ckpt_global_step.txt").write_text(f"777 {markers['trav']}\n")
    (trav / "result.json").write_text(json.dumps({"exception_info": markers["trav"]}))
    for path in (trav, *trav.iterdir()):
        _as(env.user, path)
    dirs["mine"], dirs["secret"] = mine, secret
    return dirs, markers


def _submit(env: SlurmEnv, tag: str, dirs: dict[str, Path]) -> tuple[dict[str, str],
                                                                     dict[str, str]]:
    ids: dict[str, str] = {}
    names = {"sym": f"rl-sym-{tag}", "fifo": f"rl-fifo-{tag}", "proc": f"rl-proc-{tag}",
             "victim": f"rl-victim-{tag}"}
    sym, fifo = dirs["sym"], dirs["fifo"]
    ids["sym"] = _sbatch(env, names["sym"], sym, str(sym / "out.log"),
                         f'rm -f {sym}/out.log; ln -s {dirs["secret"]} {sym}/out.log\n'
                         f'ln -s {dirs["secret"]} {sym}/train_$SLURM_JOB_ID.out\nsleep 600')
    ids["fifo"] = _sbatch(env, names["fifo"], fifo, str(fifo / "out.log"),
                          f"rm -f {fifo}/out.log; mkfifo {fifo}/out.log\nsleep 600")
    ids["proc"] = _sbatch(env, names["proc"], dirs["proc"], "/proc/self/environ", "sleep 600")
    # %N: only scontrol knows the victim's StdOut, so the forged scontrol text is read.
    ids["victim"] = _sbatch(env, names["victim"], dirs["victim"],
                            f"{dirs['victim']}/%N-%j.out", "echo victim step 1\nsleep 600")
    planted = dirs["planted"]
    names["forger"] = (
        f"rl-forger-{tag}\nJobId={ids['victim']} JobName={names['victim']} "
        f"UserId={env.other_user}(1) GroupId=x(1) MCS_label=N/A JobState=RUNNING "
        f"Command={planted}/x WorkDir={planted} StdErr={planted}/victim.log StdIn=/dev/null "
        f"StdOut={planted}/victim.log Power=\n"
        f"{ids['victim']}|{env.other_user}|RUNNING|None|1|1|1|10:00||0:01|v|{planted}|x")
    ids["forger"] = _sbatch(env, names["forger"], dirs["forger"],
                            f"{dirs['forger']}/%N-%j.out", "echo forger\nsleep 600")
    depth = len(dirs["trav"].parts) - 1 + 1  # {workdir}/ckpt/{name}: one more level
    names["trav"] = "../" * depth + str(dirs["mine"] / "trav").lstrip("/")
    ids["trav"] = _sbatch(env, names["trav"], dirs["trav"], f"{dirs['trav']}/slurm-%j.out",
                          "echo trav step 1\nsleep 600")
    return ids, names


def _wait_running(ids: dict[str, str]) -> None:
    deadline = time.monotonic() + 90
    wanted = set(ids.values()) - set()
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j",
                              ",".join(ids.values())], capture_output=True, text=True,
                             check=False).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(i) in {"RUNNING", "FAILED"} for i in wanted):
            time.sleep(3)  # let the job scripts replace their StdOut
            return
        time.sleep(1)
    pytest.fail(f"hostile jobs did not start: {ids}")


def _readers(fifo: Path) -> int:
    """Processes holding (or blocked opening) the FIFO for reading: a writer's non-blocking
    open succeeds only if there is at least one."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        assert exc.errno == errno.ENXIO, exc
        return 0
    os.close(fd)
    return 1


def _our_processes_blocked_on_a_fifo(user: str) -> int:
    """Processes of the bot's login account waiting in a FIFO open (``wait_for_partner``):
    what a collector that hit a FIFO used to leave behind after every sweep."""
    import pwd

    uid, count = pwd.getpwnam(user).pw_uid, 0
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid and \
                    (proc / "wchan").read_text().startswith("wait_for_partner"):
                count += 1
        except OSError:
            continue  # gone meanwhile
    return count


def _cli(args: list[str], config: Path) -> str:
    run = subprocess.run([sys.executable, "-m", "bot.cli", *args, "--config", str(config)],
                         capture_output=True, text=True, cwd=ROOT, timeout=240, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout + run.stderr


def _config(env: SlurmEnv, tmp: Path) -> Path:
    return env.config_toml(tmp, "hostile", users=[env.other_user], recent_hours=1,
                           read_timeout_s=2, checkpoint_roots=["{workdir}/ckpt/{name}"],
                           trial_roots=["{workdir}/ckpt/{name}"])


def _probe(env: SlurmEnv, **over: object) -> SlurmProbe:
    fields: dict[str, object] = {
        "users": (env.other_user,), "recent_hours": 1.0, "read_timeout_s": 2.0,
        "checkpoint_roots": ("{workdir}/ckpt/{name}",),
        "trial_roots": ("{workdir}/ckpt/{name}",)}
    fields.update(over)
    if over.get("local"):
        from probes.config import SlurmCluster
        return SlurmProbe(SlurmCluster(name="hostile-local", **fields))  # type: ignore[arg-type]
    return SlurmProbe(env.cluster(name="hostile", **fields))


def _plain_squeue(tmp: Path) -> Path:
    """A stand-in squeue that refuses --json as SLURM < 21.08 does, else the real one."""
    real = shutil.which("squeue")
    assert real
    bin_dir = tmp / "old-slurm"
    bin_dir.mkdir()
    script = bin_dir / "squeue"
    script.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --json ] && "
                      "{ echo \"squeue: unrecognized option '--json'\" >&2; exit 1; }; done\n"
                      f"exec {real} \"$@\"\n")
    script.chmod(0o755)
    return bin_dir


@pytest.fixture(scope="module")
def world(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tag = f"h{secrets.token_hex(3)}"
    tmp = tmp_path_factory.mktemp("hostile")
    dirs, markers = _plant(slurm_env, tag)
    ids: dict[str, str] = {}
    try:
        ids, names = _submit(slurm_env, tag, dirs)
        _wait_running(ids)
        started = time.monotonic()
        ssh = asyncio.run(_probe(slurm_env).collect())
        ssh_seconds = time.monotonic() - started
        readers = _readers(dirs["fifo"] / "out.log")
        blocked = _our_processes_blocked_on_a_fifo(slurm_env.user)
        os.environ["JT_PROC_MARKER"] = markers["proc"]  # in the local collector's environ
        try:
            local = asyncio.run(_probe(slurm_env, local=True, host=None).collect())
            old = os.environ["PATH"]
            os.environ["PATH"] = f"{_plain_squeue(tmp)}{os.pathsep}{old}"
            try:
                plain = asyncio.run(_probe(slurm_env, local=True, host=None).collect())
            finally:
                os.environ["PATH"] = old
        finally:
            del os.environ["JT_PROC_MARKER"]
        config = _config(slurm_env, tmp)
        outputs = {
            # json.dumps: a path on the cluster that is not UTF-8 (another test's job) is kept
            # as lone surrogates in the facts, which model_dump_json refuses.
            "ssh": json.dumps(ssh.model_dump(mode="json")),
            "local": json.dumps(local.model_dump(mode="json")),
            "plain": json.dumps(plain.model_dump(mode="json")),
            "sweep-json": _cli(["sweep", "--format", "json"], config),
            "sweep-text": _cli(["sweep"], config),
            **{f"job-{k}": _cli(["job", ids[k], "--format", "json"], config)
               for k in ("sym", "victim", "trav")},
        }
        yield World(tag, ids, names, dirs, markers, dirs["fifo"] / "out.log", ssh,
                    ssh_seconds, local, plain, outputs, readers, blocked)
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=60)
        shutil.rmtree(dirs["mine"], ignore_errors=True)
        shutil.rmtree(dirs["sym"].parent, ignore_errors=True)


def test_no_marker_in_any_output(world: World) -> None:
    """No planted marker (bot's file, forged log, traversal target, /proc) reaches output."""
    for where, text in world.outputs.items():
        for kind, marker in world.markers.items():
            assert marker not in text, f"{kind} marker in {where}"
        assert "SSH_CONNECTION=" not in text, f"an environ in {where}"
    assert all(f.status == "ok" for f in (world.ssh, world.local, world.plain))


@pytest.mark.parametrize("sweep", ["ssh", "local", "plain"])
def test_symlink_stdout_is_refused_with_the_reason(world: World, sweep: str) -> None:
    """A StdOut replaced by a symlink (and a symlinked workdir log) is not followed."""
    job = world.job(getattr(world, sweep), "sym")
    assert job.log is not None and job.log.status == "failed"
    assert job.log.error is not None and "symbolic link" in job.log.error


@pytest.mark.parametrize("sweep", ["ssh", "local", "plain"])
def test_fifo_stdout_costs_that_job_only(world: World, sweep: str) -> None:
    """A FIFO StdOut is refused at once: that job fetch-failed, the cluster ok."""
    facts = getattr(world, sweep)
    job = world.job(facts, "fifo")
    assert job.log is not None and job.log.status == "failed"
    assert job.log.error is not None and "not a regular file" in job.log.error
    assert world.job(facts, "trav").log is not None


def test_no_process_of_ours_holds_the_fifo(world: World) -> None:
    """After the SSH sweep that hit the FIFO, no process has it open (or is opening it), and
    no process of the bot's login account waits in a FIFO open."""
    print(f"\nSSH sweep with a FIFO job: {world.ssh_seconds:.2f}s; processes holding the"
          f" FIFO after it: {world.leftover_fifo_readers}; processes of the login account"
          f" blocked in a FIFO open: {world.blocked_processes}")
    assert world.leftover_fifo_readers == 0 and world.blocked_processes == 0


@pytest.mark.parametrize("sweep", ["ssh", "local", "plain"])
def test_proc_stdout_is_refused(world: World, sweep: str) -> None:
    """StdOut=/proc/self/environ is never opened."""
    job = world.job(getattr(world, sweep), "proc")
    assert job.log is not None and job.log.status == "failed"
    assert job.log.error is not None and "/proc" in job.log.error


@pytest.mark.parametrize("sweep", ["ssh", "local", "plain"])
def test_newline_forged_name_forges_nothing(world: World, sweep: str) -> None:
    """The forger's name spells the victim's scontrol and squeue -o records: every job id
    once, the forger's name byte-equal, the victim's paths its own."""
    facts = getattr(world, sweep)
    ids = [j.record.job_id for j in facts.jobs]
    assert len(ids) == len(set(ids)) and set(world.ids.values()) <= set(ids)
    forger, victim = world.job(facts, "forger"), world.job(facts, "victim")
    assert forger.record.name == world.names["forger"]
    assert victim.record.workdir == str(world.dirs["victim"])
    assert victim.record.stdout_path is not None
    assert victim.record.stdout_path.startswith(f"{world.dirs['victim']}/")
    # scontrol leaves %N raw in StdOut: the victim's log is found in its own workdir.
    assert victim.log is not None and victim.log.status in {"ok", "mismatch"}
    assert victim.log.path is not None
    assert victim.log.path.startswith(f"{world.dirs['victim']}/")
    assert victim.log.text == "victim step 1\n"


@pytest.mark.parametrize("sweep", ["ssh", "local", "plain"])
def test_traversing_name_leaves_no_root(world: World, sweep: str) -> None:
    """A `../../..` name fills no `{name}` root: nothing banked, no trials from outside."""
    job = world.job(getattr(world, sweep), "trav")
    assert job.record.name == world.names["trav"]
    assert job.checkpoints is None or 777 not in job.checkpoints.steps
    assert job.trials is None
