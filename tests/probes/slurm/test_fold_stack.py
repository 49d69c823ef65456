"""The fold stack is imported while the cluster answers, not before the request goes out
(``probes.slurm.early.FoldStack``, issue 12)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.preload import LATER
from probes.config import SlurmCluster
from probes.models import JobState, SchedulerRecord
from probes.slurm.early import FOLD_STACK, fold_stack_loading, folder
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_stream import NOW, USER, Collector, world

ROOT = Path(__file__).resolve().parents[3]
REQUEST_PATH = ("bot.cli", "probes.slurm.probe", "probes.slurm.transport")
"""What a cold ``jobtables sweep`` or ``job`` imports before its first command."""
FOLDING = ("probes.logs.parse", "probes.slurm.assemble", "probes.slurm.cursors", "report.judge",
           "report.models", "report.memory", "probes.rollouts", "report.deep_probe")


def _in_fresh_interpreter(code: str) -> Any:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def _project(names: Any) -> set[str]:
    return {n for n in names if n.split(".")[0] in ("bot", "probes", "report")}


def test_the_request_path_imports_nothing_that_folds_or_judges() -> None:
    loaded = _in_fresh_interpreter(
        "import importlib, json, sys\n"
        f"for name in {REQUEST_PATH!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))")
    assert not set(FOLDING) & set(loaded)
    assert not set(FOLD_STACK) & set(loaded)


def test_each_step_of_the_stack_is_one_module_and_the_stack_is_whole() -> None:
    """Importing the steps in order, each brings in no other module of ours (so no step holds
    the event loop long), and with the last one every module folding needs is there."""
    steps = _in_fresh_interpreter(
        "import importlib, json, sys\n"
        f"for name in {REQUEST_PATH!r}: importlib.import_module(name)\n"
        "steps = []\n"
        f"for name in {FOLD_STACK!r}:\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(name)\n"
        "    steps.append([name, sorted(set(sys.modules) - before)])\n"
        "before = set(sys.modules)\n"
        "import probes.slurm.assemble, probes.slurm.cursors, probes.slurm.early\n"
        "steps.append(['(after)', sorted(set(sys.modules) - before)])\n"
        "print(json.dumps(steps))")
    for name, new in steps[:-1]:
        assert _project(new) <= {name}, (name, _project(new))
    assert _project(steps[-1][1]) == set()


class _Hooked:
    """A runner's hook and nothing else (the transports call ``on_command``)."""

    on_command: Any = None


async def test_the_stack_begins_when_the_first_command_starts() -> None:
    runner = _Hooked()
    async with fold_stack_loading(runner) as stack:
        assert runner.on_command == stack.start
        for _ in range(20):
            await asyncio.sleep(0)
        assert not stack.ready.is_set()  # the handshake is not slowed: nothing imported yet
        runner.on_command()
        await asyncio.wrap_future(asyncio.get_running_loop().run_in_executor(
            None, stack.ready.wait))
    assert stack.task.done() and not stack.task.cancelled()


async def test_a_runner_without_the_hook_starts_it_at_once_and_the_block_waits() -> None:
    async with fold_stack_loading(object()) as stack:
        pass
    assert stack.ready.is_set() and stack.task.done() and not stack.task.cancelled()


async def test_a_block_that_never_started_a_command_still_ends_the_stack() -> None:
    runner = _Hooked()
    async with fold_stack_loading(runner) as stack:
        pass
    assert stack.ready.is_set() and not stack.task.cancelled()


async def test_a_failing_block_leaves_the_stack_to_end_before_ready() -> None:
    """Never cancelled midway: a fold still waiting must not go on over half a stack while
    the loop's thread imports the rest."""
    runner = _Hooked()
    with pytest.raises(RuntimeError, match="boom"):
        async with fold_stack_loading(runner) as stack:
            raise RuntimeError("boom")
    await stack.task
    assert not stack.task.cancelled() and stack.ready.is_set()


async def test_a_fold_starts_a_stack_whose_runner_never_called_its_hook() -> None:
    runner = _Hooked()
    async with fold_stack_loading(runner) as stack:
        waiter = threading.Thread(target=stack.wait, daemon=True)  # a fold's thread
        waiter.start()
        for _ in range(1000):  # only the hook starting the stack: the thread waits forever
            if not waiter.is_alive():
                break
            await asyncio.sleep(0.01)
        assert not waiter.is_alive() and stack.ready.is_set()


async def test_a_sweep_whose_runner_never_calls_its_hook_is_not_stalled(
        tmp_path: Path) -> None:
    squeue_bin, ids = world(tmp_path, 4)
    collector = _Silent(squeue_bin)
    facts = await SlurmProbe(_short(), clock=lambda: NOW,
                             runner_factory=collector.factory).collect()
    assert collector.on_command is not None  # hooked, and never called
    assert facts.status == "ok", facts.reason
    assert [j.record.job_id for j in facts.jobs] == ids
    assert all(j.summary is not None and j.summary.points for j in facts.jobs)


class _Silent(Collector):
    """A streaming runner with the hook, which it never calls."""

    on_command: Any = None


