"""What an SSH connection to a login node is checked and authenticated with.

Policy: host keys are always checked against ``known_hosts`` (the cluster's, else
``~/.ssh/known_hosts``); a missing or unreadable file, or one that is no known_hosts file, is a
:class:`HostKeyError` that never quotes its lines. Client keys (named ones, else ssh's default
``~/.ssh/id_*``, with their ``-cert.pub`` certificates) are read here, bounded, as regular
files, never handed to asyncssh as paths; the ssh-agent is asked first, within
:data:`AGENT_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any, TypeAlias

from probes.config import SlurmCluster
from probes.errors import AuthError, HostKeyError
from probes.local_files import read_regular, refusal
from probes.slurm.asyncssh_load import asyncssh


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
