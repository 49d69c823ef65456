"""The SSH runner: one asyncssh connection to a cluster's login node.

Policy: one :class:`SshRunner` is one connection, opened on the first command and reused until
:meth:`SshRunner.aclose`; given a :class:`KeptConnection` it borrows that one instead, which
stays open after the runner closes and sends keepalives (:data:`KEEPALIVE_S`). asyncssh and OS
errors are translated here, once, into :mod:`probes.errors`, the original chained. A command
never outlives its wait: on a timeout, a cancelled sweep or a lost connection the remote
command is sent TERM and its channel closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from probes.config import SlurmCluster
from probes.errors import AuthError, CommandError, HostKeyError, ProbeError, UnreachableError
from probes.slurm.asyncssh_load import PacketDecodeError, asyncssh
from probes.slurm.runner import (
    CHUNK,
    CommandResult,
    OutputMeter,
    exited_within,
    first_failure,
    output_limit,
    shell_join,
)
from probes.slurm.ssh_auth import (
    _agent_keys,
    _known_hosts_path,
    _load_known_hosts,
    client_key,
    default_client_keys,
)

_T = TypeVar("_T")


KEEPALIVE_S = 30.0
"""A kept connection's keepalive interval; three unanswered close it (a login node gone
silent is noticed within ~2 minutes, not at the next sweep's command timeout)."""


class KeptConnection:
    """One cluster's SSH connection, kept open across the runners that borrow it (see the
    module policy). Not for commands that must not be repeated: only reads are sent on it
    (sweeps, one-job reads); a cancel connects on its own."""

    def __init__(self) -> None:
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self.connects = 0
        """Connections opened so far (tests, benchmarks)."""

    async def get(self, connect: Callable[[], Awaitable[asyncssh.SSHClientConnection]],
                  ) -> tuple[asyncssh.SSHClientConnection, bool]:
        """(the open connection, whether it was opened just now by ``connect``)."""
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.is_closed():
                self._conn = conn = None
            if conn is not None:
                return conn, False
            conn = self._conn = await connect()
            self.connects += 1
            return conn, True

    def drop(self, conn: asyncssh.SSHClientConnection) -> None:
        """Forget ``conn`` (found closed or broken) if it is the one kept, and close it."""
        if self._conn is conn:
            self._conn = None
        conn.close()

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await conn.wait_closed()


