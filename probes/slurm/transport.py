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
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shlex
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar, cast

from probes.config import SlurmCluster
from probes.errors import AuthError, CommandError, HostKeyError, ProbeError, UnreachableError
from probes.local_files import read_regular, refusal

_OQS = ("oqs", "liboqs")
"""The names asyncssh's import looks liboqs up by (``asyncssh.crypto.pq``, for sntrup761)."""
_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/local/lib64")


def _may_have(name: str) -> bool:
    """Could ``ctypes.util.find_library(name)`` find anything here? ``False`` only when no
    ``lib<name>.so*`` is in the dynamic linker's cache nor in any library directory it or
    gcc would search (standard, multiarch, ``LD_LIBRARY_PATH``, ``LIBRARY_PATH``)."""
    stem = f"lib{name}.so"
    try:
        with open("/etc/ld.so.cache", "rb") as fh:
            if stem.encode() in fh.read():
                return True
    except OSError:
        return True  # no cache to read: let find_library look
    dirs = [*_LIB_DIRS, *(d for v in ("LD_LIBRARY_PATH", "LIBRARY_PATH")
                          for d in os.environ.get(v, "").split(os.pathsep) if d)]
    for base in _LIB_DIRS:
        with contextlib.suppress(OSError):
            dirs += [e.path for e in os.scandir(base) if e.name.endswith("-linux-gnu")]
    for directory in dirs:
        with contextlib.suppress(OSError):
            if any(n.startswith(stem) for n in os.listdir(directory)):
                return True
    return False


def _load_asyncssh() -> None:
    """Import asyncssh without its liboqs look-up where there is no liboqs to find.

    On Linux ``ctypes.util.find_library`` runs ``ldconfig -p`` (then gcc, then ld) for each
    name, and asyncssh asks for two at import: ~30 ms on a quiet machine, more on a busy one,
    on the path of every ``jobtables sweep`` and ``job``. Where :func:`_may_have` says no such
    library exists the look-up answers ``None`` at once, as it would have; anywhere else (or
    off Linux) the real look-up runs, so asyncssh offers sntrup761 exactly as before."""
    import ctypes.util
    import sys

    real = ctypes.util.find_library
    if "asyncssh" in sys.modules or not sys.platform.startswith("linux"):
        return

    def find(name: str) -> str | None:
        if name in _OQS and not _may_have(name):
            return None
        return real(name)

    ctypes.util.find_library = find
    try:
        import asyncssh  # noqa: F401 - the import this function is for
    finally:
        ctypes.util.find_library = real


_load_asyncssh()

import asyncssh  # noqa: E402 - after _load_asyncssh (it is loaded by then)
from asyncssh.packet import PacketDecodeError  # noqa: E402 - (the same)

_T = TypeVar("_T")


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


RunnerFactory = Callable[..., Runner]
"""``make_runner``'s shape: a cluster entry, and ``kept=`` when the probe keeps a connection."""


def shell_join(argv: Sequence[str]) -> str:
    """Quote every element: the only way an argv may reach a remote shell."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def make_runner(cluster: SlurmCluster, *, kept: KeptConnection | None = None) -> Runner:
    """The runner a cluster entry asks for (``local = true`` or SSH, borrowing ``kept``)."""
    return LocalRunner(cluster) if cluster.local else SshRunner(cluster, kept=kept)


class LocalRunner:
    """Runs argv as local processes (no shell), for ``local = true`` clusters."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self._timeout = cluster.command_timeout_s
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
            out, err = await proc.communicate(data)
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

            async def feed() -> None:
                if proc.stdin is None:
                    return
                # It may exit without reading: then its exit status says why.
                with contextlib.suppress(OSError):
                    proc.stdin.write((stdin or "").encode())
                    await proc.stdin.drain()
                    proc.stdin.close()

            async def read_out() -> None:
                while chunk := await stdout.read(CHUNK):
                    on_chunk(chunk)

            _, _, err = await asyncio.gather(feed(), read_out(), proc.stderr.read())
            await proc.wait()
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
            if proc.returncode is None:  # timed out or cancelled: nothing of ours outlives it
                proc.kill()
                await proc.wait()

    async def aclose(self) -> None:
        return None


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
                        started: list[asyncssh.SSHClientProcess[Any]]) -> Any:
            process = await conn.create_process(shell_join(args), input=stdin,
                                                encoding="utf-8", errors="replace")
            started.append(process)
            return await process.wait(check=False)

        done = await self._command(args, whole)
        status = done.exit_status if done.exit_status is not None else -1
        result = CommandResult(args, status, _text(done.stdout), _text(done.stderr))
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

            async def read_out() -> None:
                while chunk := await stdout.read(CHUNK):
                    on_chunk(chunk)

            _, err = await asyncio.gather(read_out(), process.stderr.read())
            return await process.wait(check=False), err

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


