"""Paths a stuck read left behind: never touched again while that read still waits.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped before
``guard`` in the collector and the deep probe's reader, see ``probes.remote.script``). A read
stuck in the kernel on a hung mount (a hard NFS or Lustre mount whose server went away) keeps
its process on the login node until the mount answers: no signal ends it. Each sweep is a new
process; had each touched the same path, each would have left one more stuck process there,
every sweep, for as long as the mount hung.

So a process that gives a read up (:func:`mark`) binds a Linux abstract-namespace socket named
for the path it was reading, under the account's uid, and holds it for as long as it lives:
as long as the stuck read waits. A later process (:func:`hung_at`) does not touch a path at or
below a marked one; the kernel drops the mark with the process, so the path is read again
once the mount has answered the stuck read. No file is written anywhere; the marks cost one
``connect`` a process when there is none (the account's umbrella mark, :func:`_umbrella`), and
a mark counts only when its socket is the account's own (``SO_PEERCRED``): another user cannot
plant one to hide a path. Where any of this is unavailable (not Linux), nothing is marked and
every path is read, as before.
"""

from __future__ import annotations

import _socket  # socket's C module: ~1 ms less to import
import contextlib
import os
import struct
import zlib
from typing import Any, Dict, List, Optional  # noqa: UP035 - Python 3.7 on login nodes

_MARK_PREFIX = "jobtables-hung:"
_MARKS_HELD: List[Any] = []  # noqa: UP006 - the marks' sockets, held until the process ends
_MARKS_KNOWN: Dict[str, Optional[bool]] = {}  # noqa: UP006, UP045 - name -> the account's? (None: unasked)
_MARKS_LOADED: List[bool] = [False]  # noqa: UP006 - whether the marks were read


def _mark_name(path: Optional[str] = None) -> str:  # noqa: UP045
    """The abstract name (without its leading NUL) of the account's umbrella mark, or of a
    path's."""
    base = f"{_MARK_PREFIX}{os.geteuid()}"
    if path is None:
        return base
    # hashlib costs ~10 ms to import; two CRCs (64 bits) name a path well enough: a clash
    # skips a path only while a read elsewhere is stuck
    raw = path.encode("utf-8", "surrogateescape")
    return f"{base}:{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}"


def _bind_mark(name: str) -> None:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.bind(b"\0" + name.encode())
        sock.listen(128)
    except OSError:
        sock.close()  # already held (by an earlier stuck process): that one marks it
        return
    _MARKS_HELD.append(sock)


def mark_hung(path: str) -> None:
    """Mark ``path`` (absolute) hung for as long as this process lives."""
    if not path.startswith("/") or not hasattr(_socket, "AF_UNIX"):
        return
    norm = os.path.normpath(path)
    with contextlib.suppress(OSError, ValueError):
        _bind_mark(_mark_name())
        _bind_mark(_mark_name(norm))
    _marks_known()[_mark_name(norm)] = True


def _mark_owned(name: str) -> bool:
    """Whether the socket bound at ``name`` is held by a process of this account."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.connect(b"\0" + name.encode())
        creds = sock.getsockopt(_socket.SOL_SOCKET, getattr(_socket, "SO_PEERCRED", 17),
                                struct.calcsize("3i"))
        return bool(struct.unpack("3i", creds)[1] == os.geteuid())
    except OSError:
        return False
    finally:
        sock.close()


def _marks_known() -> Dict[str, Optional[bool]]:  # noqa: UP006, UP045
    """The marked names the account holds (read once a process: none unless the umbrella
    mark is there and the account's)."""
    if not _MARKS_LOADED[0]:
        _MARKS_LOADED[0] = True
        if hasattr(_socket, "AF_UNIX") and _mark_owned(_mark_name()):
            prefix = "@" + _mark_name() + ":"
            with contextlib.suppress(OSError), open("/proc/net/unix", "rb") as table:
                for line in table.read().decode("ascii", "replace").splitlines():
                    name = line.rsplit(" ", 1)[-1]
                    if name.startswith(prefix):
                        _MARKS_KNOWN.setdefault(name[1:], None)  # asked when a path meets it
    return _MARKS_KNOWN


def hung_at(path: str) -> Optional[str]:  # noqa: UP045
    """The path at or above ``path`` (absolute) a stuck read still waits on, if any."""
    known = _marks_known()
    if not known or not path.startswith("/"):
        return None
    at = os.path.normpath(path)
    while True:
        name = _mark_name(at)
        if name in known:
            if known[name] is None:
                known[name] = _mark_owned(name)
            if known[name]:
                return at
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent
