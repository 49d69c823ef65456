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
no link, is not used; once checked it is used through its open descriptor only). A mark is
taken only when the locked file is still the one of its name (a process clearing it between
its creation and its lock would leave a lock on a removed file, marking nothing), and a stale
mark is removed only by a process holding its lock while it is still that name's file; a lock
refused for an instant (a process clearing the stale mark of the same path) is tried again.
When there are no marks this costs one directory open and ``listdir`` a process. Where any
of this is unavailable (no ``/dev/shm``, no ``fcntl``), nothing is marked and every path is
read, as before.

(Abstract-namespace sockets held by the stuck process were tried first: each check that
connected to one to learn its owner left a connection queued on it that nothing could accept,
and after 128 checks every check failed.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
import zlib
from typing import Dict, List, Optional  # noqa: UP035 - Python 3.7 on login nodes

try:
    import fcntl
except ImportError:  # not on POSIX: no marks
    fcntl = None  # type: ignore[assignment]

MARK_DIR = "/dev/shm/jobtables-hung-{uid}"
_MARKS_HELD: Dict[str, int] = {}  # noqa: UP006 - mark name -> its open file, locked until exit
_MARKS_KNOWN: Dict[str, bool] = {}  # noqa: UP006 - mark name -> a stuck read holds it
_MARKS_LOADED: List[bool] = [False]  # noqa: UP006 - whether the marks were read


def _mark_name(path: str) -> str:
    """A path's mark file name. hashlib costs ~10 ms to import; two CRCs (64 bits) name a
    path well enough: a clash skips a path only while a read elsewhere is stuck."""
    raw = path.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}"


def _mark_dir(create: bool) -> Optional[int]:  # noqa: UP045
    """The account's marks directory, opened, if it is the account's own (mode 0700, not a
    link). Marks are then reached through this descriptor only: what was checked is what is
    used, whatever becomes of the name meanwhile."""
    where = MARK_DIR.format(uid=os.geteuid())
    if create:
        with contextlib.suppress(OSError):
            os.mkdir(where, 0o700)
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
    try:
        fd = os.open(where, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() \
            or st.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TRIES = 50
_TRY_AGAIN_S = 0.004
"""A lock refused or a mark replaced is looked at again, for at most ~0.2 s: a process
clearing a stale mark holds its lock for an instant only (to see that none holds it, then
remove it); a mark still refused after that is held by a live process, a stuck read."""


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
    if name in _MARKS_HELD:
        return
    where = _mark_dir(create=True)
    if where is None:
        return
    try:
        fd = _lock_mark(where, name)
    finally:
        os.close(where)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, path.encode("utf-8", "surrogateescape") + b"\n")
        _MARKS_HELD[name] = fd


def _lock_mark(where: int, name: str) -> Optional[int]:  # noqa: UP045
    """The mark ``name`` in the directory ``where``, created if need be and locked: the
    descriptor, or ``None`` when a live process holds it (it marks the path) or it cannot be.
    A file removed between its open and its lock (by a process that found it unlocked) marks
    nothing: the name is opened again; so is one whose lock a remover holds for an instant."""
    for attempt in range(_TRIES):
        if attempt:
            time.sleep(_TRY_AGAIN_S)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600, dir_fd=where)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                return None
            continue
        if _is_named(fd, where, name):
            return fd
        os.close(fd)
    return None


def _is_named(fd: int, where: int, name: str) -> bool:
    """Whether the open file ``fd`` is still the one named ``name`` in ``where``."""
    try:
        opened = os.fstat(fd)
        named = os.stat(name, dir_fd=where, follow_symlinks=False)
    except OSError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _held(where: int, name: str) -> bool:
    """Whether a live process holds the mark ``name``. A mark none holds is removed, only
    while this process holds its lock and it is still the file of that name (a mark taken
    anew meanwhile is another file, and is looked at instead)."""
    for attempt in range(_TRIES):
        if attempt:
            time.sleep(_TRY_AGAIN_S)
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=where)
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            if _is_named(fd, where, name):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=where)  # its stuck read has ended
                return False
        finally:
            os.close(fd)
    return False


def _marks_known() -> Dict[str, bool]:  # noqa: UP006
    """The marks a stuck read holds (read once a process)."""
    if not _MARKS_LOADED[0]:
        _MARKS_LOADED[0] = True
        where = _mark_dir(create=False) if fcntl is not None else None
        if where is not None:
            try:
                with contextlib.suppress(OSError):
                    for name in os.listdir(where):
                        if _held(where, name):
                            _MARKS_KNOWN[name] = True
            finally:
                os.close(where)
    return _MARKS_KNOWN


def forget_marks() -> None:
    """Drop this process's own marks and what it read of the others' (an in-process caller
    whose stuck reads have ended: tests)."""
    while _MARKS_HELD:
        with contextlib.suppress(OSError):
            os.close(_MARKS_HELD.popitem()[1])
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
