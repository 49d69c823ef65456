"""Checkpoint and trial trees of a job on the login node: single-level listings, small reads.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). Only the known layouts are read (step
directories, latest-step markers, Harbor job dirs and ``<trial>/result.json``), never a
recursive walk. Every open and listing goes through :mod:`probes.remote.guard`: a trial
directory is entered through its job dir's descriptor without following a link, and a read
that is refused or hangs leaves that entry out (a listing that fails says why in ``errors``).
Each directory is listed once per request and owner (``SEEN``), however many jobs name it.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import reduce_job, reduce_trial

_STEP_DIR = re.compile(r"^(global_step_\d+|checkpoint-\d+|iter_\d+|step_\d+)$")
_MARKERS = ("latest_ckpt_global_step.txt", "latest_checkpointed_iteration.txt")
_MAX_LISTING = 5000

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9

SEEN: dict[str, Any] = {}
"""Per-request memo: jobs of one chain or grid share workdirs, checkpoint and trial roots, and
each directory (or trial tree) is read once per sweep (per owner) however many jobs name it."""


def listdir(path: str, guard: Guard, errors: Json | None = None) -> list[str] | None:
    """The directory's names, or ``None`` (the reason in ``errors[path]`` when it exists)."""
    key = f"ls:{guard.uid}:{path}"
    if key not in SEEN:
        try:
            SEEN[key] = guard.list_dir(path, _MAX_LISTING)
        except FileNotFoundError:
            SEEN[key] = None
        except (OSError, Refused, Hung) as exc:
            SEEN[key] = str(exc)
    listing = SEEN[key]
    if isinstance(listing, str):
        if errors is not None:
            errors[path] = listing
        return None
    return listing  # type: ignore[no-any-return]


def collect_checkpoints(roots: list[str], guard: Guard) -> Json:
    listings: Json = {}
    exports: Json = {}
    markers: Json = {}
    errors: Json = {}
    for root in roots:
        names = listdir(root, guard, errors)
        if names is None:
            continue
        listings[root] = [n for n in names if _STEP_DIR.match(n)]
        for marker in _MARKERS:
            if marker in names:
                text = read_small(os.path.join(root, marker), guard, 64)
                if text is not None:
                    markers[root] = text.decode("utf-8", "replace").strip()
        if "exports" in names:
            sub = listdir(os.path.join(root, "exports"), guard, errors) or []
            exports[root] = [n for n in sub if _STEP_DIR.match(n)]
    out: Json = {"listings": listings, "exports": exports, "markers": markers}
    if errors:
        out["errors"] = errors
    return out


def read_small(path: str, guard: Guard, limit: int = 1 << 20,
                dir_fd: int | None = None) -> bytes | None:
    found = _read_stamped(path, guard, limit, dir_fd)
    return found[0] if found is not None else None


def _read_stamped(path: str, guard: Guard, limit: int = 1 << 20,
                  dir_fd: int | None = None) -> tuple[bytes, float] | None:
    """The file's first ``limit`` bytes and its mtime, both from the one opened descriptor."""
    try:
        return guard.read_small(path, limit, dir_fd=dir_fd)
    except (OSError, Refused, Hung):
        return None


def _trial_result(top: int, name: str, guard: Guard) -> tuple[bytes, float] | None:
    """``<name>/result.json`` below an open job dir, the trial dir entered without a link."""
    try:
        with guard.directory(name, dir_fd=top) as sub:
            return guard.read_small("result.json", 1 << 20, dir_fd=sub)
    except (OSError, Refused, Hung):
        return None


def _collect_job_dir(job_dir: str, guard: Guard, budget: list[int]) -> Json:
    """One Harbor job directory: its job result.json and every ``<trial>/result.json``."""
    job_raw = read_small(os.path.join(job_dir, "result.json"), guard)
    trials: Json = {}
    try:
        with guard.directory(job_dir) as top:
            for name in listdir(job_dir, guard) or []:
                if budget[0] <= 0:
                    break
                found = _trial_result(top, name, guard)
                reduced = reduce_trial(found[0]) if found is not None else None
                if reduced is not None:
                    # The stall rule ("no new result.json for 60+ min") reads file times.
                    reduced["mtime"] = found[1]  # type: ignore[index]
                    trials[name] = reduced
                    budget[0] -= 1
    except (OSError, Refused, Hung):
        pass
    return {"job": reduce_job(job_raw) if job_raw is not None else None, "trials": trials}


def _is_job_dir(names: list[str]) -> bool:
    return "result.json" in names or "config.json" in names


def collect_trials(roots: list[str], max_trials: int, guard: Guard | None = None) -> Json:
    """Every trial root: a Harbor job dir itself, or a dir of job dirs (chunks)."""
    guard = guard or Guard(os.geteuid(), 30.0)
    out: Json = {}
    budget = [max_trials]
    for root in roots:
        errors: Json = {}
        names = listdir(root, guard, errors)
        if names is None:
            out[root] = {"exists": False, "jobs": {}, **({"error": errors[root]} if errors
                                                         else {})}
            continue
        if _is_job_dir(names):
            out[root] = {"exists": True, "jobs": {root: _collect_job_dir(root, guard, budget)}}
            continue
        jobs: Json = {}
        for name in names:
            path = os.path.join(root, name)
            # Only Harbor job dirs are chunks: a stray or empty directory is not a trial tree;
            # a symlinked chunk is not entered (the listing opens it without following).
            if _is_job_dir(listdir(path, guard) or []):
                jobs[path] = _collect_job_dir(path, guard, budget)
        out[root] = {"exists": True, "jobs": jobs}
    return out
