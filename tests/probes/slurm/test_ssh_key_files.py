"""The roster's known_hosts and client key files are read bounded, and never quoted.

Replayed through ``jobtables sweep`` with an operator's slip in the config: ``known_hosts``
naming a secret file of another format (a shadow-style line) made asyncssh raise ValueError
'Invalid known hosts entry: root:$6$...' out of the probe (``probe crashed``, a traceback)
and that line of the secret became the cluster's detail, bound for JSON and Slack; naming
``/dev/zero`` or a FIFO, and a client key at ``/dev/zero``, blocked the event loop in
asyncssh's file read, so the sweep never ended (every other cluster lost with it). Each is
now the cluster's one-line unreachable reason, naming the file, never its contents.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from probes.errors import AuthError, HostKeyError
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv

SECRET = "root:$6$hos3cretMARKER$abc:19000:0:99999:7:::\n"


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "shadow"
    path.write_text(SECRET)
    return path


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("make", [_secret, _fifo, lambda _: Path("/dev/zero"),
                                  lambda tmp: tmp], ids=["secret", "fifo", "zero", "dir"])
async def test_a_known_hosts_that_is_none_is_a_host_key_error(
        slurm_env: SlurmEnv, tmp_path: Path, make: object) -> None:
    """Not a known_hosts file: a HostKeyError naming the path, at once, nothing quoted."""
    path = make(tmp_path)  # type: ignore[operator]
    async with asyncio.timeout(20):
        with pytest.raises(HostKeyError, match=rf"known_hosts {path}") as info:
            runner = SshRunner(slurm_env.cluster(known_hosts=str(path)))
            await runner.run(["true"])
    assert "MARKER" not in str(info.value)


@pytest.mark.parametrize("make", [_secret, _fifo, lambda _: Path("/dev/zero")],
                         ids=["secret", "fifo", "zero"])
async def test_a_client_key_that_is_none_is_an_auth_error(
        slurm_env: SlurmEnv, tmp_path: Path, make: object) -> None:
    """Not a private key: an AuthError naming the path, at once, nothing quoted."""
    path = make(tmp_path)  # type: ignore[operator]
    async with asyncio.timeout(20):
        runner = SshRunner(slurm_env.cluster(client_keys=(str(path),)))
        with pytest.raises(AuthError, match=rf"client key {path}") as info:
            await runner.run(["true"])
    assert "MARKER" not in str(info.value)


async def test_the_sweep_goes_on_past_them(slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """In one sweep beside a good cluster: each is unreachable with its reason, the good one
    ok, within the connect timeout."""
    probes = [SlurmProbe(slurm_env.cluster(name="good")),
              SlurmProbe(slurm_env.cluster(name="kh", known_hosts=str(_secret(tmp_path)))),
              SlurmProbe(slurm_env.cluster(name="zero", known_hosts="/dev/zero")),
              SlurmProbe(slurm_env.cluster(name="key", client_keys=("/dev/zero",)))]
    async with asyncio.timeout(30):
        facts = {f.name: f for f in await asyncio.gather(*(p.collect() for p in probes))}
    assert facts["good"].status == "ok"
    for name in ("kh", "zero", "key"):
        assert facts[name].status == "unreachable", facts[name]
        assert facts[name].detail and "MARKER" not in facts[name].detail
        assert "\n" not in facts[name].detail and "probe error" not in facts[name].detail


def _connect_in_thread(cluster: object) -> BaseException | None:
    """Run one command over a new connection on its own loop in a thread: the error it ended
    with (None on success), or TimeoutError when the thread was still blocked after 20 s (a
    blocked event loop is past ``asyncio.timeout``'s reach)."""
    import concurrent.futures

    async def run() -> None:
        await SshRunner(cluster).run(["true"])  # type: ignore[arg-type]

    def in_thread() -> BaseException | None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # handed to the test
            return exc
        return None

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(in_thread).result(timeout=20)
    except concurrent.futures.TimeoutError:
        return TimeoutError("the connect blocked")
    finally:
        pool.shutdown(wait=False)


@pytest.mark.parametrize("beside", ["-cert.pub", ".pub"])
def test_a_fifo_beside_the_client_key_blocks_nothing(
        slurm_env: SlurmEnv, tmp_path: Path, beside: str) -> None:
    """asyncssh, given a key's path, also reads ``<key>.pub`` and ``<key>-cert.pub`` itself,
    unbounded, in the event loop: a FIFO there blocked the sweep for ever (every cluster with
    it). The key is handed over read (bounded, a regular file), and a certificate beside it
    only when it is one: the connection is made, at once."""
    key = tmp_path / "id_ed25519"
    key.write_bytes(Path(slurm_env.key).read_bytes())
    key.chmod(0o600)
    fifo = Path(f"{key}{beside}")
    os.mkfifo(fifo)
    try:
        got = _connect_in_thread(slurm_env.cluster(client_keys=(str(key),)))
    finally:
        # Unblock a reader stuck on the FIFO (the failure case), so the test process ends.
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    assert got is None, repr(got)


def test_a_certificate_beside_the_key_is_still_offered(
        slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """A real OpenSSH certificate at ``<key>-cert.pub`` is loaded with its key (certificate
    logins keep working); a file there that is no certificate is passed over, as asyncssh and
    ssh do."""
    import asyncssh

    from probes.slurm.transport import client_key

    key = tmp_path / "id_ed25519"
    key.write_bytes(Path(slurm_env.key).read_bytes())
    ca = asyncssh.generate_private_key("ssh-ed25519")
    user = asyncssh.import_private_key(key.read_bytes())
    cert = ca.generate_user_certificate(user, "jobtables", principals=["jobtables"])
    Path(f"{key}-cert.pub").write_bytes(cert.export_certificate())
    loaded = client_key(str(key), "t")
    assert isinstance(loaded, tuple)
    assert loaded[1].public_data == cert.public_data
    assert loaded[0].public_data == user.public_data
    Path(f"{key}-cert.pub").write_text("not a certificate\n")
    assert client_key(str(key), "t").public_data == user.public_data  # type: ignore[union-attr]
