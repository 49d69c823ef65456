"""A recording directory's files, read and written safely: shared by both wings' recordings.

Policy (``probes/slurm/replay.py`` and ``probes/kubernetes/replay.py`` document the two
formats): a recording travels (a bug report), so its files are read as data from someone
else. Each is opened below the directory's own descriptor with ``O_NOFOLLOW``: a symbolic link
inside it is refused, never followed (the directory itself may be a link). A file that is not
a regular file (a FIFO, a device, a directory) or is larger than the caller's bound is refused
before it is read; a file that is not UTF-8 or not JSON names itself. Each is a
:class:`CommandError` the replay reports as its cluster's ``unreachable`` detail.

A recording holds other users' job names, paths and log tails, so it is written for its owner
only: the directory 0700, each file 0600, every file opened below the directory's descriptor
with ``O_NOFOLLOW`` (a symlink planted inside DIR is refused, never written through). A
non-empty DIR that is not a recording (no ``cluster.json`` of this format) is refused before
anything connects. Re-recorded in place, the recording files this one does not write are
removed (an earlier recording's, of either kind, would replay as this one's).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probes.errors import CommandError, ProbeError

RECORDING_FILES = frozenset({
    "cluster.json",
    "squeue.json", "scontrol.txt", "collected.json", "sacct.json",  # SLURM
    "jobs.json", "jobsets.json", "pytorchjobs.json", "rayjobs.json",
    "tfjobs.json", "mpijobs.json", "pods.json",  # Kubernetes
    "logs.json",
})
"""Every fixed file name a recording of either kind may hold."""
LOG_FILE = re.compile(r"log-[0-9]{4,6}\.txt")
"""A Kubernetes recording's pod log file (one per log read, numbered)."""


class RecordingRefused(ProbeError):
    """DIR cannot safely hold a recording (the message says why)."""


# -- reading -----------------------------------------------------------------------------------


def open_recording(root: Path) -> int:
    """The recording directory's descriptor (the path may be a link to it)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise CommandError(f"{root}: no such recording directory") from exc


def read_text(root_fd: int, name: str, limit: int) -> str | None:
    """The text of the recording's file ``name`` (``None`` when absent), read as the module
    policy says: no link followed, only a regular file, at most ``limit`` bytes."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CommandError(f"recording file {name} is a symbolic link: not followed (a "
                               "recording's files are its own)") from exc
        raise CommandError(f"recording file {name} is unreadable: {exc.strerror}") from exc
    try:
        data = _read_bounded(fd, name, limit)
    except OSError as exc:
        raise CommandError(f"recording file {name} is unreadable: {exc.strerror}") from exc
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"recording file {name} is not UTF-8 text: {exc}") from exc


def _read_bounded(fd: int, name: str, limit: int) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise CommandError(f"recording file {name} is not a regular file")
    if info.st_size > limit:
        raise CommandError(f"recording file {name} is {info.st_size} bytes, over the "
                           f"{limit} a recording file may hold")
    chunks: list[bytes] = []
    size = 0
    while size <= limit:  # a file that grows while read is bounded too
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise CommandError(f"recording file {name} grew past the {limit} bytes a "
                           "recording file may hold")
    return b"".join(chunks)


def read_json(root_fd: int, name: str, limit: int) -> Any:
    """The recording's JSON file ``name``; absent or not JSON: :class:`CommandError`."""
    text = read_text(root_fd, name, limit)
    if text is None:
        raise CommandError(f"recording is missing {name}")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CommandError(f"recording file {name} is unreadable: {exc}") from exc


# -- writing -----------------------------------------------------------------------------------


def check_dest(dest: Path) -> None:
    """Refuse a DIR that is a symlink, not a directory, or non-empty and not a recording, and
    one that does not exist where none can be made (its nearest existing ancestor no
    directory this process may write in): said before the sweep, not after it."""
    if dest.is_symlink():
        raise RecordingRefused(f"{dest} is a symbolic link: not written through")
    if not dest.exists():
        _check_creatable(dest)
        return
    if not dest.is_dir():
        raise RecordingRefused(f"{dest} exists and is not a directory")
    if any(dest.iterdir()) and not _is_recording(dest / "cluster.json"):
        raise RecordingRefused(f"{dest} is not empty and is not a recording: refusing to"
                               " write into it")


def _check_creatable(dest: Path) -> None:
    ancestor = next((p for p in Path(os.path.abspath(dest)).parents if p.exists()), None)
    if ancestor is None:
        return
    if not ancestor.is_dir():
        raise RecordingRefused(f"cannot create {dest}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise RecordingRefused(f"cannot create {dest}: {ancestor} is not writable")


def _is_recording(path: Path) -> bool:
    try:
        meta = json.loads(path.read_text(encoding="utf-8")) if not path.is_symlink() else None
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == 1 and "recorded_at" in meta


def write_files(dest: Path, files: Mapping[str, str]) -> None:
    """Write one recording's ``files`` (name -> text) into DIR, each 0600, and remove the
    recording files of an earlier recording that this one does not hold."""
    fd = _open_dest(dest)
    try:
        for file_name, text in files.items():
            _write_private(fd, file_name, text)
        for file_name in os.listdir(fd):
            if file_name not in files and (file_name in RECORDING_FILES
                                           or LOG_FILE.fullmatch(file_name)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(file_name, dir_fd=fd)
    finally:
        os.close(fd)


def _open_dest(dest: Path) -> int:
    """DIR created 0700 (or tightened to it), opened without following a link."""
    check_dest(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            dest.mkdir(mode=0o700)
        fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:  # a parent that is a file, no permission, a read-only or full disk
        raise RecordingRefused(f"cannot create {dest}: {exc.strerror or exc}") from exc
    try:
        os.fchmod(fd, 0o700)
    except OSError as exc:
        os.close(fd)
        raise RecordingRefused(f"cannot create {dest}: {exc.strerror or exc}") from exc
    return fd


def _write_private(dir_fd: int, name: str, text: str) -> None:
    """One file 0600 under ``dir_fd``; a symlink (or anything not a regular file) there is
    refused, never written through."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600,
                     dir_fd=dir_fd)
    except OSError as exc:
        raise RecordingRefused(f"cannot write {name} in the recording: {exc}") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # a hard link: someone else's
            raise RecordingRefused(f"{name} in the recording is not a file of its own")
        os.fchmod(fd, 0o600)
        fh.truncate(0)
        fh.write(text)


def to_json(data: Any) -> str:
    """A recording's JSON file text (indented, so a bug report can be read and diffed)."""
    return json.dumps(data, indent=1) + "\n"
