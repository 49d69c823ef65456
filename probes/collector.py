"""One batched read of every job's files: the log tail, workdir listing, checkpoints, trials.

Policy: this module is STANDARD LIBRARY ONLY and self-contained, because its source (with
``probes/harbor_reduce.py`` prepended) is sent to a SLURM login node on SSH stdin and run by
``python3 -``; the request travels inside that script as a Python string literal, so no user
text ever reaches a shell. The same code runs in-process for ``local = true`` clusters and for
``record``. It follows the seed's rules for logs: verify StdOut exists; if not, list the
workdir once (never recursive, never ``find``/``du``) for ``*_<jobid>.out``; read a bounded
tail; retry once when the tail has fewer lines than the floor. Checkpoint and trial trees are
read with single-level listings of their known layouts.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time

try:  # in-process; remotely the reducer's source is prepended to this script instead
    from probes.harbor_reduce import reduce_job, reduce_trial
except ImportError:  # pragma: no cover - exercised by the SSH path
    pass

PROTOCOL = 1
_STEP_DIR = re.compile(r"^(global_step_\d+|checkpoint-\d+|iter_\d+|step_\d+)$")
_MARKERS = ("latest_ckpt_global_step.txt", "latest_checkpointed_iteration.txt")
_MAX_LISTING = 5000


def _stat(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st


def _tail(path, max_bytes, offset, min_lines):
    """Read at most ``max_bytes`` from the end of ``path`` (or from ``offset`` on)."""
    attempts = 0
    result = None
    while attempts < 2:
        attempts += 1
        result = _tail_once(path, max_bytes, offset)
        result["attempts"] = attempts
        if result["status"] == "ok" and (result["lines"] >= min_lines or result["size"] == 0):
            return result
    return result


def _tail_once(path, max_bytes, offset):
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            mtime = os.fstat(fh.fileno()).st_mtime
            start = max(0, size - max_bytes)
            if 0 < offset <= size:
                start = max(start, offset)
            fh.seek(start)
            data = fh.read(max_bytes)
    except OSError as exc:
        return {"status": "failed", "error": "%s: %s" % (type(exc).__name__, exc), "lines": 0,
                "size": 0}
    if start > 0 and start != offset:
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
        start = size - len(data)
    text = data.decode("utf-8", errors="replace")
    lines = text.count("\n") + text.count("\r") + (1 if text and not text.endswith("\n") else 0)
    return {"status": "ok", "size": size, "mtime": mtime, "offset": start, "text": text,
            "lines": lines}


def _listdir(path):
    try:
        with os.scandir(path) as it:
            entries = []
            for entry in it:
                entries.append(entry.name)
                if len(entries) >= _MAX_LISTING:
                    break
            return sorted(entries)
    except OSError:
        return None


def _locate_log(stdout, workdir, job_id):
    """Return ``(path, status)``: ``ok`` at StdOut, ``mismatch`` found in the workdir, or missing."""
    if stdout and _stat(stdout) is not None:
        return stdout, "ok"
    pattern = re.compile(r"(^|[_.-])%s(\.\d+)?\.(out|log|txt)$" % re.escape(job_id.split("_")[0]))
    dirs = []
    if workdir:
        dirs.append(workdir)
    if stdout and os.path.dirname(stdout) and os.path.dirname(stdout) not in dirs:
        dirs.append(os.path.dirname(stdout))
    best = None
    for directory in dirs:
        for name in _listdir(directory) or []:
            if pattern.search(name):
                path = os.path.join(directory, name)
                st = _stat(path)
                if st is not None and (best is None or st.st_mtime > best[1]):
                    best = (path, st.st_mtime)
    if best is not None:
        return best[0], "mismatch"
    return None, "missing"


def _collect_log(job, req):
    path, status = _locate_log(job.get("stdout"), job.get("workdir"), job["id"])
    out = {"requested": job.get("stdout"), "path": path, "status": status}
    if path is None:
        return out
    read = _tail(path, req["tail_bytes"], job.get("offset", 0), req.get("min_lines", 1))
    if read["status"] != "ok":
        out.update(status="failed", error=read.get("error"), attempts=read.get("attempts", 1))
        return out
    read.pop("status")
    out.update(read)
    return out


def _collect_checkpoints(roots):
    listings, exports, markers = {}, {}, {}
    for root in roots:
        names = _listdir(root)
        if names is None:
            continue
        listings[root] = [n for n in names if _STEP_DIR.match(n)]
        for marker in _MARKERS:
            if marker in names:
                try:
                    with open(os.path.join(root, marker)) as fh:
                        markers[root] = fh.read(64).strip()
                except OSError:
                    pass
        if "exports" in names:
            sub = _listdir(os.path.join(root, "exports")) or []
            exports[root] = [n for n in sub if _STEP_DIR.match(n)]
    return {"listings": listings, "exports": exports, "markers": markers}


def _read_small(path, limit=1 << 20):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _collect_job_dir(job_dir, budget):
    """One Harbor job directory: its job result.json and every ``<trial>/result.json``."""
    job_raw = _read_small(os.path.join(job_dir, "result.json"))
    trials = {}
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


def _collect_trials(roots, max_trials):
    out = {}
    budget = [max_trials]
    for root in roots:
        names = _listdir(root)
        if names is None:
            out[root] = {"exists": False, "jobs": {}}
            continue
        if "result.json" in names or "config.json" in names:
            out[root] = {"exists": True, "jobs": {root: _collect_job_dir(root, budget)}}
            continue
        jobs = {}
        for name in names:
            path = os.path.join(root, name)
            if os.path.isdir(path):
                jobs[path] = _collect_job_dir(path, budget)
        out[root] = {"exists": True, "jobs": jobs}
    return out


def collect(request):
    """Serve one request (see the module docstring); returns a JSON-able dict."""
    jobs = {}
    for job in request.get("jobs", []):
        jobs[job["id"]] = {
            "log": _collect_log(job, request),
            "checkpoints": _collect_checkpoints(job.get("checkpoint_roots", [])),
            "trials": _collect_trials(job.get("trial_roots", []), request.get("max_trials", 20000)),
        }
    return {"protocol": PROTOCOL, "host": socket.gethostname(), "now": time.time(), "jobs": jobs}


def main(request_json):
    json.dump(collect(json.loads(request_json)), sys.stdout)
    sys.stdout.write("\n")
