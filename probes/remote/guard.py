"""Reads on the login node: only what is the job's own, and never a read that hangs.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). Every user of a cluster controls their job's
StdOut path, workdir and the trees under it, so:

* A file is read only if it is a regular file owned by the job's user, judged on the opened
  descriptor (``O_NOFOLLOW`` then ``fstat``: no check-then-open race). A symlink as the last
  component is not followed; a FIFO, a socket or a device is refused (``O_NONBLOCK`` makes the
  open of a FIFO return at once); anything on the file systems of /proc, /sys or /dev is
  refused whatever path led there (device number of the opened descriptor), and so is a path
  that names them.
* A directory below a listing root is entered only through its parent's descriptor with
  ``O_NOFOLLOW``, so no symlink leads a listing out of the job's tree. A root that is itself a
  link (``{workdir}/checkpoints -> /scratch/$USER/run1/checkpoints``) is followed
  (:meth:`Guard.open_root`) only to a directory the job's user could list, nothing under
  /proc, /sys or /dev.
* Every open, read and listing runs under its own deadline (``SIGALRM`` from ``setitimer``:
  a hung NFS read or a blocking open is interrupted), capped by the whole request's deadline.
  A deadline only works in the main thread; elsewhere (in-process callers) there is none.
* A refusal or a timeout is an exception carrying the reason, which the collector reports for
  that one job (``failed``, i.e. fetch-failed with the reason) and goes on with the next.

Who may list a root's directory is judged by its mode bits or its POSIX access ACL, read by
``probes.remote.posix_acl`` (shipped in front of this source).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the C calls behind signal (see deadline)
import contextlib
import errno
import os
import pwd
import queue
import signal
import stat
import sys
import threading
import time
from typing import Any, Iterator  # noqa: UP035 - Python 3.7 on login nodes

# In-process the ACL reader is imported; shipped, its source is prepended and these lines are
# ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.hung_marks import hung_at
with contextlib.suppress(ImportError):
    from probes.remote.posix_acl import (
        _ACL_GROUP,
        _ACL_GROUP_OBJ,
        _ACL_OTHER,
        _ACL_USER,
        _ACL_USER_OBJ,
        _access_acl,
        _masked,
    )

FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))


class Refused(Exception):
    """A path that is not the job's to read (the message says why)."""


class Linked(Refused):
    """A symbolic link met where the guard follows none (a root may be: ``open_root``)."""


class Hung(Exception):
    """An operation that did not finish within its deadline."""


class StillStuck(Refused):
    """A path at or below one an earlier read is still stuck on (``hung_marks``): not touched,
    refused like any path that is not to be read."""


def _forbidden_devices() -> frozenset[int]:
    """Device numbers of the /proc, /sys and /dev file systems (where they are mounts)."""
    devices: set[int] = set()
    with contextlib.suppress(OSError):
        root = os.stat("/").st_dev
        for path in (*FORBIDDEN_ROOTS, "/dev/shm", "/dev/pts", "/dev/mqueue", "/sys/fs/cgroup"):
            with contextlib.suppress(OSError):
                dev = os.stat(path).st_dev
                if dev != root:  # never forbid the root file system itself
                    devices.add(dev)
    return frozenset(devices)


_FORBIDDEN_DEVICES = _forbidden_devices()


def forbidden_path(path: str) -> bool:
    """True for a path that names /proc, /sys, /dev or anything under them, once normalised."""
    norm = os.path.normpath("/" + path.lstrip("/")) if path.startswith("/") else ""
    return any(norm == r or norm.startswith(r + "/") for r in FORBIDDEN_ROOTS)


def resolve_uid(user: str | None) -> int | None:
    """The login node's uid for a user name; ``None`` when the name is unknown here."""
    if not user:
        return None
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, OSError):
        return None


GUARDED_OPS: dict[int, list[list[Any]]] = {}
"""Thread id -> ``[monotonic start, seconds, what, interrupted at]`` of each guarded operation
under way in a thread other than the main one, where no alarm can interrupt it: the readers
run so (:func:`supervised`) are interrupted by their watcher instead, and given up when an
operation stays stuck in the kernel past that, as a read on a hung mount does."""
_OPS_LOCK = threading.Lock()


