"""A cluster entry naming no ``client_keys`` logs in as ssh would: the agent's keys, then the
default ``~/.ssh/id_*`` keys; those files are read bounded, as a configured key is.

Replayed through ``jobtables sweep`` (the hostile dry run) with no ``client_keys`` and
``~/.ssh/id_ed25519`` a FIFO: asyncssh read its default keys by path in an executor thread,
which blocked on the FIFO for ever. The sweep printed the cluster as 'connect timed out after
15s' (not why) and the process never exited (the interpreter waits for that thread). Each
run here is a fresh interpreter, as the CLI is, bounded by a timeout: it must log in (or say
why not) and exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.probes.slurm.conftest import SlurmEnv

ROOT = Path(__file__).resolve().parents[3]

LOGIN = """
import asyncio, json, sys
from probes.config import SlurmCluster
from probes.errors import ProbeError
from probes.slurm.transport import SshRunner
cluster = SlurmCluster(**json.loads(sys.argv[1]))
async def main():
    runner = SshRunner(cluster)
    try:
        result = await runner.run(["id", "-un"], check=False)
        return {"out": result.stdout.strip()}
    except ProbeError as exc:
        return {"error": str(exc)}
    finally:
        await runner.aclose()
print(json.dumps(asyncio.run(main())))
"""


def _login(env: SlurmEnv, home: Path, agent: str | None = None) -> dict[str, str]:
    """A login with no ``client_keys``, HOME ``home``, the agent at ``agent`` (or none), in a
    fresh interpreter that must exit within the bound."""
    cluster = {"name": "dflt", "host": env.host, "port": env.port, "user": env.user,
               "known_hosts": env.known_hosts, "connect_timeout_s": 10.0,
               "command_timeout_s": 20.0}
    child_env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    child_env["HOME"] = str(home)
    if agent is not None:
        child_env["SSH_AUTH_SOCK"] = agent
    done = subprocess.run([sys.executable, "-c", LOGIN, json.dumps(cluster)], cwd=ROOT,
                          env=child_env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _home(tmp_path: Path, env: SlurmEnv, *, key_as: str | None) -> Path:
    """A HOME whose ``.ssh`` holds the test key as ``key_as`` (or none), and FIFOs where
    ssh looks for other default keys and certificates."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    for name in ("id_ed25519", "id_rsa-cert.pub", "id_ecdsa", "id_ed25519-cert.pub"):
        if name != key_as:
            os.mkfifo(ssh / name)
    if key_as is not None:
        shutil.copy(env.key, ssh / key_as)
        (ssh / key_as).chmod(0o600)
    return ssh.parent


@pytest.mark.slurm
def test_default_key_files_that_are_fifos_neither_hang_nor_block_the_login(
        slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """FIFOs among the default key files are passed over; the real default key logs in."""
    home = _home(tmp_path, slurm_env, key_as="id_rsa")
    assert _login(slurm_env, home) == {"out": slurm_env.user}


@pytest.mark.slurm
def test_no_readable_default_key_is_an_auth_error_at_once(
        slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """Only FIFOs and no agent: refused authentication, said as such (not a timeout)."""
    home = _home(tmp_path, slurm_env, key_as=None)
    answer = _login(slurm_env, home)
    assert "authentication refused" in answer.get("error", ""), answer


@pytest.mark.slurm
def test_the_agent_logs_in_when_no_key_file_can(slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """ssh-agent holding the key, the default key files FIFOs: the agent's key logs in."""
    home = _home(tmp_path, slurm_env, key_as=None)
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        subprocess.run(["ssh-add", slurm_env.key], env={**os.environ,
                       "SSH_AUTH_SOCK": str(sock)}, capture_output=True, check=True, timeout=20)
        assert _login(slurm_env, home, agent=str(sock)) == {"out": slurm_env.user}
    finally:
        agent.terminate()
        agent.wait(timeout=20)


async def test_an_agent_that_never_answers_is_no_agent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$SSH_AUTH_SOCK`` a socket that accepts and never answers: no agent keys within the
    agent's own bound, so the login goes on with the key files (the connect timeout is not
    spent on it, nor named for it)."""
    import asyncio

    from probes.slurm import ssh_auth

    served: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(writer)

    sock = tmp_path / "agent.sock"
    server = await asyncio.start_unix_server(silent, path=str(sock))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
    monkeypatch.setattr(ssh_auth, "AGENT_TIMEOUT_S", 0.2)
    try:
        async with asyncio.timeout(10):
            agent, keys = await ssh_auth._agent_keys()
        assert (agent, keys) == (None, [])
    finally:
        for writer in served:
            writer.close()
        server.close()
        await server.wait_closed()
