"""Transport faults on the real daemons: that cluster unreachable with the reason, the other
cluster's report whole, and the next sweep recovers by itself.

Each sweep covers two clusters: the real SLURM over SSH, and the bundled replay recording (the
"other" cluster, which needs none of the daemons that fail). The faults: sshd killed in the
middle of the collector's answer, the connection reset mid-answer (both through a loopback
TCP proxy that fires once), slurmctld stopped, munge stopped. The stopped daemons are
restarted in a ``finally`` and ``bash scripts/services`` is re-run, so the outage lasts
seconds (other engineers share the cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING
from bot.config import Config
from bot.sweep import Sweeper
from probes.config import ReplayCluster
from report.models import Report
from tests.probes.slurm.conftest import SlurmEnv

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slurm


class FaultProxy:
    """Forwards loopback TCP to the test sshd; ``arm(kind)`` faults the next answer once,
    64 KiB into what the server sends after the client uploaded the collector script."""

    def __init__(self, port: int) -> None:
        self._port = port
        self.kind: str | None = None
        self.fired: list[str] = []
        self.server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def listen_port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def aclose(self) -> None:
        """Stop listening and end every forwarding task (none is left running)."""
        assert self.server is not None
        self.server.close()
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._port)
        sport = up_writer.get_extra_info("sockname")[1]
        sent = [0]

        async def upstream() -> None:
            while data := await reader.read(65536):
                sent[0] += len(data)
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downstream() -> None:
            answered = 0
            while data := await up_reader.read(65536):
                if sent[0] > 20000:
                    answered += len(data)
                if self.kind and answered > 65536:
                    await self._fault(self.kind, sport, writer, up_writer)
                    return
                writer.write(data)
                await writer.drain()
            writer.close()

        try:
            with contextlib.suppress(OSError, ConnectionError):
                await asyncio.gather(upstream(), downstream())
        finally:
            writer.close()
            up_writer.close()

    async def _fault(self, kind: str, sport: int, writer: asyncio.StreamWriter,
                     up_writer: asyncio.StreamWriter) -> None:
        self.kind = None
        self.fired.append(kind)
        if kind == "kill-sshd":
            for pid in _sshd_pids(sport):  # the sshd processes serving this one connection
                os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.5)
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # linger 0: the client sees a TCP reset
        up_writer.close()


def _sshd_pids(client_port: int) -> list[int]:
    out = subprocess.run(["ss", "-tnpH", "state", "established",
                          f"( sport = :2222 and dport = :{client_port} )"],
                         capture_output=True, text=True, check=True).stdout
    pids = sorted({int(p) for p in re.findall(r"pid=(\d+)", out)})
    assert pids, f"no sshd for client port {client_port}: {out!r}"
    return pids


def _config(env: SlurmEnv, port: int) -> Config:
    known_hosts = env.known_hosts
    if port != env.port:  # through the proxy: the same host key, listed for its port
        key = Path(env.known_hosts).read_text().split(maxsplit=1)[1]
        path = Path(f"/tmp/jt-faults-known-hosts-{port}")
        path.write_text(f"[127.0.0.1]:{port} {key}")
        known_hosts = str(path)
    faulty = env.cluster(name="faulty", port=port, command_timeout_s=20.0, timeout_s=40.0,
                         connect_timeout_s=5.0, recent_hours=1.0, known_hosts=known_hosts)
    return Config(clusters=(faulty, ReplayCluster(name="demo", path=str(DEMO_RECORDING))))


async def _sweep(sweeper: Sweeper) -> Report:
    return (await sweeper.sweep()).report


def _status(report: Report, name: str) -> tuple[str, str | None]:
    (cluster,) = [c for c in report.clusters if c.name == name]
    return cluster.status, cluster.detail


def _demo_whole(report: Report) -> None:
    assert _status(report, "demo")[0] == "ok"
    assert sum(j.cluster == "demo" for j in report.jobs) >= 5


@pytest.fixture(scope="module")
def big_log_job(slurm_env: SlurmEnv) -> Iterator[str]:
    """A job of the SSH user whose log is 2 MB: the collector's answer takes a while."""
    tag = secrets.token_hex(3)
    workdir = Path(slurm_env.scratch) / f"faults-{tag}"
    workdir.mkdir()
    script = workdir / "big.sh"
    script.write_text("#!/bin/bash\nfor i in $(seq 1 40000); do\n"
                      "  echo \"step $i loss 0.5 entropy 1.0 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n"
                      "done\nsleep 600\n")
    subprocess.run(["chown", "-R", f"{slurm_env.user}:", str(workdir)], check=True)
    run = subprocess.run(
        ["sbatch", "--parsable", f"--uid={slurm_env.user}", "-J", f"rl-big-{tag}", "--chdir",
         str(workdir), "--time=10", str(script)],
        capture_output=True, text=True, check=True, timeout=60)
    job_id = run.stdout.strip()
    log = workdir / f"slurm-{job_id}.out"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or log.stat().st_size < 2_000_000):
        time.sleep(0.5)
    assert log.exists() and log.stat().st_size >= 2_000_000
    yield job_id
    subprocess.run(["scancel", job_id], check=False, timeout=60)
    subprocess.run(["rm", "-rf", "--", str(workdir)], check=False, timeout=60)


