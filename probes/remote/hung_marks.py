"""Paths a stuck read left behind: never touched again while that read still waits.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped before
``guard`` in the collector and the deep probe's reader, see ``probes.remote.script``). A read
stuck in the kernel on a hung mount (a hard NFS or Lustre mount whose server went away) keeps
its process on the login node until the mount answers: no signal ends it. Each sweep is a new
process; had each touched the same path, each would have left one more stuck process there,
every sweep, for as long as the mount hung.

So a process that gives a read up (:func:`mark_hung`) creates a file named for the path it was
reading in :data:`MARK_DIR` (``/dev/shm``: local memory, never itself a hung mount; a
directory of the account's own, mode 0700) and holds an exclusive ``flock`` on it for as long
as it lives: as long as the stuck read waits. A later process (:func:`hung_at`) does not touch
a path at or below one whose mark is still locked; the kernel drops the lock with the
process, so the path is read again once the mount has answered the stuck read, and that
process removes the mark. Only the account can write in its directory: another user cannot
plant a mark to hide a path (a directory of that name that is not the account's own, 0700 and
no link, is not used). When there are no marks this costs one ``listdir`` a process. Where any
of this is unavailable (no ``/dev/shm``, no ``fcntl``), nothing is marked and every path is
read, as before.

(Abstract-namespace sockets held by the stuck process were tried first: each check that
connected to one to learn its owner left a connection queued on it that nothing could accept,
and after 128 checks every check failed.)
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import zlib
from typing import Any, Dict, List, Optional  # noqa: UP035 - Python 3.7 on login nodes

try:
    import fcntl
except ImportError:  # not on POSIX: no marks
    fcntl = None  # type: ignore[assignment]

MARK_DIR = "/dev/shm/jobtables-hung-{uid}"
_MARKS_HELD: List[Any] = []  # noqa: UP006 - the marks' open files, locked until the process ends
_MARKS_KNOWN: Dict[str, bool] = {}  # noqa: UP006 - mark name -> a stuck read holds it
_MARKS_LOADED: List[bool] = [False]  # noqa: UP006 - whether the marks were read


def _mark_name(path: str) -> str:
    """A path's mark file name. hashlib costs ~10 ms to import; two CRCs (64 bits) name a
    path well enough: a clash skips a path only while a read elsewhere is stuck."""
    raw = path.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}"


def _mark_dir(create: bool) -> Optional[str]:  # noqa: UP045
    """The account's marks directory, if it is the account's own (0700, no link)."""
    where = MARK_DIR.format(uid=os.geteuid())
    if create:
        with contextlib.suppress(OSError):
            os.mkdir(where, 0o700)
    try:
        st = os.lstat(where)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return where


def mark_hung(path: str) -> None:
    """Mark ``path`` (absolute) hung for as long as this process lives, and the mount it lies
    on (:func:`mount_of`): a server that stopped answering one path answers none of them, and
    each other job's path there would cost a read timeout and one more stuck read."""
    if not path.startswith("/") or fcntl is None:
        return
    norm = os.path.normpath(path)
    mount = mount_of(norm)
    for marked in (norm, mount) if mount not in (None, "/", norm) else (norm,):
        _mark_one(str(marked))


def mount_of(path: str) -> Optional[str]:  # noqa: UP045
    """The mount point ``path`` lies on, from ``/proc/self/mountinfo`` (read, never the path
    itself: that would wait too); ``None`` where it cannot be read."""
    best = None
    with contextlib.suppress(OSError, UnicodeDecodeError), \
            open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            fields = line.split(" ")
            if len(fields) < 5:
                continue
            point = _MOUNTINFO_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
            inside = point in ("/", path) or path.startswith(point.rstrip("/") + "/")
            if inside and (best is None or len(point) > len(best)):
                best = point
    return best


_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")
"""mountinfo's escapes: a space, tab, newline or backslash in a mount point as ``\\ooo``."""


def _mark_one(path: str) -> None:
    name = _mark_name(path)
    _marks_known()[name] = True
    where = _mark_dir(create=True)
    if where is None:
        return
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.path.join(where, name), flags, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another stuck read already holds it: that one marks it
        os.close(fd)
        return
    with contextlib.suppress(OSError):
        os.write(fd, path.encode("utf-8", "surrogateescape") + b"\n")
    _MARKS_HELD.append(fd)


def _held(where: str, name: str) -> bool:
    """Whether a live process holds the mark ``name``; a mark none holds is removed."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.path.join(where, name), flags)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(where, name))  # its stuck read has ended
        return False
    finally:
        os.close(fd)


def _marks_known() -> Dict[str, bool]:  # noqa: UP006
    """The marks a stuck read holds (read once a process)."""
    if not _MARKS_LOADED[0]:
        _MARKS_LOADED[0] = True
        where = _mark_dir(create=False) if fcntl is not None else None
        if where is not None:
            with contextlib.suppress(OSError):
                for name in os.listdir(where):
                    if _held(where, name):
                        _MARKS_KNOWN[name] = True
    return _MARKS_KNOWN


def forget_marks() -> None:
    """Drop this process's own marks and what it read of the others' (an in-process caller
    whose stuck reads have ended: tests)."""
    while _MARKS_HELD:
        with contextlib.suppress(OSError):
            os.close(_MARKS_HELD.pop())
    _MARKS_KNOWN.clear()
    _MARKS_LOADED[0] = False


def hung_at(path: str) -> Optional[str]:  # noqa: UP045
    """The path at or above ``path`` (absolute) a stuck read still waits on, if any."""
    known = _marks_known()
    if not known or not path.startswith("/"):
        return None
    at = os.path.normpath(path)
    while True:
        if _mark_name(at) in known:
            return at
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent
