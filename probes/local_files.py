"""Files an operator names on the bot's own machine (SSH keys, known_hosts, kubeconfig).

Their libraries (asyncssh, kubernetes_asyncio) read a path whole and synchronously, in the
event loop: a FIFO or a device named by mistake (``/dev/zero``) would block every cluster's
sweep for ever. So each is first opened ``O_NONBLOCK`` (a FIFO's open returns at once), must be
a regular file of at most ``limit`` bytes, and is read bounded. The errors say what is wrong
and never quote the content: an operator's slip may name a secret file.
"""

from __future__ import annotations

import os
import stat

MAX_CREDENTIAL_BYTES = 16 << 20
"""A key, known_hosts or kubeconfig file is read up to this (a large known_hosts, a
kubeconfig with embedded certificates: a few MB at most)."""

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _checked(fd: int, limit: int) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    if info.st_size > limit:
        raise ValueError(f"larger than {limit} bytes")


def check_regular(path: str, limit: int = MAX_CREDENTIAL_BYTES) -> None:
    """Raise ``OSError`` (``FileNotFoundError`` when absent) or ``ValueError`` saying why
    ``path`` is no regular file of at most ``limit`` bytes; nothing is read."""
    fd = os.open(path, _FLAGS)
    try:
        _checked(fd, limit)
    finally:
        os.close(fd)


def read_regular(path: str, limit: int = MAX_CREDENTIAL_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (one that grows while read is
    cut at the bound and refused); raises as :func:`check_regular` does."""
    fd = os.open(path, _FLAGS)
    with os.fdopen(fd, "rb") as fh:
        _checked(fd, limit)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def refusal(exc: OSError | ValueError) -> str:
    """Why :func:`check_regular` or :func:`read_regular` refused a file, in a few words (the
    OS's for an ``OSError``: ``No such file or directory``), never its content."""
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)