@contextlib.asynccontextmanager
async def _proxy_sweeper(env: SlurmEnv) -> AsyncIterator[tuple[FaultProxy, Sweeper]]:
    proxy = FaultProxy(env.port)
    await proxy.start()
    sweeper = Sweeper(lambda: _config(env, proxy.listen_port))
    try:
        yield proxy, sweeper
    finally:
        await sweeper.aclose()
        await proxy.aclose()


@pytest.mark.parametrize("kind", ["kill-sshd", "reset"])
async def test_connection_lost_mid_answer(slurm_env: SlurmEnv, big_log_job: str,
                                          kind: str) -> None:
    """sshd killed / the connection reset in the middle of the answer: unreachable with the
    reason, the replay cluster whole; the next sweep is ok and sees the job."""
    async with _proxy_sweeper(slurm_env) as (proxy, sweeper):
        proxy.kind = kind
        faulted = await _sweep(sweeper)
        assert proxy.fired == [kind]
        status, detail = _status(faulted, "faulty")
        assert status == "unreachable" and detail is not None
        assert f"127.0.0.1:{proxy.listen_port}" in detail
        assert "connection lost" in detail or "disconnected" in detail.lower(), detail
        _demo_whole(faulted)
        recovered = await _sweep(sweeper)
    assert _status(recovered, "faulty") == ("ok", None)
    assert any(j.cluster == "faulty" and j.job_id == big_log_job for j in recovered.jobs)
    _demo_whole(recovered)


def _stop(pidfile: str) -> None:
    pid = int(Path(pidfile).read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status")
        # Gone, or a zombie (nothing reaps it here): either way it serves nothing.
        if not status.exists() or "\nState:\tZ" in status.read_text():
            return
        time.sleep(0.1)


def _services() -> None:
    subprocess.run(["bash", str(ROOT / "scripts" / "services")], check=True, timeout=300,
                   capture_output=True)


@pytest.mark.parametrize(("daemon", "pidfile", "reason"), [
    ("slurmctld", "/run/slurmctld.pid", "slurmctld"),
    ("munge", "/run/munge/munged.pid", "munge"),
])
async def test_daemon_stopped(slurm_env: SlurmEnv, big_log_job: str, daemon: str,
                              pidfile: str, reason: str) -> None:
    """slurmctld or munged stopped: unreachable naming why, replay whole, then recovered."""
    sweeper = Sweeper(lambda: _config(slurm_env, slurm_env.port))
    try:
        started = time.monotonic()
        try:
            _stop(pidfile)
            faulted = await _sweep(sweeper)
        finally:
            _services()  # restart whatever was stopped (idempotent), at once
        print(f"\n{daemon} outage: {time.monotonic() - started:.1f}s")
        status, detail = _status(faulted, "faulty")
        assert status == "unreachable" and detail is not None
        assert reason in detail.lower(), detail
        _demo_whole(faulted)
        recovered = await _sweep(sweeper)
        assert _status(recovered, "faulty") == ("ok", None)
        assert any(j.job_id == big_log_job for j in recovered.jobs)
    finally:
        await sweeper.aclose()
