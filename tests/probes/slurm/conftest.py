"""Fixtures for the SLURM tests: the local 22.05 cluster and test sshd from scripts/services.

Unit tests (parsers, collector, script building) need none of this. Tests that take
``slurm_env`` need the services: without them they are skipped with the reason, except under
``CI=true``, where ``bash scripts/services`` is run once and the tests FAIL if the cluster is
still unavailable.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probes.config import SlurmCluster
from probes.errors import ProbeError
from probes.slurm.transport import CommandResult, SshRunner

ROOT = Path(__file__).resolve().parents[3]
ENV_FILE = Path("/etc/jobtables-test/env")


@dataclass(frozen=True)
class SlurmEnv:
    """The test services' coordinates, from /etc/jobtables-test/env."""

    host: str
    port: int
    user: str
    key: str
    known_hosts: str
    wrong_known_hosts: str
    sshd_log: Path
    scratch: str
    other_user: str
    """An unprivileged user whose jobs tests submit with ``sbatch --uid`` (as root)."""
    other_scratch: str

    def cluster(self, name: str = "local22", **overrides: Any) -> SlurmCluster:
        """A ``[[clusters]]`` entry for the test cluster over SSH."""
        fields: dict[str, Any] = {
            "name": name, "host": self.host, "port": self.port, "user": self.user,
            "client_keys": (self.key,), "known_hosts": self.known_hosts,
            "connect_timeout_s": 10.0, "command_timeout_s": 60.0, "timeout_s": 120.0,
        }
        fields.update(overrides)
        return SlurmCluster(**fields)

    def config_toml(self, tmp: Path, name: str = "local22", **entries: Any) -> Path:
        """``tmp/jobtables.toml`` with one ``[[clusters]]`` entry for the test cluster over SSH;
        ``entries`` are more keys of that entry (strings, numbers, lists of strings)."""
        fields: dict[str, Any] = {
            "name": name, "kind": "slurm", "host": self.host, "port": self.port,
            "user": self.user, "known_hosts": self.known_hosts, "client_keys": [self.key],
            **entries,
        }
        path = tmp / "jobtables.toml"
        # JSON strings, numbers and lists of strings are valid TOML values.
        body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
        path.write_text("[[clusters]]\n" + body)
        return path


