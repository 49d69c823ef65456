"""The seam every SLURM command goes through: a :class:`Runner` and what one command gives.

Policy: every command is an argv list; :func:`shell_join` is the only way one may reach a
remote shell (each element quoted). A runner counts the commands it sent (the probe's round
trips) and names its target in every error; a streaming runner hands stdout over as it
arrives, and :func:`run_streaming` serves any runner (see ``probes.slurm.transport``).
A command's output (stdout and stderr together) is read through an :class:`OutputMeter`: past
:func:`output_limit` bytes the command is stopped with a ``CommandError``, so a login node
that prints without end (a broken or hostile collector, a runaway scheduler command) costs
its cluster's read, never the bot's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from probes.errors import CommandError

if TYPE_CHECKING:
    from probes.config import SlurmCluster


@dataclass(frozen=True)
class CommandResult:
    """What one command printed and how it ended."""

    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str

    def failure(self, target: str) -> CommandError:
        """The ``CommandError`` describing this (failed) result."""
        last = self.stderr.strip().splitlines()[-1:] or ["no output on stderr"]
        return CommandError(
            f"`{shell_join(self.argv)}` exited {self.exit_status} on {target}: {last[0][:300]}"
        )


EXIT_GRACE_S = 5.0
"""How long a command's exit status is waited for once its output has ended, or once it was
killed: a process with a thread stuck in the kernel (a read on a hung mount) cannot exit, though
it closed its output after its last word (``probes.remote.collector``), and no signal ends it."""


NO_EXIT_STATUS = -1
"""A command's exit status when none was seen: it ended by a signal, or closed its output and
had not exited :data:`EXIT_GRACE_S` later (then an answer it printed whole still stands)."""


async def exited_within(ending: Awaitable[Any], seconds: float = EXIT_GRACE_S) -> None:
    """Await a process's ``ending`` (its exit) for at most ``seconds``; its status is then
    unknown."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await ending


class Runner(Protocol):
    """Runs argv commands on one cluster; counts what it sent."""

    @property
    def target(self) -> str:
        """``host:port`` or ``local``: named in every error."""
        ...

    @property
    def commands_sent(self) -> int:
        """Commands started so far (the probe's round trips)."""
        ...

    @property
    def login_user(self) -> str:
        """The account commands run as (the default ``users`` filter)."""
        ...

    async def run(
        self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
    ) -> CommandResult:
        """Run ``argv``; with ``check``, a non-zero exit raises ``CommandError``."""
        ...

    async def aclose(self) -> None:
        """Close the connection, if any."""
        ...


class StreamingRunner(Runner, Protocol):
    """A runner that can hand a command's stdout over as it arrives (the collector's
    streamed answer, ``probes.slurm.answer``); :func:`run_streaming` serves any runner."""

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        """Run ``argv``, calling ``on_chunk`` with each piece of stdout as it comes (in the
        event loop, in order); the result's ``stdout`` is empty. Never checks the exit."""
        ...


async def run_streaming(runner: Runner, argv: Sequence[str], *, stdin: str | None,
                        on_chunk: Callable[[bytes], None]) -> CommandResult:
    """``runner.run_streaming`` where the runner has it; else its ``run``, whose whole stdout
    is then one chunk (test doubles, wrappers): the same answer, only later."""
    streaming = getattr(runner, "run_streaming", None)
    if streaming is not None:
        return cast("CommandResult", await streaming(argv, stdin=stdin, on_chunk=on_chunk))
    res = await runner.run(argv, stdin=stdin, check=False)
    if res.stdout:
        on_chunk(res.stdout.encode("utf-8"))
    return CommandResult(res.argv, res.exit_status, "", res.stderr)


CHUNK = 1 << 16
"""Bytes of stdout asked for per read of a streamed command."""


def output_limit(cluster: SlurmCluster) -> int:
    """Bytes one command may print (stdout and stderr together) on ``cluster``: its
    ``max_output_bytes``, and never less than four times the collector's answer budget (the
    budget bounds the job entries; the head and the framing come on top)."""
    return max(cluster.max_output_bytes, 4 * cluster.answer_budget_bytes)


class OutputMeter:
    """One command's output counted as it is read (:meth:`read_all`, or :meth:`add` for
    bytes read elsewhere); past ``limit`` bytes a ``CommandError`` naming the bound."""

    def __init__(self, argv: Sequence[str], target: str, limit: int) -> None:
        self._name = str(argv[0]) if argv else "command"
        self._target = target
        self.limit = limit
        self.read = 0

    def add(self, count: int) -> None:
        self.read += count
        if self.read > self.limit:
            raise CommandError(
                f"`{self._name}` printed more than {self.limit} bytes on {self._target}: "
                "stopped (raise max_output_bytes if its output is genuine)")

    async def read_all(self, stream: _Reader) -> bytes:
        """``stream`` to its end, counted; stops at the bound."""
        parts: list[bytes] = []
        while chunk := await stream.read(CHUNK):
            self.add(len(chunk))
            parts.append(chunk)
        return b"".join(parts)


class _Reader(Protocol):
    """A byte stream: asyncio's ``StreamReader`` or asyncssh's ``SSHReader`` (``encoding=None``)."""

    def read(self, n: int = -1) -> Awaitable[bytes]: ...


async def first_failure(*steps: Awaitable[Any]) -> list[Any]:
    """Await ``steps`` together; the first to raise cancels the others and is raised as
    itself (a ``CommandError`` for the caller, not an ``ExceptionGroup``)."""
    tasks = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        # Reaped: a sibling cancelled here (or by the caller's own cancellation) is awaited.
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
    return [task.result() for task in tasks]


RunnerFactory = Callable[..., Runner]
"""``make_runner``'s shape: a cluster entry, and ``kept=`` when the probe keeps a connection."""


def shell_join(argv: Sequence[str]) -> str:
    """Quote every element: the only way an argv may reach a remote shell."""
    return " ".join(shlex.quote(str(a)) for a in argv)