def _status(proc: asyncio.subprocess.Process) -> int:
    return proc.returncode if proc.returncode is not None else -1


def _known_hosts_path(cluster: SlurmCluster) -> str:
    path = Path(cluster.known_hosts or "~/.ssh/known_hosts").expanduser()
    if not os.access(path, os.R_OK):
        raise HostKeyError(
            f"host key for {cluster.host}:{cluster.port} cannot be checked: known_hosts {path} "
            f"is missing or unreadable (host keys are always checked)"
        )
    return str(path)


def _load_known_hosts(path: str, cluster: SlurmCluster) -> asyncssh.SSHKnownHosts:
    """The parsed known_hosts file. Its lines are never quoted in an error (asyncssh's
    quotes the bad entry): an operator's slip may name a secret file."""
    reason = f"host key for {cluster.host}:{cluster.port} cannot be checked: known_hosts {path}"
    try:
        text = read_regular(path).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        why = refusal(exc)
        raise HostKeyError(f"{reason}: {why} (host keys are always checked)") from exc
    try:
        return asyncssh.import_known_hosts(text)
    except (ValueError, asyncssh.Error) as exc:
        raise HostKeyError(f"{reason}: not a known_hosts file (line {_bad_line(text)} is no "
                           "host key entry; host keys are always checked)") from exc


def _bad_line(text: str) -> int:
    """The number of the first line asyncssh cannot read as a known_hosts entry."""
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            asyncssh.import_known_hosts(line)
        except (ValueError, asyncssh.Error):
            return number
    return 1


ClientKey: TypeAlias = "asyncssh.SSHKey | tuple[asyncssh.SSHKey, asyncssh.SSHCertificate]"


def client_key(path: str, target: str) -> ClientKey:
    """The private key at ``path``, with the OpenSSH certificate at ``<path>-cert.pub`` where
    one is (as ssh and asyncssh look for it), each read bounded as a regular file; raise
    AuthError unless ``path`` is a private key, what is wrong named, the file never quoted.

    Handed to asyncssh read, never as a path: given a path, asyncssh reads ``<path>.pub``
    and ``<path>-cert.pub`` itself, unbounded, in the event loop (a FIFO there blocked every
    cluster's sweep for ever). A certificate file that cannot be read, or is none, is passed
    over, as asyncssh and ssh pass it over: the key is offered alone."""
    try:
        data = read_regular(path)
    except (OSError, ValueError) as exc:
        why = refusal(exc)
        raise AuthError(f"{target}: client key {path} unreadable: {why}") from exc
    try:
        key = asyncssh.import_private_key(data)
    except (ValueError, asyncssh.Error) as exc:
        what = str(exc) if isinstance(exc, asyncssh.KeyImportError) else "not a private key"
        raise AuthError(f"{target}: client key {path} unreadable: {what}") from exc
    try:
        cert = asyncssh.import_certificate(read_regular(f"{path}-cert.pub"))
    except (OSError, ValueError, asyncssh.Error):
        return key
    return (key, cert)


DEFAULT_KEY_FILES = ("id_ed25519_sk", "id_ecdsa_sk", "id_ed448", "id_ed25519", "id_ecdsa",
                     "id_rsa", "id_dsa")
"""The keys ssh and asyncssh try from ``~/.ssh`` when none is named, in their order."""


def default_client_keys(target: str) -> list[ClientKey]:
    """The default ``~/.ssh/id_*`` keys (with their certificates) that read as private keys,
    each read as :func:`client_key` reads a named one; a missing, unreadable, encrypted or
    non-regular one (a FIFO) is passed over, as asyncssh passes over a missing or encrypted
    one."""
    keys = []
    for name in DEFAULT_KEY_FILES:
        with contextlib.suppress(AuthError):
            keys.append(client_key(str(Path("~", ".ssh", name).expanduser()), target))
    return keys


AGENT_TIMEOUT_S = 5.0
"""How long the ssh-agent may take to list its keys before it counts as no agent."""


async def _agent_keys() -> tuple[asyncssh.SSHAgentClient | None, list[Any]]:
    """The ssh-agent at ``$SSH_AUTH_SOCK`` and its keys, tried before the key files as ssh
    does; none when there is no agent, it cannot be reached, or it does not answer within
    :data:`AGENT_TIMEOUT_S` (the login goes on with the key files; the connect timeout is
    not spent on it)."""
    path = os.environ.get("SSH_AUTH_SOCK")
    if not path:
        return None, []
    agent = None
    try:
        async with asyncio.timeout(AGENT_TIMEOUT_S):
            agent = await asyncssh.connect_agent(path)
            return agent, list(await agent.get_keys())
    except (OSError, asyncssh.Error, ValueError, TimeoutError):
        if agent is not None:
            agent.close()
        return None, []


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
