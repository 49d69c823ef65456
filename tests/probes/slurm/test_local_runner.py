"""``LocalRunner``: argv run as a local process, whole or streamed, never outliving its wait.

Real child processes (``sh``, ``cat``): what each way of running answers (output, exit status,
stdin fed, a command that cannot start as a shell's exit 127), and that the child is killed
and reaped when the command timeout fires or the caller is cancelled, in ``run`` and in
``run_streaming`` alike.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.errors import CommandError
from probes.slurm.transport import CommandResult, LocalRunner

Way = Callable[[LocalRunner, list[str], str | None], Awaitable[CommandResult]]


async def whole(runner: LocalRunner, argv: list[str], stdin: str | None) -> CommandResult:
    return await runner.run(argv, stdin=stdin, check=False)


async def streamed(runner: LocalRunner, argv: list[str], stdin: str | None) -> CommandResult:
    chunks: list[bytes] = []
    result = await runner.run_streaming(argv, stdin=stdin, on_chunk=chunks.append)
    assert result.stdout == ""
    return CommandResult(result.argv, result.exit_status, b"".join(chunks).decode(),
                         result.stderr)


WAYS = pytest.mark.parametrize("way", [whole, streamed], ids=["run", "run_streaming"])


def runner(timeout_s: float = 30.0) -> LocalRunner:
    return LocalRunner(SlurmCluster(name="local", local=True, command_timeout_s=timeout_s))


def sleeper(pidfile: Path) -> list[str]:
    """A child that writes its pid, then sleeps far past any wait (``exec``: the pid is the
    process the runner started)."""
    return ["sh", "-c", f'echo $$ > "{pidfile}"; exec sleep 300']


def written_pid(pidfile: Path) -> int | None:
    text = pidfile.read_text().strip() if pidfile.exists() else ""
    return int(text) if text else None


async def started_pid(pidfile: Path) -> int:
    for _ in range(500):  # bounded: the child writes its pid as soon as it runs
        if (pid := written_pid(pidfile)) is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError("the child never started")


def gone(pid: int) -> bool:
    """No such process: killed and reaped (a zombie would still answer signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@WAYS
async def test_output_status_and_stdin(way: Way) -> None:
    """stdout, stderr and the exit status as the child gave them; stdin is fed."""
    r = runner()
    result = await way(r, ["sh", "-c", "cat; echo oops >&2; exit 3"], "fed\nlines\n")
    assert (result.exit_status, result.stdout, result.stderr) == (3, "fed\nlines\n", "oops\n")
    assert (await way(r, ["sh", "-c", "cat"], None)).stdout == ""  # no stdin: /dev/null
    assert r.commands_sent == 2


@WAYS
async def test_a_command_that_cannot_start_exits_127(way: Way, tmp_path: Path) -> None:
    r = runner()
    result = await way(r, [str(tmp_path / "no-such-sacct"), "-j", "1"], None)
    assert result.exit_status == 127 and "could not start" in result.stderr
    assert r.commands_sent == 1


async def test_run_checks_the_exit_status(tmp_path: Path) -> None:
    """With ``check``, a non-zero exit and a command that cannot start are CommandErrors."""
    r = runner()
    with pytest.raises(CommandError, match=r"exited 3 on local: oops"):
        await r.run(["sh", "-c", "echo oops >&2; exit 3"])
    with pytest.raises(CommandError, match="exited 127 on local") as caught:
        await r.run([str(tmp_path / "no-such-sacct")])
    assert isinstance(caught.value.__cause__, OSError)
    assert (await r.run(["true"])).exit_status == 0


@WAYS
async def test_a_timeout_kills_the_child(way: Way, tmp_path: Path) -> None:
    """Past the command timeout: a CommandError naming it, and the child killed and reaped."""
    pidfile = tmp_path / "pid"
    with pytest.raises(CommandError, match=r"`sh` timed out after 0.3s locally"):
        await way(runner(timeout_s=0.3), sleeper(pidfile), None)
    assert gone(int(pidfile.read_text()))


@WAYS
async def test_a_cancelled_caller_kills_the_child(way: Way, tmp_path: Path) -> None:
    """A caller cancelled mid-command (a sweep's deadline) leaves no child behind."""
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(way(runner(), sleeper(pidfile), None))
    pid = await started_pid(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(pid)


async def test_streamed_chunks_arrive_before_the_command_ends(tmp_path: Path) -> None:
    """``run_streaming`` hands stdout over while the child still runs."""
    gate = tmp_path / "gate"
    chunks: list[bytes] = []
    script = f'echo first; while [ ! -e "{gate}" ]; do sleep 0.01; done; echo second'
    task = asyncio.create_task(runner().run_streaming(["sh", "-c", script], stdin=None,
                                                      on_chunk=chunks.append))
    for _ in range(500):  # bounded: the first line comes as soon as the child runs
        if chunks:
            break
        await asyncio.sleep(0.01)
    assert b"".join(chunks) == b"first\n" and not task.done()
    gate.touch()
    result = await task
    assert result.exit_status == 0 and b"".join(chunks) == b"first\nsecond\n"
