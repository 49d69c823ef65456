"""The deep probe reader's budget and its guarded reads: every file and listing it opens.

Policy: part of the shipped rollout reader (``probes.remote.rollouts``), so STANDARD LIBRARY
ONLY and Python 3.7+ compatible; ``probes.remote.script.rollouts_source`` prepends it after
``guard`` and ``harbor_reduce``. One ``_Budget`` carries the request's bounds (``DEFAULTS``
overridden by the request), the wall-clock deadline and the collector's ``Guard`` for the
job's user; every read below goes through that guard, counts what it read, and says in
``budget.skipped`` what it could not read instead of raising.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process the guard and the trial reducer are imported; shipped, their sources are
# prepended and these lines are ``pass`` (probes.remote.script.rollouts_source).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused, resolve_uid
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import slim_result

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9
DEFAULTS = {"max_trials": 64, "max_listing": 20000, "max_files": 3, "max_lines": 64,
            "max_file_bytes": 1 << 20, "max_text": 2000, "deadline_s": 20.0,
            "read_timeout_s": 5.0, "max_result_bytes": 64 << 20}


class _Budget:
    """The request's bounds and the wall-clock deadline, shared by every reader below."""

    def __init__(self, request: Json) -> None:
        limits = dict(DEFAULTS)
        limits.update({k: v for k, v in request.items() if k in DEFAULTS})
        self.max_trials = int(limits["max_trials"])
        self.max_listing = int(limits["max_listing"])
        self.max_files = int(limits["max_files"])
        self.max_lines = int(limits["max_lines"])
        self.max_file_bytes = int(limits["max_file_bytes"])
        self.max_result_bytes = int(limits["max_result_bytes"])
        self.max_text = int(limits["max_text"])
        self.deadline = time.monotonic() + float(limits["deadline_s"])
        owner = request.get("owner")
        uid = resolve_uid(owner) if owner else os.geteuid()
        self.guard = Guard(uid, float(limits["read_timeout_s"]), self.deadline,
                           user=str(owner or "(caller)"))
        self.bytes_read = 0
        self.files_opened = 0
        self.skipped: list[str] = []

    def expired(self) -> bool:
        return time.monotonic() > self.deadline


def read_regular(path: str, limit: int, budget: _Budget) -> bytes | None:
    """At most ``limit`` bytes of the job's regular file (guard's rules); ``None`` otherwise."""
    try:
        fd = budget.guard.open(path)
    except FileNotFoundError:
        return None
    except (Refused, Hung) as exc:
        budget.skipped.append(str(exc))
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    try:
        budget.files_opened += 1
        data = budget.guard.read(fd, 0, limit, path)
    except Hung as exc:
        budget.skipped.append(str(exc))
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    finally:
        os.close(fd)
    budget.bytes_read += len(data)
    return data


def list_dir(path: str, budget: _Budget, root: bool = False) -> list[Any] | None:
    """``(name, is_dir)`` pairs, sorted, at most ``max_listing``; links are never followed,
    but for a ``root`` (a dump dir, a trial root) that is itself one, to a directory the job's
    user could list (``Guard.open_root``). An absent dir is ``None`` unsaid (most configured
    ones are); one that is there but not listed (no permission, not a directory) is said: its
    rollouts are unread, not absent."""
    try:
        out, cut = budget.guard.list_entries(path, budget.max_listing, root)
    except (Refused, Hung) as exc:
        budget.skipped.append(str(exc))
        return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    if cut:
        budget.skipped.append(f"{path}: listing cut at {budget.max_listing}")
    return out


def read_document(path: str, budget: _Budget) -> Any:
    """A Harbor JSON file (trial result, trajectory) read whole up to ``max_result_bytes``
    (past it: skipped, said), rollout details cut before parsing; ``None`` otherwise."""
    raw = read_regular(path, budget.max_result_bytes, budget)
    if raw is not None and len(raw) >= budget.max_result_bytes:
        budget.skipped.append(f"{path}: past {budget.max_result_bytes} bytes: not parsed")
        return None
    return _json(slim_result(raw) if raw is not None else None)


def _json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
