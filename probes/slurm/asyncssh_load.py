"""asyncssh imported without its liboqs look-up where there is no liboqs to find.

Policy (issue 12): importing asyncssh runs ``ctypes.util.find_library`` for liboqs, which on
Linux runs ``ldconfig -p`` (then gcc, then ld) on the path of every cold ``jobtables sweep``;
this module answers that look-up at once where no such library can exist, and the real
look-up runs anywhere else. Every module of ours that uses asyncssh imports it from here.
"""

from __future__ import annotations

import contextlib
import os

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

__all__ = ["PacketDecodeError", "asyncssh"]
