"""A host that answers with an SSH version line, then garbage, is an unreachable cluster with
its reason, never a probe crash. Found by the hostile dry run: ``jobtables sweep`` against such
a port printed the cluster's detail as "probe error: ExceptionGroup('unhandled errors in a
TaskGroup', [PacketDecodeError('Incomplete packet')])" with a traceback on stderr (asyncssh
raises its ``PacketDecodeError``, a ``ValueError``, out of ``connect`` for an empty packet).
The fake peer is a real TCP server on port 0."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from probes.config import SlurmCluster
from probes.errors import UnreachableError
from probes.slurm.transport import SshRunner

GARBAGE = {
    "empty-packet": b"\x00\x00\x00\x04\x03\x00\x00\x00" * 64,
    "nul-flood": b"\x00" * 65536,
}


@pytest.fixture
async def peer(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    """A server sending a version line and then ``request.param``, on port 0."""
    payload: bytes = GARBAGE[request.param]
    serving: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            serving.add(task)  # type: ignore[arg-type]
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n" + payload)
        try:
            await writer.drain()
            await reader.read(1 << 16)
            await asyncio.sleep(30)
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    for task in serving:
        task.cancel()
    await asyncio.gather(*serving, return_exceptions=True)
    await server.wait_closed()


@pytest.mark.parametrize("peer", list(GARBAGE), indirect=True)
async def test_garbage_after_the_version_line_is_unreachable(peer: int, tmp_path: Path) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    known = tmp_path / "known_hosts"
    known.write_bytes(b"[127.0.0.1]:%d " % peer + key.export_public_key())
    cluster = SlurmCluster(name="garbage", host="127.0.0.1", port=peer,
                           known_hosts=str(known), client_keys=(), connect_timeout_s=5.0)
    runner = SshRunner(cluster)
    try:
        async with asyncio.timeout(20):
            with pytest.raises(UnreachableError, match=rf"127\.0\.0\.1:{peer}: .*SSH"):
                await runner.run(["true"])
    finally:
        await runner.aclose()
