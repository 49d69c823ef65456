"""The fold stack is imported while the cluster answers, not before the request goes out
(``probes.slurm.early.FoldStack``, issue 12)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState, SchedulerRecord
from probes.slurm.early import FOLD_STACK, fold_stack_loading, folder
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv

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


async def test_a_failing_block_stops_the_stack_and_sets_ready() -> None:
    runner = _Hooked()
    with pytest.raises(RuntimeError, match="boom"):
        async with fold_stack_loading(runner) as stack:
            raise RuntimeError("boom")
    assert stack.task.cancelled() and stack.ready.is_set()


def test_a_fold_waits_for_ready() -> None:
    ready = threading.Event()
    fold = folder(None, aliases={}, benign_patterns=(), ready=ready)
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
