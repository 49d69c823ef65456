"""Harbor job dirs below a trial root: which directories are job dirs, trial dirs, or plain
levels above job dirs, found by listings bounded in depth and count.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script before ``trial_roots``, see ``probes.remote.script``). A Harbor job dir holds
its own ``config.json`` (written as the run starts) and ``result.json``; its subdirectories
are trial dirs, each holding a result.json once it ends (and config.json from its start). A
trial dir holds no subdirectory holding a result.json (its ``agent/``, ``verifier/`` hold
none). ``harbor run -o jobs/<model>`` puts job dirs one plain level below ``{workdir}/jobs``;
they are looked for there too (``GROUP_DEPTH``), never deeper: the roots are listed, never
walked. Every directory is entered through its parent's descriptor without following a link.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator  # noqa: UP035 - Python 3.7 on login nodes

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import is_trial_result
with contextlib.suppress(ImportError):
    from probes.remote.tree import _entries

_HEAD_BYTES = 1 << 20
_TRIAL_HEAD = (b'"trial_name"', b'"task_name"')
"""Keys a trial result.json (``TrialResult``) dumps near its top, and a job's never has."""


@contextlib.contextmanager
def _below(top: int, parts: list[str], guard: Guard) -> Iterator[int]:
    """The directory ``parts`` below the open ``top``, each component entered through its
    parent's descriptor without following a link; open for the block."""
    fd = top
    try:
        for part in parts:
            sub = guard.open(part, directory=True, dir_fd=fd)
            if fd != top:
                os.close(fd)
            fd = sub
        yield fd
    finally:
        if fd != top:
            os.close(fd)


def _job_files_in(fd: int, guard: Guard) -> bool:
    """A Harbor job dir holds a result.json or a config.json (the job's own regular file)."""
    for marker in ("result.json", "config.json"):
        with contextlib.suppress(OSError, Refused):
            guard.stat_file(marker, dir_fd=fd)
            return True
    return False


def _holds_result(top: int, name: str, guard: Guard) -> bool:
    """Does the subdirectory ``name`` of an open dir hold a result.json (not followed)?"""
    try:
        with guard.directory(name, dir_fd=top) as sub:
            guard.stat_file("result.json", dir_fd=sub)
            return True
    except (OSError, Refused, Hung):
        return False


def _is_trial_dir(top: int, name: str, path: str, guard: Guard) -> bool | None:
    """Is ``name`` (below an open dir, holding a result.json) a trial dir rather than a Harbor
    job dir? A job dir's subdirectories are trials holding result.json; a trial's (``agent/``,
    ``verifier/``) hold none. With no such subdirectory (a job dir whose trials are all in
    flight looks alike) the result.json's own content decides. ``None``: unreadable, or a
    result.json that is no JSON object (binary, cut off mid-write): undecided, not a job dir."""
    try:
        with guard.directory(name, dir_fd=top) as sub:
            for child, is_dir in _entries(sub, path, guard):
                if is_dir and _holds_result(sub, child, guard):
                    return False
            raw = guard.read_small("result.json", _HEAD_BYTES, dir_fd=sub)[0]
    except (OSError, Refused, Hung):
        return None
    decided = is_trial_result(raw)
    if decided is None and len(raw) >= _HEAD_BYTES:
        # A result.json longer than the head read: a trial's, with rollout details, when its
        # top holds a trial's keys (a job's result.json is dumped without any).
        return any(key in raw[:65536] for key in _TRIAL_HEAD)
    return decided


def _flat_trials(top: int, root: str, entries: list[tuple[str, bool]], guard: Guard) -> bool:
    """Does ``root`` (no job files of its own) hold trial dirs directly (SkyRL's flat Harbor
    ``trials_dir``)? Decided by its first subdirectory with a result.json that reads."""
    for name, is_dir in entries:
        if is_dir and _holds_result(top, name, guard):
            trial = _is_trial_dir(top, name, os.path.join(root, name), guard)
            if trial is not None:
                return trial
    return False


GROUP_DEPTH = 2
"""Plain directories looked through, below a trial root, for Harbor job dirs: ``harbor run -o
jobs/<model>`` (or an adapter's ``jobs_dir: jobs/<bench>``) puts each job dir one level below
``{workdir}/jobs`` (``Job.job_dir = jobs_dir / job_name``), ``-o jobs/<model>/<bench>`` two.
Deeper is not searched: the roots are listed, never walked (no find on a parallel file
system)."""
GROUP_LISTINGS = 64
"""Directories listed at most, per trial root, while looking through those levels."""


def _looked_at(top: int, name: str, guard: Guard) -> tuple[bool, float] | None:
    """Is the subdirectory ``name`` of an open dir a Harbor job dir, and when was it last
    changed (its mtime)? Entered without following a link; ``None``: unreadable."""
    try:
        with guard.directory(name, dir_fd=top) as sub:
            return _job_files_in(sub, guard), os.fstat(sub).st_mtime
    except (OSError, Refused, Hung):
        return None


def _job_dirs(top: int, path: str, entries: list[tuple[str, bool]], guard: Guard, *,
              listings: list[int], depth: int = 0) -> list[list[str]]:
    """The Harbor job dirs (chunks) below the open ``top`` as path components: each
    subdirectory holding a job's files, else, up to ``GROUP_DEPTH`` plain levels down, those
    below it, the most recently changed directories first (Harbor making a job dir in one
    moves its mtime: the bound falls on past runs', never on the one writing now); a
    subdirectory holding trial dirs directly (a flat trials dir) is no level of job dirs (its
    trials hold config.json and result.json too). ``listings``: what is left of
    ``GROUP_LISTINGS``, shared by every level."""
    found: list[list[str]] = []
    plain: list[tuple[float, str]] = []
    for name, is_dir in entries:
        seen = _looked_at(top, name, guard) if is_dir else None
        if seen is not None and seen[0]:
            found.append([name])
        elif seen is not None and depth < GROUP_DEPTH:
            plain.append((-seen[1], name))
    for _newest, name in sorted(plain):
        if listings[0] <= 0:
            break
        listings[0] -= 1
        sub_path = os.path.join(path, name)
        try:
            with guard.directory(name, dir_fd=top) as sub:
                below = _entries(sub, sub_path, guard)
                if _flat_trials(sub, sub_path, below, guard):
                    continue
                found.extend([name, *parts] for parts in
                             _job_dirs(sub, sub_path, below, guard, listings=listings,
                                       depth=depth + 1))
        except (OSError, Refused, Hung):
            continue
    return found