class SshRunner:
    """One asyncssh connection to a cluster's login node, opened lazily, host key checked
    (or, with ``kept``, that kept connection borrowed)."""

    def __init__(self, cluster: SlurmCluster, *, kept: KeptConnection | None = None) -> None:
        if cluster.host is None:
            raise ProbeError(f"cluster {cluster.name!r} has no host")
        self._kept = kept
        self._reused = False
        """Whether the connection in use is a kept one opened before this runner's first
        command (it may have died since)."""
        self._cluster = cluster
        self._limit = output_limit(cluster)
        self._host = cluster.host
        self._known_hosts_file = _known_hosts_path(cluster)
        self._known_hosts = _load_known_hosts(self._known_hosts_file, cluster)
        self._client_keys = [str(Path(k).expanduser()) for k in cluster.client_keys]
        self._conn: asyncssh.SSHClientConnection | None = None
        self._failed: ProbeError | None = None
        self._lock = asyncio.Lock()
        self._sent = 0
        self.on_command: Callable[[], None] | None = None
        """Called as each command is started, the connection up: from then on the sweep
        only waits for the cluster (``probes.slurm.early.FoldStack`` imports meanwhile)."""

    @property
    def target(self) -> str:
        return f"{self._host}:{self._cluster.port}"

    @property
    def commands_sent(self) -> int:
        return self._sent

    @property
    def login_user(self) -> str:
        return self._cluster.user or getpass.getuser()

    async def run(
        self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
    ) -> CommandResult:
        args = tuple(str(a) for a in argv)

        async def whole(conn: asyncssh.SSHClientConnection,
                        started: list[asyncssh.SSHClientProcess[Any]]) -> tuple[Any, bytes, bytes]:
            process = await conn.create_process(
                shell_join(args), input=stdin.encode("utf-8") if stdin is not None else None,
                encoding=None)
            started.append(process)
            meter = OutputMeter(args, self.target, self._limit)
            out, err = await first_failure(meter.read_all(process.stdout),
                                           meter.read_all(process.stderr))
            await exited_within(process.wait(check=False))
            return process, out, err

        done, out, err = await self._command(args, whole)
        status = done.exit_status if done.exit_status is not None else -1
        result = CommandResult(args, status, _text(out), _text(err))
        if check and status != 0:
            raise result.failure(self.target)
        return result

    async def run_streaming(self, argv: Sequence[str], *, stdin: str | None,
                            on_chunk: Callable[[bytes], None]) -> CommandResult:
        """:meth:`run`, stdout handed to ``on_chunk`` as it arrives (``StreamingRunner``):
        bytes read a chunk at a time from the channel, stderr drained beside it."""
        args = tuple(str(a) for a in argv)

        async def streamed(conn: asyncssh.SSHClientConnection,
                           started: list[asyncssh.SSHClientProcess[Any]]) -> tuple[Any, Any]:
            process = await conn.create_process(
                shell_join(args), input=stdin.encode("utf-8") if stdin else None,
                encoding=None)
            started.append(process)
            stdout = process.stdout
            meter = OutputMeter(args, self.target, self._limit)

            async def read_out() -> bytes:
                while chunk := await stdout.read(CHUNK):
                    meter.add(len(chunk))
                    on_chunk(chunk)
                return b""

            _, err = await first_failure(read_out(), meter.read_all(process.stderr))
            await exited_within(process.wait(check=False))
            return process, err

        done, err = await self._command(args, streamed)
        status = done.exit_status if done.exit_status is not None else -1
        return CommandResult(args, status, "", _text(err))

    async def _command(
        self, args: tuple[str, ...],
        body: Callable[[asyncssh.SSHClientConnection, list[asyncssh.SSHClientProcess[Any]]],
                       Awaitable[_T]],
    ) -> _T:
        """Run ``body`` (which starts one remote command on the connection and records it in
        its second argument) within the command timeout, with asyncssh's failures mapped to
        the probe's errors."""
        for attempt in (0, 1):
            conn = await self._connection()
            self._sent += 1
            if self.on_command is not None:
                self.on_command()
            timeout = self._cluster.command_timeout_s
            started: list[asyncssh.SSHClientProcess[Any]] = []
            try:
                async with asyncio.timeout(timeout):
                    return await body(conn, started)
            except TimeoutError as exc:
                raise CommandError(
                    f"`{args[0]}` timed out after {timeout:g}s on {self.target}") from exc
            except (asyncssh.Error, OSError, PacketDecodeError) as exc:
                if self._kept is not None and conn.is_closed():
                    self._kept.drop(conn)
                    self._conn = None
                    if not started and self._reused and attempt == 0:
                        continue  # a kept connection that died idle: the command never ran
                elif (self._kept is not None and not started and attempt == 0
                      and isinstance(exc, asyncssh.ChannelOpenError)):
                    # The kept connection is up but refused one more session (sshd's
                    # MaxSessions, with sweeps and /job answers on it at once): this runner
                    # takes a connection of its own. The command never started.
                    self._kept, self._conn = None, None
                    continue
                raise UnreachableError(
                    f"{self.target}: connection lost running `{args[0]}`: {exc}") from exc
            finally:
                # Whatever ended the wait (a timeout, the sweep's deadline, a lost
                # connection), the remote command must not outlive it: signal it and close
                # its channel.
                for process in started:
                    if process.exit_status is None:
                        _abandon(process)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _connection(self) -> asyncssh.SSHClientConnection:
        async with self._lock:  # concurrent commands share the one connection
            if self._failed is not None:
                # One connection attempt per sweep: commands queued behind a failed connect
                # fail at once instead of each waiting out its own connect timeout.
                raise self._failed
            if self._conn is None:
                try:
                    if self._kept is not None:
                        self._conn, fresh = await self._kept.get(self._connect)
                        self._reused = not fresh
                    else:
                        self._conn = await self._connect()
                except ProbeError as exc:
                    self._failed = exc
                    raise
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        c = self._cluster
        options: dict[str, Any] = {
            "port": c.port,
            "known_hosts": self._known_hosts,  # read here, never None: None disables the check
            "config": None,
            "connect_timeout": c.connect_timeout_s,
            "login_timeout": c.connect_timeout_s,
        }
        options["encryption_algs"] = _ciphers()
        if self._kept is not None:
            options["keepalive_interval"] = KEEPALIVE_S
            options["keepalive_count_max"] = 3
        if c.user:
            options["username"] = c.user
        # Keys are read here, never by path: asyncssh would read <key>.pub and <key>-cert.pub
        # itself, and with no client_keys its default ~/.ssh/id_* files, in an executor thread
        # that a FIFO there blocks for ever (the interpreter then never exits).
        options["agent_path"] = None
        agent: asyncssh.SSHAgentClient | None = None
        try:
            async with asyncio.timeout(c.connect_timeout_s + 1):
                if c.client_keys:
                    options["client_keys"] = [client_key(key, self.target)
                                              for key in self._client_keys]
                else:
                    agent, keys = await _agent_keys()
                    options["client_keys"] = [*keys, *default_client_keys(self.target)] or None
                conn: asyncssh.SSHClientConnection = await asyncssh.connect(self._host, **options)
                return conn
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyError(self._host_key_reason()) from exc
        except asyncssh.PermissionDenied as exc:
            raise AuthError(f"{self.target}: authentication refused for user "
                            f"{self.login_user!r} ({exc.reason})") from exc
        except asyncssh.KeyImportError as exc:
            raise AuthError(f"{self.target}: client key unreadable: {exc}") from exc
        except TimeoutError as exc:
            raise UnreachableError(f"{self.target}: connect timed out after "
                                   f"{c.connect_timeout_s:g}s") from exc
        except socket.gaierror as exc:
            raise UnreachableError(f"{self.target}: host name not resolved: {exc}") from exc
        except (asyncssh.Error, OSError) as exc:
            raise UnreachableError(f"{self.target}: {_os_reason(exc)}") from exc
        except PacketDecodeError as exc:  # a ValueError asyncssh lets out for a bad packet
            raise UnreachableError(f"{self.target}: not speaking SSH: a malformed packet "
                                   f"({exc})") from exc
        finally:
            if agent is not None:  # its keys sign only while logging in
                agent.close()

    def _host_key_reason(self) -> str:
        listed = self._known_hosts.match(self._host, self._host, self._cluster.port)
        what = "does not match" if listed[0] or listed[1] else "is not listed in"
        return (f"host key for {self.target} {what} known_hosts {self._known_hosts_file}: refusing "
                f"to connect (add the host's real key there; the check cannot be skipped)")

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._kept is None:  # a kept one stays open for the next
            conn.close()
            await conn.wait_closed()


_FIRST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _ciphers() -> list[str]:
    """asyncssh's own ciphers, AES-GCM first: with AES in hardware (any x86-64 or arm64 of
    the last decade) it moves a sweep's answer (~7 MiB at 500 jobs) at half chacha20's CPU
    on both ends. Only the order changes: a server without it agrees on the next."""
    from asyncssh.encryption import get_default_encryption_algs

    default = [a.decode("ascii") for a in get_default_encryption_algs()]
    return [a for a in _FIRST_CIPHERS if a in default] + \
        [a for a in default if a not in _FIRST_CIPHERS]


def _abandon(process: asyncssh.SSHClientProcess[Any]) -> None:
    """TERM the remote command (sshd delivers it where it supports signals) and close the
    channel; the collector also exits by itself once its session is gone."""
    with contextlib.suppress(asyncssh.Error, OSError):
        process.terminate()
    with contextlib.suppress(asyncssh.Error, OSError):
        process.close()



def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def _text(raw: object) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw)
