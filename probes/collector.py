"""One batched read of every job's files: the log tail, workdir listing, checkpoints, trials.

Policy: this module is STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible,
because its source (with ``probes/harbor_reduce.py`` prepended, see
``probes.slurm.build_collector_script``) is sent to a SLURM login node on SSH stdin and run by
``python3 -``; the request travels inside that script as a Python string literal, so no user
text ever reaches a shell. It follows the seed's rules for logs: verify the scheduler's StdOut
exists; if not, list the workdir once (never recursive, never ``find``/``du``) for
``*_<jobid>.out`` (``mismatch``), else ``missing``; read a bounded tail (at most
``tail_bytes``, from the caller's byte offset when one is given); a read that fails or returns
fewer lines than the floor is retried once, then reported ``failed`` (never "dead").
Checkpoint and trial trees are read with single-level listings of their known layouts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process the reducer is imported; when shipped, its source is prepended to this script
# and the import line below is replaced by ``pass`` (probes.slurm.build_collector_script).
with contextlib.suppress(ImportError):
    from probes.harbor_reduce import reduce_job, reduce_trial

PROTOCOL = 1
_STEP_DIR = re.compile(r"^(global_step_\d+|checkpoint-\d+|iter_\d+|step_\d+)$")
_MARKERS = ("latest_ckpt_global_step.txt", "latest_checkpointed_iteration.txt")
_MAX_LISTING = 5000

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _tail(path: str, max_bytes: int, offset: int, min_lines: int) -> Json:
    """Read a bounded tail; retry once if it fails or is under the line floor."""
    result: Json = {}
    for attempt in (1, 2):
        result = _tail_once(path, max_bytes, offset)
        result["attempts"] = attempt
        if result["status"] != "ok":
            continue
        # An empty file (nothing printed yet) and an incremental read with nothing new are
        # facts, not failures; the floor judges a whole-tail read of a non-empty file.
        if result["size"] == 0 or offset > 0 or result["lines"] >= min_lines:
            return result
        result = dict(result, status="failed",
                      error=f"{result['lines']} lines < floor {min_lines}")
    return result


def _tail_once(path: str, max_bytes: int, offset: int) -> Json:
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            size, mtime = st.st_size, st.st_mtime
            start = max(0, size - max_bytes)
            if 0 < offset <= size:
                start = max(start, offset)
            fh.seek(start)
            data = fh.read(max_bytes)
    except OSError as exc:
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "lines": 0,
                "size": 0}
    if start > 0 and start != offset:  # cut into a line: drop the partial first line
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
        start = size - len(data)
    text = data.decode("utf-8", errors="replace")
    lines = len(text.splitlines())
    return {"status": "ok", "size": size, "mtime": mtime, "offset": start, "text": text,
            "lines": lines}


_SEEN: dict[str, Any] = {}
"""Per-request memo: jobs of one chain or grid share workdirs, checkpoint and trial roots, and
each directory (or trial tree) is read once per sweep however many jobs name it."""


def _listdir(path: str) -> list[str] | None:
    key = "ls:" + path
    if key not in _SEEN:
        _SEEN[key] = _listdir_uncached(path)
    listing: list[str] | None = _SEEN[key]
    return listing


def _listdir_uncached(path: str) -> list[str] | None:
    try:
        with os.scandir(path) as it:
            entries: list[str] = []
            for entry in it:
                entries.append(entry.name)
                if len(entries) >= _MAX_LISTING:
                    break
            return sorted(entries)
    except OSError:
        return None


def _log_pattern(job_id: str) -> re.Pattern[str]:
    """``*_<jobid>.out`` (also ``-``/``.`` separators, ``.log``/``.txt``, a ``.N`` restart)."""
    return re.compile(r"(^|[_.-])" + re.escape(job_id) + r"(\.\d+)?\.(out|log|txt)$")


def _locate_log(stdout: str | None, workdir: str | None, job_id: str) -> tuple[str | None, str]:
    """``(path, status)``: ``ok`` at StdOut, ``mismatch`` found in the workdir, else missing."""
    if stdout and _stat(stdout) is not None:
        return stdout, "ok"
    pattern = _log_pattern(job_id)
    dirs: list[str] = []
    if workdir:
        dirs.append(workdir)
    parent = os.path.dirname(stdout) if stdout else ""
    if parent and parent not in dirs:  # `-o logs/%x_%j.out`: the log's own directory
        dirs.append(parent)
    best: tuple[str, float] | None = None
    for directory in dirs:
        for name in _listdir(directory) or []:
            if not pattern.search(name):
                continue
            path = os.path.join(directory, name)
            st = _stat(path)
            if st is not None and (best is None or st.st_mtime > best[1]):
                best = (path, st.st_mtime)
    if best is not None:
        return best[0], "mismatch"
    return None, "missing"


def _collect_log(job: Json, req: Json) -> Json:
    path, status = _locate_log(job.get("stdout"), job.get("workdir"), str(job["id"]))
    out: Json = {"requested": job.get("stdout"), "path": path, "status": status}
    if path is None:
        return out
    offset = int(job.get("offset") or 0) if path == job.get("stdout") else 0
    read = _tail(path, int(req["tail_bytes"]), offset, int(req.get("min_lines", 1)))
    if read["status"] != "ok":
        out.update(status="failed", error=read.get("error"), attempts=read.get("attempts", 1))
        return out
    read.pop("status")
    out.update(read)
    return out


def _collect_checkpoints(roots: list[str]) -> Json:
    listings: Json = {}
    exports: Json = {}
    markers: Json = {}
    for root in roots:
        names = _listdir(root)
        if names is None:
            continue
        listings[root] = [n for n in names if _STEP_DIR.match(n)]
        for marker in _MARKERS:
            if marker in names:
                text = _read_small(os.path.join(root, marker), 64)
                if text is not None:
                    markers[root] = text.decode("utf-8", "replace").strip()
        if "exports" in names:
            sub = _listdir(os.path.join(root, "exports")) or []
            exports[root] = [n for n in sub if _STEP_DIR.match(n)]
    return {"listings": listings, "exports": exports, "markers": markers}


def _read_small(path: str, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _collect_job_dir(job_dir: str, budget: list[int]) -> Json:
    """One Harbor job directory: its job result.json and every ``<trial>/result.json``."""
    job_raw = _read_small(os.path.join(job_dir, "result.json"))
    trials: Json = {}
    for name in _listdir(job_dir) or []:
        if budget[0] <= 0:
            break
        raw = _read_small(os.path.join(job_dir, name, "result.json"))
        if raw is None:
            continue
        reduced = reduce_trial(raw)
        if reduced is not None:
            trials[name] = reduced
            budget[0] -= 1
    return {"job": reduce_job(job_raw) if job_raw is not None else None, "trials": trials}


def _collect_trials(roots: list[str], max_trials: int) -> Json:
    out: Json = {}
    budget = [max_trials]
    for root in roots:
        names = _listdir(root)
        if names is None:
            out[root] = {"exists": False, "jobs": {}}
            continue
        if "result.json" in names or "config.json" in names:
            out[root] = {"exists": True, "jobs": {root: _collect_job_dir(root, budget)}}
            continue
        jobs: Json = {}
        for name in names:
            path = os.path.join(root, name)
            if os.path.isdir(path):
                jobs[path] = _collect_job_dir(path, budget)
        out[root] = {"exists": True, "jobs": jobs}
    return out


def collect(request: Json) -> Json:
    """Serve one request (see the module docstring); returns a JSON-able dict."""
    jobs: Json = {}
    _SEEN.clear()
    for job in request.get("jobs", []):
        trial_roots = list(job.get("trial_roots", []))
        trials_key = "trials:" + json.dumps(trial_roots)
        if trials_key not in _SEEN:
            _SEEN[trials_key] = _collect_trials(trial_roots, int(request.get("max_trials", 20000)))
        jobs[str(job["id"])] = {
            "log": _collect_log(job, request),
            "checkpoints": _collect_checkpoints(list(job.get("checkpoint_roots", []))),
            "trials": _SEEN[trials_key],
        }
    _SEEN.clear()
    return {"protocol": PROTOCOL, "host": socket.gethostname(), "now": time.time(), "jobs": jobs}


def main(request_json: str) -> None:
    """Entry point of the shipped script: request JSON in, answer JSON on stdout."""
    json.dump(collect(json.loads(request_json)), sys.stdout)
    sys.stdout.write("\n")