def _short() -> SlurmCluster:
    return SlurmCluster(name="s", host="h", known_hosts="/dev/null", users=(USER,),
                        recent_hours=1.0, checkpoint_roots=(), trial_roots=(), timeout_s=20)


RECORD_IMPORTS = """
import importlib.abc, json, sys, threading
SEEN = {}
class _Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("bot", "probes", "report", "rich"):
            SEEN.setdefault(name, threading.current_thread().name)
sys.meta_path.insert(0, _Recorder())
"""


def _local_cluster_env(tmp: Path, jobs: int) -> tuple[dict[str, str], list[str]]:
    squeue_bin, ids = world(tmp, jobs)
    env = dict(os.environ, PATH=f"{squeue_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    return env, ids


def test_lines_that_come_before_the_stack_is_in_are_folded_after_it(tmp_path: Path) -> None:
    """The stack's import is held until the reader thread has its first line: each module of
    it is still imported on the loop's thread, and the reader thread's folds come after."""
    env, ids = _local_cluster_env(tmp_path, 4)
    code = RECORD_IMPORTS + f"""
import asyncio
from probes.config import SlurmCluster
from probes.slurm import answer, early
from probes.slurm.probe import SlurmProbe
first_line = threading.Event()
line = answer.AnswerReader.line
def seen_line(self, raw, *, cut=False):
    first_line.set()
    return line(self, raw, cut=cut)
answer.AnswerReader.line = seen_line
load = early.load_fold_stack
async def held_load():
    await asyncio.to_thread(first_line.wait, 30)
    await load()
early.load_fold_stack = held_load
cluster = SlurmCluster(name="l", local=True, users=({USER!r},), checkpoint_roots=(),
                       trial_roots=())
facts = asyncio.run(SlurmProbe(cluster).collect())
print(json.dumps({{"status": facts.status, "ids": [j.record.job_id for j in facts.jobs],
                  "early": first_line.is_set(), "seen": SEEN}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    got = json.loads(out.stdout)
    assert got["status"] == "ok" and got["ids"] == ids and got["early"]
    threads = {name: got["seen"].get(name) for name in FOLD_STACK}
    assert threads == dict.fromkeys(FOLD_STACK, "MainThread")


def test_a_cold_cli_sweep_sends_its_first_command_before_folding_judging_or_rendering(
        tmp_path: Path) -> None:
    env, ids = _local_cluster_env(tmp_path, 3)
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "l"\nkind = "slurm"\nlocal = true\n'
                      f'users = ["{USER}"]\ncheckpoint_roots = []\ntrial_roots = []\n')
    code = f"""
import json, sys
from probes.slurm import transport
from bot import cli
AT_FIRST = []
command = transport.LocalRunner._command
async def first(self, *args, **kwargs):
    if not AT_FIRST:
        AT_FIRST.append(sorted(sys.modules))
    return await command(self, *args, **kwargs)
transport.LocalRunner._command = first
code, _ = cli._dispatch(["sweep", "--config", {str(config)!r}, "--format", "json"])
print(json.dumps({{"code": code, "at_first": AT_FIRST[0]}}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    sweep = json.loads(out.stdout[:out.stdout.rindex("\n{")])
    assert got["code"] == 0
    assert sorted(j["job_id"] for j in sweep["jobs"]) == sorted(ids)
    loaded = set(got["at_first"])
    assert not loaded & {*FOLD_STACK, *FOLDING, *LATER}, sorted(loaded & {*FOLD_STACK, *LATER})


def test_each_step_of_the_preload_is_one_module_of_ours() -> None:
    steps = _in_fresh_interpreter(
        "import importlib, json, sys\n"
        f"for name in {REQUEST_PATH + FOLD_STACK!r}: importlib.import_module(name)\n"
        "steps = []\n"
        f"for name in {LATER!r}:\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(name)\n"
        "    steps.append([name, sorted(set(sys.modules) - before)])\n"
        "print(json.dumps(steps))")
    for name, new in steps:
        assert _project(new) <= {name}, (name, _project(new))


def test_a_fold_waits_for_ready() -> None:
    ready = threading.Event()
    fold = folder(None, aliases={}, benign_patterns=(), wait=ready.wait)
    record = SchedulerRecord(cluster="c", job_id="7", name="run", state=JobState.RUNNING)
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(fold(record, None)))
    worker.start()
    worker.join(0.2)
    assert worker.is_alive() and not done  # blocked on ready, not folding
    ready.set()
    worker.join(10)
    assert not worker.is_alive()
    facts, state = done[0]
    assert facts.record is record and state is None


@pytest.mark.slurm
async def test_ssh_runner_calls_the_hook_once_per_command_with_the_connection_up(
        slurm_env: SlurmEnv) -> None:
    runner = SshRunner(slurm_env.cluster())
    seen: list[tuple[int, bool]] = []
    runner.on_command = lambda: seen.append((runner.commands_sent, runner._conn is not None))
    try:
        assert seen == []
        await runner.run(["true"])
        await runner.run(["true"])
    finally:
        await runner.aclose()
    assert seen == [(1, True), (2, True)]
