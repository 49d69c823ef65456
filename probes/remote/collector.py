"""One batched read of every job's files: the log tail, workdir listing, checkpoints, trials.

Policy: this module is STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible,
because its source (with ``probes/harbor_reduce.py`` prepended, see
``probes.slurm.probe.build_collector_script``) is sent to a SLURM login node on SSH stdin and run by
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
import subprocess
import sys
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process the reducer and the path rules are imported; when shipped, their sources are
# prepended to this script and each import line below is replaced by ``pass``
# (probes.slurm.probe.collector_source).
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import reduce_job, reduce_trial
with contextlib.suppress(ImportError):
    from probes.remote.completion import collect_completion
with contextlib.suppress(ImportError):
    from probes.remote.stdio_pattern import (
        array_ids,
        ended_before,
        expand_pattern,
        expand_roots,
        job_key,
        job_user,
        slurm_number,
        slurm_text,
    )

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
        result = read_tail(path, max_bytes, offset)
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


def read_tail(path: str, max_bytes: int, offset: int) -> Json:
    """At most ``max_bytes`` from the end (or from ``offset``), the cut first line dropped."""
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
    found = _read_stamped(path, limit)
    return found[0] if found is not None else None


def _read_stamped(path: str, limit: int = 1 << 20) -> tuple[bytes, float] | None:
    """The file's first ``limit`` bytes and its mtime, both from the one opened descriptor."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit), os.fstat(fh.fileno()).st_mtime
    except OSError:
        return None


def _collect_job_dir(job_dir: str, budget: list[int]) -> Json:
    """One Harbor job directory: its job result.json and every ``<trial>/result.json``."""
    job_raw = _read_small(os.path.join(job_dir, "result.json"))
    trials: Json = {}
    for name in _listdir(job_dir) or []:
        if budget[0] <= 0:
            break
        found = _read_stamped(os.path.join(job_dir, name, "result.json"))
        if found is None:
            continue
        reduced = reduce_trial(found[0])
        if reduced is not None:
            # The stall rule ("no new result.json for 60+ min") reads file times.
            reduced["mtime"] = found[1]
            trials[name] = reduced
            budget[0] -= 1
    return {"job": reduce_job(job_raw) if job_raw is not None else None, "trials": trials}


def _is_job_dir(names: list[str]) -> bool:
    return "result.json" in names or "config.json" in names


def collect_trials(roots: list[str], max_trials: int) -> Json:
    """Every trial root: a Harbor job dir itself, or a dir of job dirs (chunks)."""
    out: Json = {}
    budget = [max_trials]
    for root in roots:
        names = _listdir(root)
        if names is None:
            out[root] = {"exists": False, "jobs": {}}
            continue
        if _is_job_dir(names):
            out[root] = {"exists": True, "jobs": {root: _collect_job_dir(root, budget)}}
            continue
        jobs: Json = {}
        for name in names:
            path = os.path.join(root, name)
            # Only Harbor job dirs are chunks: a stray or empty directory is not a trial tree.
            if os.path.isdir(path) and _is_job_dir(_listdir(path) or []):
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
            _SEEN[trials_key] = collect_trials(trial_roots, int(request.get("max_trials", 20000)))
        jobs[str(job["id"])] = {
            "log": _collect_log(job, request),
            "checkpoints": _collect_checkpoints(list(job.get("checkpoint_roots", []))),
            "trials": _SEEN[trials_key],
        }
        if job.get("completed"):
            # The SFT completion check (probes.remote.completion): only for a COMPLETED job, a
            # few bounded reads of regular files in its workdir and the output dirs it logged.
            jobs[str(job["id"])]["completion"] = collect_completion(
                job.get("workdir"), jobs[str(job["id"])]["log"].get("text"),
                list(job.get("checkpoint_roots", [])))
    _SEEN.clear()
    # uname's nodename is gethostname() on POSIX, without importing socket (~5 ms a run).
    return {"protocol": PROTOCOL, "host": os.uname().nodename, "now": time.time(), "jobs": jobs}