def _read_env() -> dict[str, str]:
    if not ENV_FILE.is_file():
        return {}
    pairs = (line.split("=", 1) for line in ENV_FILE.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def _why_unavailable(env: dict[str, str]) -> str | None:
    if not env:
        return f"{ENV_FILE} is missing (run `bash scripts/services` as root)"
    if "JOBTABLES_TEST_OTHER_USER" not in env:
        return f"{ENV_FILE} names no unprivileged user (re-run `bash scripts/services`)"
    try:
        with socket.create_connection((env["JOBTABLES_TEST_SSH_HOST"],
                                       int(env["JOBTABLES_TEST_SSH_PORT"])), timeout=3):
            pass
    except OSError as exc:
        return f"test sshd not listening: {exc}"
    slurm = _to_env(env)

    async def ping() -> CommandResult:
        runner = SshRunner(slurm.cluster(command_timeout_s=15.0))
        try:
            return await runner.run(["sinfo", "-h", "-o", "%T"], check=False)
        finally:
            await runner.aclose()

    try:
        result = asyncio.run(ping())
    except ProbeError as exc:
        return f"cannot run sinfo over SSH: {exc}"
    states = result.stdout.split()
    if result.exit_status != 0 or not any(
        s.rstrip("*~#") in {"idle", "mixed", "allocated", "completing"} for s in states
    ):
        return f"SLURM node not up: sinfo says {result.stdout.strip() or result.stderr.strip()}"
    return None


def _to_env(env: dict[str, str]) -> SlurmEnv:
    return SlurmEnv(
        host=env["JOBTABLES_TEST_SSH_HOST"], port=int(env["JOBTABLES_TEST_SSH_PORT"]),
        user=env["JOBTABLES_TEST_SSH_USER"], key=env["JOBTABLES_TEST_SSH_KEY"],
        known_hosts=env["JOBTABLES_TEST_KNOWN_HOSTS"],
        wrong_known_hosts=env["JOBTABLES_TEST_WRONG_KNOWN_HOSTS"],
        sshd_log=Path(env.get("JOBTABLES_TEST_SSHD_LOG", "/var/log/jobtables-sshd.log")),
        scratch=env.get("JOBTABLES_TEST_SCRATCH", "/home/jobtables/jt-tests"),
        other_user=env.get("JOBTABLES_TEST_OTHER_USER", "jtuser"),
        other_scratch=env.get("JOBTABLES_TEST_OTHER_SCRATCH", "/home/jtuser/jt-tests"),
    )


@pytest.fixture(scope="session")
def slurm_env() -> SlurmEnv:
    """The running test cluster; skipped (or, under CI, started and required)."""
    reason = _why_unavailable(_read_env())
    if reason and os.environ.get("CI") == "true":
        subprocess.run(["bash", str(ROOT / "scripts" / "services")], check=False, timeout=900)
        reason = _why_unavailable(_read_env())
        if reason:
            pytest.fail(f"SLURM test services unavailable under CI: {reason}")
    if reason:
        pytest.skip(f"SLURM test services unavailable: {reason}")
    return _to_env(_read_env())


@dataclass
class WalltimeChains:
    """``test_e2e_chains``'s jobs, submitted (``--time=1`` predecessors and their successors)."""

    ids: dict[str, str]
    run_dir: str


@pytest.fixture(scope="session")
def walltime_chains(slurm_env: SlurmEnv) -> Iterator[WalltimeChains]:
    """Submit ``test_e2e_chains``'s walltime chains. Their TIMEOUTs take 60-90 s of the real
    clock, as ``test_e2e``'s own does: that module asks for these before its jobs when both
    modules run, so the two waits overlap (the next module then finds its TIMEOUTs done)
    instead of adding up. Each module still checks every state it needs; the chains module
    cancels them when done, and this cancels whatever is left at the session's end."""
    from tests.probes.slurm.test_e2e import _cleanup
    from tests.probes.slurm.test_e2e_chains import submit_chains

    chains = WalltimeChains({}, f"{slurm_env.scratch}/e2e-c{secrets.token_hex(3)}")
    try:
        asyncio.run(submit_chains(slurm_env, chains.run_dir, chains.ids))
        yield chains
    finally:
        asyncio.run(_cleanup(slurm_env, chains.ids, chains.run_dir))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class RecordingRunner:
    """A runner that records every argv and runs nothing (for 'nothing ran' assertions)."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.calls: list[tuple[str, ...]] = []

    @property
    def target(self) -> str:
        return "recorder"

    @property
    def commands_sent(self) -> int:
        return len(self.calls)

    @property
    def login_user(self) -> str:
        return "nobody"

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self.calls.append(tuple(argv))
        return CommandResult(tuple(argv), 0, "", "")

    async def aclose(self) -> None:
        return None


CAPTURE_PLAIN_FORMAT = "%i|%j|%u|%T|%r|%V|%S|%e|%l|%Z|%o|%E|%M"
"""The field order the 22.05.8 ``squeue_plain*.txt`` captures were taken with."""


def as_plain_format(captured: str, fmt: str | None = None) -> str:
    """A capture's lines with their fields in the ``-o`` format squeue was asked for.

    squeue prints the fields in whatever order ``-o`` asks, with the literal text around
    them, so permuting the captured fields (none of which contains ``|``) and putting the
    format's own text (the sweep's nonce) around them gives exactly what squeue prints.
    """
    from probes.slurm.plain import PLAIN_FIELDS, PLAIN_FORMAT

    fmt = fmt or PLAIN_FORMAT
    old = CAPTURE_PLAIN_FORMAT.split("|")
    out = []
    for line in captured.splitlines():
        fields = dict(zip(old, line.split("|"), strict=True))
        text = fmt
        for field in PLAIN_FIELDS:  # %i before %j...: no field letter is a prefix of another
            text = text.replace(field, "\0" + field[1], 1)
        for field in PLAIN_FIELDS:
            text = text.replace("\0" + field[1], fields[field], 1)
        out.append(text)
    return "".join(f"{ln}\n" for ln in out)


def fake_squeue_bin(tmp: Path, squeue_json: str, *, error: str | None = None) -> Path:
    """A directory holding a stand-in ``squeue`` that prints ``squeue_json`` (or fails).

    Put it first on the collector's PATH (:func:`run_with_path`): the one-trip collector runs
    ``squeue --json`` itself, and on this machine the real ``squeue`` is the test cluster's.
    Each call's arguments are appended to ``<tmp>/squeue.calls``. Its ``-O`` listing is
    printed from the same document (``fake_squeue_listing.py``; ``<tmp>/squeue.listing``, if
    there, is printed instead, each ``{D}`` in it a field's suffix). While ``<tmp>/squeue.hold``
    exists, ``--json`` answers only once ``<tmp>/squeue.go`` does. The listing runs on this
    interpreter (``-I -S``: it needs the standard library only), not on ``python3`` from the
    PATH, which may be a version manager's shim costing ~0.1 s before Python even starts.
    """
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    (tmp / "squeue.json").write_text(squeue_json)
    fail = f"echo {shlex.quote(error)} >&2; exit 1\n" if error else ""
    script = bin_dir / "squeue"
    hold, go = shlex.quote(str(tmp / "squeue.hold")), shlex.quote(str(tmp / "squeue.go"))
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {shlex.quote(str(tmp / 'squeue.calls'))}\n"
                      f"{fail}case \"$*\" in *' -O '*) exec {shlex.quote(sys.executable)} -I -S "
                      f"{shlex.quote(str(LISTING))}"
                      f" {shlex.quote(str(tmp / 'squeue.json'))} \"$@\";; esac\n"
                      f"if [ -e {hold} ]; then while [ ! -e {go} ]; do sleep 0.01; done; fi\n"
                      f"exec cat {shlex.quote(str(tmp / 'squeue.json'))}\n")
    script.chmod(0o755)
    return bin_dir


LISTING = Path(__file__).with_name("fake_squeue_listing.py")
"""The stand-in's ``squeue -h -t RUNNING --user=... -O ...``: the collector's fast listing, printed
from the same document as squeue's real one is (``fake_squeue_listing.py``)."""


async def run_with_path(args: tuple[str, ...], stdin: str, first: Path) -> CommandResult:
    """Run a command as LocalRunner would (argv, no shell), with ``first`` ahead on the PATH."""
    env = {**os.environ, "PATH": f"{first}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await proc.communicate(stdin.encode())
    return CommandResult(args, proc.returncode or 0, out.decode(), err.decode())


class OwnLogins:
    """The logins sshd accepted for this test's own connections: every ``asyncssh.connect``
    made while it runs records its local port, and only the log's ``Accepted publickey ...
    port N`` lines of those ports, written since the test began, count. Counting every line
    of the shared sshd log also counted any other process's logins (another test run, an
    operator's ``jobtables``)."""

    _LINE = re.compile(r"Accepted publickey for \S+ from \S+ port (\d+)")

    def __init__(self, env: SlurmEnv) -> None:
        self.env = env
        self.ports: set[int] = set()
        self._start = env.sshd_log.stat().st_size
        """The log's size when the test began: an earlier login from a port reused since is
        no login of this test's."""

    def count(self) -> int:
        with self.env.sshd_log.open("rb") as log:
            log.seek(self._start)
            text = log.read().decode(errors="replace")
        return sum(1 for port in self._LINE.findall(text) if int(port) in self.ports)

    async def until(self, count: int) -> int:
        """The count once it reaches ``count`` (sshd writes as it accepts; a few seconds at
        most), or what it is after that."""
        for _ in range(100):
            if (seen := self.count()) >= count:
                return seen
            await asyncio.sleep(0.05)
        return self.count()


@pytest.fixture
def own_logins(slurm_env: SlurmEnv, monkeypatch: pytest.MonkeyPatch) -> OwnLogins:
    import asyncssh

    logins = OwnLogins(slurm_env)
    real = asyncssh.connect

    async def connect(*args: Any, **kwargs: Any) -> Any:
        conn = await real(*args, **kwargs)
        sockname = conn.get_extra_info("sockname")
        if sockname:
            logins.ports.add(int(sockname[1]))
        return conn

    monkeypatch.setattr(asyncssh, "connect", connect)
    return logins


def cli_json(config: Path, *argv: str) -> dict[str, Any]:
    """``jobtables ARGV --format json --config CONFIG`` as a child process, as a user runs it:
    exit 0 and its stdout, decoded strictly (every JSON output is valid UTF-8), read back."""
    run = subprocess.run([sys.executable, "-m", "bot.cli", *argv, "--format", "json",
                          "--config", str(config)], capture_output=True, cwd=ROOT, timeout=240,
                         check=False)
    assert run.returncode == 0, run.stderr.decode("utf-8", "replace")
    doc: dict[str, Any] = json.loads(run.stdout.decode("utf-8"))
    return doc