_DELIVERED: dict[int, float] = {}
"""Thread id -> when an interruption (:class:`_Overran`) was last raised there: a thread that
ran it is running Python, not stuck in a call."""


class _Overran(Hung):
    """Raised in a reader thread by its watcher (:func:`supervised`); the guarded block it
    lands in says which operation overran (:meth:`deadline.__exit__`). Made in the thread it
    is raised in (an asynchronous exception is raised as a class), so it notes that there."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        _DELIVERED[threading.get_ident()] = time.monotonic()


def _interrupt(ident: int, exc: Any) -> bool:
    """Raise ``exc`` (a class; ``None`` takes back one not yet raised) in the thread ``ident``
    at its next Python instruction, as the alarm does in the main thread. False where ctypes
    is missing (a minimal Python on a login node): the watcher can then only give up."""
    try:
        import ctypes
        set_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    except (ImportError, AttributeError):
        return False
    return bool(set_exc(ctypes.c_ulong(ident), ctypes.py_object(exc) if exc else None))


class deadline:
    """Interrupt the block after ``seconds`` with :class:`Hung` (main thread only; in another
    thread the operation is listed in :data:`GUARDED_OPS` while it runs).

    A class, not a ``contextlib`` generator, and the C-level ``_signal`` calls, not
    ``signal``'s enum-converting wrappers: every open, read and listing of every job pays
    this (about 2,000 times a 256-job sweep), and the wrappers cost ~20 us a pair. The
    previous handler is still restored after each block."""

    __slots__ = ("_armed", "_previous", "seconds", "what")

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self._previous: Any = None
        self._armed = False

    def __enter__(self) -> None:
        if self.seconds <= 0:
            raise Hung(f"{self.what}: no time left in this sweep")
        if threading.current_thread() is not threading.main_thread():
            with _OPS_LOCK:
                GUARDED_OPS.setdefault(threading.get_ident(), []).append(
                    [time.monotonic(), self.seconds, self.what, False])
            return
        self._previous = _signal.signal(signal.SIGALRM, self._on_alarm)
        self._armed = True
        _signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        raise Hung(f"{self.what}: no answer within {self.seconds:g}s")

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            self._armed = False
            _signal.setitimer(signal.ITIMER_REAL, 0)
            _signal.signal(signal.SIGALRM, self._previous)
        elif self.seconds > 0 and threading.current_thread() is not threading.main_thread():
            with _OPS_LOCK:
                ops = GUARDED_OPS.get(threading.get_ident())
                op = ops.pop() if ops else None
                if op is not None and op[3]:
                    _interrupt(threading.get_ident(), None)  # not raised yet: never after
            if op is not None and op[3] and exc and isinstance(exc[1], _Overran):
                raise Hung(f"{self.what}: no answer within {self.seconds:g}s") from None


def _real_path(fd: int, path: str) -> str:
    """Where the open directory ``fd`` (opened as ``path``) really is."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _is_link(path: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