def collect_queue(request: Json) -> Json:
    """Run ``squeue --json`` here, keep the asked users' jobs, and collect their files.

    The answer is :func:`collect`'s plus ``squeue``: its exit status and stderr, and either
    ``json`` (squeue's document, as an object, holding only those users' job objects, same
    top-level keys) or, when squeue did not print such a document, its ``stdout`` as text.
    With ``squeue.keys``, each kept job object is cut down to those keys (the probe's sweep
    reads no others; a recording asks for none and gets the objects verbatim). Pending jobs
    are not collected; a job whose log path cannot be expanded here is listed in
    ``unexpanded`` and left to the caller (scontrol, then an explicit-jobs request).
    """
    queue = request["squeue"]
    status, out, err = _run_squeue(list(queue["argv"]))
    answer: Json = {"protocol": PROTOCOL, "jobs": {}, "unexpanded": []}
    data = None
    if status == 0 and out.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            data = json.loads(out)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        # Not our JSON: the caller judges it exactly as if it had run squeue itself.
        answer["squeue"] = {"exit": status, "stdout": out, "stderr": err}
        return answer
    users = set(queue["users"])
    since = queue.get("since")
    kept = [j for j in data["jobs"] if isinstance(j, dict) and job_user(j) in users
            and not ended_before(j, since)]
    specs, unexpanded = _queue_specs(kept, request)
    answer = collect(dict(request, jobs=specs))
    answer["unexpanded"] = unexpanded
    keys = queue.get("keys")
    if keys is not None:  # a few wanted keys looked up, not every key of every job scanned
        kept = [{k: j[k] for k in keys if k in j} for j in kept]
    data["jobs"] = kept
    answer["squeue"] = {"exit": status, "json": data, "stderr": err}
    return answer


def _run_squeue(argv: list[str]) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of an argv (never a shell); 127 if it cannot start."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as exc:  # what a shell would say, as LocalRunner does
        return 127, "", f"{argv[0]}: could not start: {exc}"
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


def _queue_specs(jobs: list[Json], request: Json) -> tuple[list[Json], list[str]]:
    """The collector job entries for squeue job objects (what ``collector_request`` builds)."""
    offsets = request.get("offsets") or {}
    roots = request.get("roots") or {}
    specs: list[Json] = []
    unexpanded: list[str] = []
    for job in jobs:
        own = slurm_number(job.get("job_id"))
        if own is None or _queue_pending(job.get("job_state", _queue_state(job))):
            continue
        array_job, array_task = array_ids(job)
        key = job_key(own, array_job, array_task)
        is_task = array_task is not None
        name, user = str(job.get("name") or ""), job_user(job)
        workdir = (slurm_text(job.get("current_working_directory"))
                   or slurm_text(job.get("working_directory")))
        stdout = expand_pattern(
            slurm_text(job.get("standard_output")) or slurm_text(job.get("stdout_expanded")),
            job_id=str(own), array_job_id=str(array_job) if is_task and array_job else None,
            array_task_id=str(array_task) if is_task else None, user=user, name=name,
            workdir=workdir)
        if stdout is None:
            unexpanded.append(key)
            continue
        filled = [expand_roots(list(roots.get(kind) or []), workdir=workdir, name=name,
                               job_id=key, user=user) for kind in ("checkpoint", "trial")]
        specs.append({"id": key, "stdout": stdout, "workdir": workdir,
                      "offset": int(offsets.get(stdout) or 0),
                      "completed": _queue_completed(job.get("job_state", _queue_state(job))),
                      "checkpoint_roots": filled[0], "trial_roots": filled[1]})
    return specs, unexpanded


def _queue_state(job: Json) -> Any:
    block = job.get("state")
    return block.get("current") if isinstance(block, dict) else None


def _queue_completed(raw: Any) -> bool:
    """Plainly COMPLETED: the one state the SFT completion check is for."""
    names = [str(x).upper() for x in raw] if isinstance(raw, list) else str(raw or "").split()[:1]
    return names == ["COMPLETED"]


def _queue_pending(raw: Any) -> bool:
    """Plainly PENDING (not collected). Anything else is collected; the probe has the last word."""
    names = [str(x).upper() for x in raw] if isinstance(raw, list) else str(raw or "").split()[:1]
    return "PENDING" in names and "COMPLETING" not in names


def main(request_json: str) -> None:
    """Entry point of the shipped script: request JSON in, answer JSON on stdout."""
    request = json.loads(request_json)
    answer = collect_queue(request) if "squeue" in request else collect(request)
    # dumps, not dump: json.dump encodes in pure Python, chunk by chunk (~20x slower here).
    sys.stdout.write(json.dumps(answer) + "\n")
