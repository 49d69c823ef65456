"""Command transport for SLURM clusters: SSH (asyncssh) or local processes, behind one seam.

Policy:

* Every command is an argv list. Over SSH it is joined with :func:`shlex.quote` on every
  element, because asyncssh hands the string to the remote user's shell; locally it runs with
  ``create_subprocess_exec`` and no shell at all. Callers validate job ids
  (:func:`probes.ids.validate_job_id`) before building an argv.
* Host keys are always checked against ``known_hosts`` (the cluster's, else
  ``~/.ssh/known_hosts``); a missing file, an unknown host or a mismatch is a
  :class:`HostKeyError` naming ``host:port``. There is no option to skip the check, and asyncssh
  is never given ``known_hosts=None`` (which would disable it).
* ``~/.ssh/config`` is not read: what connects is exactly what the roster says.
* asyncssh and OS errors are translated here, once, into :mod:`probes.errors`, the original
  chained: refused / timed out / DNS / a peer sending no SSH (asyncssh's
  ``PacketDecodeError``, a ``ValueError``) -> ``UnreachableError``; refused credentials ->
  ``AuthError``; a non-zero exit or a command timeout -> ``CommandError``.
* One :class:`SshRunner` is one connection, opened on the first command and reused for every
  command until :meth:`SshRunner.aclose` (the probe makes one runner per sweep). Given a
  :class:`KeptConnection` (the bot's sweeps, ``SlurmProbe(keep_connection=True)``) the
  runner borrows that connection instead, and it stays open after the runner closes: a warm
  sweep pays no SSH handshake and the login node logs one login per bot, not one per sweep.
  A kept connection sends keepalives (:data:`KEEPALIVE_S`), is dropped when it is found
  closed, and a command whose channel could not even open on a kept connection that turned
  out dead is sent once more on a fresh one (it never started, so it cannot run twice); one
  refused a session by a live kept connection (sshd's ``MaxSessions``) goes on a connection of
  the runner's own.
* A command never outlives its wait: on a timeout, a cancelled sweep or a lost connection the
  remote command is sent TERM and its channel closed (a local one is killed).

The seam and its types are ``probes.slurm.runner``; the SSH runner ``probes.slurm.ssh``
(authentication ``probes.slurm.ssh_auth``, asyncssh's import ``probes.slurm.asyncssh_load``);
this module makes a cluster's runner and runs local ones, and every name callers import from
here stays importable here.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
from collections.abc import Awaitable, Callable, Sequence

from probes.config import SlurmCluster
from probes.errors import CommandError
from probes.slurm.runner import (
    CHUNK,
    CommandResult,
    OutputMeter,
    Runner,
    RunnerFactory,
    StreamingRunner,
    exited_within,
    first_failure,
    output_limit,
    run_streaming,
    shell_join,
)
from probes.slurm.ssh import KEEPALIVE_S, KeptConnection, SshRunner
from probes.slurm.ssh_auth import client_key

__all__ = [
    "CHUNK", "KEEPALIVE_S", "CommandResult", "KeptConnection", "LocalRunner", "Runner",
    "RunnerFactory", "SshRunner", "StreamingRunner", "client_key", "make_runner",
    "run_streaming", "shell_join",
]


def make_runner(cluster: SlurmCluster, *, kept: KeptConnection | None = None) -> Runner:
    """The runner a cluster entry asks for (``local = true`` or SSH, borrowing ``kept``)."""
    return LocalRunner(cluster) if cluster.local else SshRunner(cluster, kept=kept)


class LocalRunner:
    """Runs argv as local processes (no shell), for ``local = true`` clusters."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self._timeout = cluster.command_timeout_s
        self._limit = output_limit(cluster)
        self._sent = 0
        self.on_command: Callable[[], None] | None = None
        """Called as each command is started (as :attr:`SshRunner.on_command`)."""

    @property
    def target(self) -> str:
        return "local"

    @property
    def commands_sent(self) -> int:
        return self._sent

    @property
    def login_user(self) -> str:
        return getpass.getuser()

    async def run(
        self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
    ) -> CommandResult:
        args = tuple(str(a) for a in argv)
        data = stdin.encode() if stdin is not None else None

        async def whole(proc: asyncio.subprocess.Process) -> CommandResult:
            assert proc.stdout is not None and proc.stderr is not None
            meter = self._meter(args)
            _, out, err = await first_failure(_feed(proc, data), meter.read_all(proc.stdout),
                                              meter.read_all(proc.stderr))
            await exited_within(proc.wait())
            return CommandResult(args, _status(proc), out.decode("utf-8", "replace"),
                                 err.decode("utf-8", "replace"))

        result = await self._command(args, piped=stdin is not None, check=check, body=whole)
        if check and result.exit_status != 0:
            raise result.failure(self.target)
        return result

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        """:meth:`run`, stdout handed to ``on_chunk`` as it arrives (``StreamingRunner``)."""
        args = tuple(str(a) for a in argv)

        async def streamed(proc: asyncio.subprocess.Process) -> CommandResult:
            assert proc.stdout is not None and proc.stderr is not None
            stdout = proc.stdout
            meter = self._meter(args)

            async def read_out() -> None:
                while chunk := await stdout.read(CHUNK):
                    meter.add(len(chunk))
                    on_chunk(chunk)

            _, _, err = await first_failure(_feed(proc, (stdin or "").encode()), read_out(),
                                            meter.read_all(proc.stderr))
            await exited_within(proc.wait())
            return CommandResult(args, _status(proc), "", err.decode("utf-8", "replace"))

        return await self._command(args, piped=stdin is not None, check=False, body=streamed)

    async def _command(
        self, args: tuple[str, ...], *, piped: bool, check: bool,
        body: Callable[[asyncio.subprocess.Process], Awaitable[CommandResult]],
    ) -> CommandResult:
        """Start ``args`` (no shell; stdin a pipe when ``piped``) and run ``body`` on the
        process within the command timeout. A command that cannot start is what a shell would
        say (exit 127, raised with ``check``), so callers treat a missing `sacct` the same
        locally and over SSH."""
        self._sent += 1
        if self.on_command is not None:
            self.on_command()
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE if piped else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            result = CommandResult(args, 127, "", f"{args[0]}: could not start: {exc}")
            if check:
                raise result.failure(self.target) from exc
            return result
        try:
            async with asyncio.timeout(self._timeout):
                return await body(proc)
        except TimeoutError as exc:
            raise CommandError(
                f"`{args[0]}` timed out after {self._timeout:g}s locally"
            ) from exc
        finally:
            if proc.returncode is None:  # timed out, cancelled or stopped: nothing outlives it
                proc.kill()
                _close_pipes(proc)
                await exited_within(proc.wait())

    def _meter(self, args: tuple[str, ...]) -> OutputMeter:
        return OutputMeter(args, self.target, self._limit)

    async def aclose(self) -> None:
        return None


async def _feed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
    """Write ``data`` to the child's stdin (a pipe only when there is stdin) and close it."""
    if proc.stdin is None or data is None:
        return
    # It may exit without reading: then its exit status says why.
    with contextlib.suppress(OSError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


def _close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close our ends of a stopped child's pipes. ``wait()`` returns only once they are
    closed: a child stopped mid-output (past its output bound) has left a pipe full that
    nobody reads any more, and one a grandchild holds open may never reach its end. asyncio
    offers no public call for this; its subprocess transport's ``close`` is the one it uses."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _status(proc: asyncio.subprocess.Process) -> int:
    return proc.returncode if proc.returncode is not None else -1