class Guard:
    """The read rules for one job: its owner's uid, a per-operation and a request deadline."""

    def __init__(self, uid: int | None, op_timeout_s: float,
                 until: float | None = None, user: str = "") -> None:
        self.uid = uid
        self.user = user
        self.op_timeout_s = op_timeout_s
        self.until = until
        self._gids: frozenset[int] | None = None
        self._reachable: dict[str, bool] = {}
        self.base: str | None = None
        """The last path opened by its own (absolute) name: what a read that gets stuck below
        it was reading (``probes.remote.hung_marks``)."""

    def _seconds(self) -> float:
        if self.until is None:
            return self.op_timeout_s
        return min(self.op_timeout_s, self.until - time.monotonic())

    def open(self, path: str, *, directory: bool = False,
             dir_fd: int | None = None) -> int:
        """An fd for ``path`` if it is the job's regular file (or directory); else raises."""
        if dir_fd is None and not path.startswith("/"):
            raise Refused(f"{path}: not an absolute path: not read")
        if dir_fd is None and forbidden_path(path):
            raise Refused(f"{path}: under /proc, /sys or /dev: not read")
        if self.uid is None:
            raise Refused(f"{path}: owner {self.user or '(none)'!r} unknown on this host:"
                          " not read")
        if dir_fd is None:
            self.base = path
            stuck = hung_at(path)
            if stuck is not None:  # another read waits there: it would only wait beside it
                raise StillStuck(f"{path}: not read: an earlier read of {stuck} is still"
                                 " stuck there (a hung mount?); read again once that one"
                                 " answers")
        flags = _OPEN_FLAGS | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
        with deadline(self._seconds(), f"open {path}"):
            try:
                fd = os.open(path, flags, dir_fd=dir_fd)
            except OSError as exc:
                # O_DIRECTORY on a symlink says ENOTDIR, not ELOOP: told apart by lstat (a
                # checkpoint root linked to scratch is not "not a directory").
                if exc.errno == errno.ELOOP or (directory and exc.errno == errno.ENOTDIR
                                                and _is_link(path, dir_fd)):
                    raise Linked(f"{path}: a symbolic link: not followed") from exc
                raise
        try:
            self._check(fd, path, directory)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_root(self, path: str) -> int:
        """A root (a checkpoint, trial or dump root, a base a logged dir is entered from)
        opened as a directory. A root that is itself a symbolic link (``{workdir}/checkpoints
        -> /scratch/$USER/run1/checkpoints``) is followed, as a workdir SLURM holds as a link
        is (``/.``: the opened directory's device is still checked), when its real path is
        nothing under /proc, /sys or /dev and the job's user could list it themselves
        (:meth:`may_list`); nothing below a root follows a link, and only the user's own
        files are read there. A dangling link is an absent root (``FileNotFoundError``).
        A root that is no link is opened only where that user could list it too: a job's log
        names roots of its own (a trials or dump dir on scratch), and the probe account may
        reach a teammate's private tree the job's user cannot."""
        try:
            fd = self.open(path, directory=True)
        except Linked:
            target = path.rstrip("/") + "/."
        else:
            try:
                if not self.may_list(fd, path):
                    raise Refused(f"{path}: a directory the job's user cannot list: not read")
            except BaseException:
                os.close(fd)
                raise
            return fd
        try:
            fd = self.open(target, directory=True)
        except Linked as exc:  # ELOOP: links leading to each other
            raise Refused(f"{path}: a symbolic link in a loop: not followed") from exc
        except Refused as exc:  # its target on /proc, /sys or /dev (the device)
            why = str(exc)[len(target) + 2:] if str(exc).startswith(target) else str(exc)
            raise Refused(f"{path}: a symbolic link to a directory {why}") from exc
        try:
            real = _real_path(fd, path)
            if forbidden_path(real):
                raise Refused(f"{path}: a symbolic link to {real}, under /proc, /sys or /dev:"
                              " not followed")
            if not self.may_list(fd, path):
                raise Refused(f"{path}: a symbolic link to a directory the job's user cannot"
                              " list: not followed")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _check(self, fd: int, path: str, directory: bool) -> None:
        st = os.fstat(fd)
        if st.st_dev in _FORBIDDEN_DEVICES:
            raise Refused(f"{path}: on /proc, /sys or /dev: not read")
        kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
        if not kind_ok:
            want = "a directory" if directory else "a regular file"
            raise Refused(f"{path}: not {want}: not read")
        if not directory and st.st_uid != self.uid:
            raise Refused(f"{path}: owned by uid {st.st_uid}: not owned by the job's user"
                          f" {self.user!r}: not read")

    def may_list(self, fd: int, path: str) -> bool:
        """Whether the job's user could list the open directory ``fd`` themselves: read and
        search on it, and search on every directory above its real path, as the kernel would
        judge that user: a POSIX access ACL where the directory has one (``setfacl``: a
        teammate's tree shared with, or closed to, one user), else the mode bits (owner,
        else group, else other). Other ACL kinds (NFSv4's) are not read: the mode bits then.

        For what the owner rule lets through from another owner (a save folder the log
        names): the bot's account may reach a teammate's private tree the job's user cannot,
        and what is listed there is not the job's to report."""
        if self.uid == 0:
            return True
        real = _real_path(fd, path)
        if not real.startswith("/"):
            return False
        with deadline(self._seconds(), f"permissions of {path}"):
            if not self._permits(os.fstat(fd), 0o5, fd):
                return False
            parent = os.path.dirname(real)
            while True:
                if parent not in self._reachable:
                    try:
                        self._reachable[parent] = self._permits(os.stat(parent), 0o1, parent)
                    except OSError:
                        self._reachable[parent] = False
                if not self._reachable[parent]:
                    return False
                if parent == "/":
                    return True
                parent = os.path.dirname(parent)

    def _permits(self, st: os.stat_result, bits: int, target: int | str) -> bool:
        """The ``bits`` (rwx as 0o7) are granted the job's user on ``target`` (an fd or a
        path, ``st`` its stat): by its access ACL (``_acl_permits``), else the mode's owner,
        group or other bits."""
        acl = _access_acl(target)
        if acl is not None:
            return self._acl_permits(acl, st, bits)
        if st.st_uid == self.uid:
            granted = st.st_mode >> 6
        elif st.st_gid in self._groups():
            granted = st.st_mode >> 3
        else:
            granted = st.st_mode
        return granted & bits == bits

    def _acl_permits(self, acl: list[tuple[int, int, int]], st: os.stat_result,
                     bits: int) -> bool:
        """The kernel's ACL check (``posix_acl_permission``): the owner's entry; else a
        named user's, masked; else any matching group entry (the owning group's or a named
        one) that grants ``bits``, masked, and none denied if some matched; else other's."""
        groups = self._groups()
        matched = False
        for index, (tag, perm, qualifier) in enumerate(acl):
            if tag == _ACL_USER_OBJ and st.st_uid == self.uid:
                return perm & bits == bits
            if tag == _ACL_USER and qualifier == self.uid:
                return _masked(acl, index, perm) & bits == bits
            if tag in (_ACL_GROUP_OBJ, _ACL_GROUP):
                if (st.st_gid if tag == _ACL_GROUP_OBJ else qualifier) in groups:
                    matched = True
                    if perm & bits == bits:
                        return _masked(acl, index, perm) & bits == bits
            elif tag == _ACL_OTHER:
                return not matched and perm & bits == bits
        return False

    def _groups(self) -> frozenset[int]:
        """The job's user's group ids on this host (none when the user is unknown here)."""
        if self._gids is None:
            gids: set[int] = set()
            with contextlib.suppress(KeyError, OSError):
                entry = pwd.getpwuid(self.uid) if self.uid is not None else None
                if entry is not None:
                    gids.update(os.getgrouplist(entry.pw_name, entry.pw_gid))
            self._gids = frozenset(gids)
        return self._gids

    def read(self, fd: int, start: int, limit: int, path: str) -> bytes:
        """Up to ``limit`` bytes from ``start`` of an opened file, under the deadline."""
        chunks: list[bytes] = []
        with deadline(self._seconds(), f"read {path}"):
            os.lseek(fd, start, os.SEEK_SET)
            left = limit
            while left > 0:
                data = os.read(fd, min(left, 1 << 20))
                if not data:
                    break
                chunks.append(data)
                left -= len(data)
        return b"".join(chunks)

    def stat_file(self, path: str, dir_fd: int | None = None) -> os.stat_result:
        """``fstat`` of the job's regular file at ``path`` (raises if it is not one)."""
        fd = self.open(path, dir_fd=dir_fd)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def read_small(self, path: str, limit: int,
                   dir_fd: int | None = None) -> tuple[bytes, float]:
        """``(first limit bytes, mtime)`` of the job's regular file."""
        fd = self.open(path, dir_fd=dir_fd)
        try:
            return self.read(fd, 0, limit, path), os.fstat(fd).st_mtime
        finally:
            os.close(fd)

    def list_dir(self, path: str, limit: int,
                 dir_fd: int | None = None) -> list[str]:
        """Sorted names in a directory (at most ``limit``), entered without following links."""
        fd = self.open(path, directory=True, dir_fd=dir_fd)
        try:
            names: list[str] = []
            with deadline(self._seconds(), f"list {path}"), os.scandir(fd) as it:
                for entry in it:
                    names.append(entry.name)
                    if len(names) >= limit:
                        break
            return sorted(names)
        finally:
            os.close(fd)

    def list_entries(self, path: str, limit: int,
                     root: bool = False) -> tuple[list[tuple[str, bool]], bool]:
        """``((name, is_dir) pairs sorted, cut)``: at most ``limit`` entries of a directory
        entered without following links (``root``: as :meth:`open_root` opens one); ``is_dir``
        never follows one either."""
        fd = self.open_root(path) if root else self.open(path, directory=True)
        try:
            out: list[tuple[str, bool]] = []
            cut = False
            with deadline(self._seconds(), f"list {path}"), os.scandir(fd) as it:
                for entry in it:
                    if len(out) >= limit:
                        cut = True
                        break
                    out.append((entry.name, entry.is_dir(follow_symlinks=False)))
            return sorted(out), cut
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def directory(self, path: str, dir_fd: int | None = None) -> Iterator[int]:
        """An open directory fd (for reads below it with ``dir_fd``), closed afterwards."""
        fd = self.open(path, directory=True, dir_fd=dir_fd)
        try:
            yield fd
        finally:
            os.close(fd)


STUCK_GRACE_S = 1.0
"""How long a guarded operation interrupted past its time may stay in its call before its read
is given up."""
STUCK: list[threading.Thread] = []
"""The readers given up on, stuck in a call the kernel does not interrupt."""


class _Reader:
    """A reader thread kept between reads (:func:`supervised`): starting a thread a job cost
    ~0.1 ms, 50 ms of a 500-job warm sweep's collector, where handing a read to one already
    running costs a tenth of that. One given up on (stuck) is never handed another read."""

    def __init__(self) -> None:
        self.calls: Any = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="job-reader", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            read, args, done, ready = self.calls.get()
            with _OPS_LOCK:  # no operation of the last read is under way: none is left listed
                GUARDED_OPS.pop(threading.get_ident(), None)
            try:
                done.append((True, read(*args)))
            except BaseException as exc:  # handed to the caller, as if raised there
                done.append((False, exc))
            ready.set()


_IDLE: list[_Reader] = []
"""Reader threads waiting for their next read (one, as reads are made one at a time)."""


def supervised(read: Any, args: tuple[Any, ...], until: float) -> Any:
    """``read(*args)`` in a reader thread (:class:`_Reader`), watched from here: a guarded
    operation past its time is interrupted with :class:`Hung` as the main thread's alarm would
    (that operation fails, the read goes on); one still in its call :data:`STUCK_GRACE_S`
    later, or a read past ``until`` (a monotonic time), is given up (:class:`Hung`) and its
    thread left where it is (the collector reads each job so, the deep probe each trial root
    and dump dir). A read on a hung hard NFS or Lustre mount (or a FUSE one whose daemon
    stopped answering) waits in the kernel in a state no signal but SIGKILL ends, where the
    guard's alarm cannot reach it: read in the caller's thread, it held every later read, and
    the answer never came."""
    reader = _IDLE.pop() if _IDLE else _Reader()
    ident = reader.thread.ident or 0
    done: list[tuple[bool, Any]] = []  # local annotations are never evaluated
    ready = threading.Event()
    reader.calls.put((read, args, done, ready))
    while True:
        ready.wait(0.25)
        if done:
            _IDLE.append(reader)
            ok, value = done[0]
            if ok:
                return value
            raise value
        now = time.monotonic()
        with _OPS_LOCK:
            ops = GUARDED_OPS.get(ident) or []
            op = ops[-1] if ops else None
            if op is not None and not op[3] and now - op[0] > op[1]:
                # Past its time: interrupted as the alarm would, if it is running Python.
                _interrupt(ident, _Overran)
                op[3] = now
        if op is not None and op[3] and now - op[3] > STUCK_GRACE_S and \
                _DELIVERED.get(ident, 0.0) < op[3]:
            # Still in it: stuck in a call only the kernel can end.
            STUCK.append(reader.thread)
            raise Hung(f"{op[2]}: no answer within {op[1]:g}s (a read stuck in the kernel:"
                       " a hung mount?)")
        if now > until + STUCK_GRACE_S:
            STUCK.append(reader.thread)
            raise Hung(f"the request's deadline passed while reading ({now - until:.0f}s"
                       " over)")


def leave_if_stuck() -> None:
    """Exit at once, the answer written, when a reader is stuck: a process exits only
    once every thread has, so the output is closed first (the reader on the other end sees
    its end; ``probes.slurm.transport`` waits no more than briefly for an exit status
    then)."""
    if not any(reader.is_alive() for reader in STUCK):
        return
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    os._exit(0)
