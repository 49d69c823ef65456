"""A Harbor job's inference engine log, when the engine writes a file of its own.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script after ``job_files``, see ``probes.remote.script``). An eval or datagen job
commonly starts its engine in the background with its own log (``vllm serve ... >
vllm_$SLURM_JOB_ID.log 2>&1 &``) and runs Harbor in the foreground, so the job's StdOut holds
none of the engine's lines, which the launch checks read (engine POSTs answered 200, running
requests). For a job whose trial roots hold Harbor job dirs, the newest file in its workdir or
its ``logs/`` named for the job (``*_<jobid>.log``, ``.out``, ``.txt``: the names a moved
StdOut is looked for under, one listing per directory per request) and for an engine
(``vllm``, ``sglang``, ``engine``, ``server`` in its name; one naming vLLM or SGLang before
the others), neither its log nor its StdErr, is read: its last :data:`ENGINE_TAIL_BYTES`, of
which its engine lines are sent, and its mtime (the clock its year-less stamps are read on).
Every read goes through the job's guard; a file that is not the job user's own is no candidate.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Dict, Optional  # noqa: UP035 - Python 3.7

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.logread import read_tail
with contextlib.suppress(ImportError):
    from probes.remote.job_files import ENGINE_NAME, LOG_SUBDIRS, _log_names

ENGINE_TAIL_BYTES = 64 << 10
"""Bytes of the engine's log read: vLLM's stats line every 10 s with its access lines, or
SGLang's batch lines; the latest answers and running counts are what the checks read."""
_ENGINE_KIND = re.compile(r"(?i)vllm|sglang")
ENGINE_LINES = 200
"""Engine lines sent of the tail (each a POST answered, a stats or batch line), with its last
few lines whatever they are (its newest stamp): a 500-task eval array's answer stays small."""
_ENGINE_LINE = ("POST /", "Running: ", "#running-req", " batch")


def engine_lines(text: str) -> str:
    """The tail's engine lines (at most :data:`ENGINE_LINES`) and its last 5 lines, in order."""
    lines = text.splitlines()
    keep = [i for i, line in enumerate(lines) if any(n in line for n in _ENGINE_LINE)]
    chosen = sorted(set(keep[-ENGINE_LINES:]) | set(range(max(0, len(lines) - 5), len(lines))))
    return "".join(lines[i] + "\n" for i in chosen)

EngineJson = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def runs_harbor(trials: EngineJson) -> bool:
    """Whether the collected trial roots (``trial_roots.collect_trials``) hold a Harbor job."""
    return any(isinstance(v, dict) and v.get("jobs") for v in trials.values())


def engine_log(job: EngineJson, log_path: Optional[str],  # noqa: UP045 - Python 3.7
               guard: Guard) -> Optional[EngineJson]:  # noqa: UP045
    """The job's engine log read (``path``, ``status``, ``text``, ``mtime``; ``error`` when the
    read failed), or ``None`` when the job has none of its own."""
    workdir = job.get("workdir")
    if not workdir:
        return None
    found = None
    dirs = [(str(workdir), True)] + [(os.path.join(str(workdir), s), False) for s in LOG_SUBDIRS]
    for directory, follow in dirs:
        for name in _log_names(directory, guard, {}, follow).get(str(job["id"]), ()):
            path = os.path.join(directory, name)
            if path in (log_path, job.get("stderr")) or not ENGINE_NAME.search(name):
                continue
            try:
                mtime = guard.stat_file(path).st_mtime
            except (OSError, Refused, Hung):
                continue
            # an engine's own name first (a sandbox or tool ``server`` log may be newer)
            rank = (_ENGINE_KIND.search(name) is not None, mtime)
            if found is None or rank > found[1]:
                found = (path, rank)
    if found is None:
        return None
    read = read_tail(found[0], ENGINE_TAIL_BYTES, 0, guard,  # its tail only
                     deepen_max=0, deepen_scan=0)
    out = {"path": found[0], "status": read["status"]}  # type: EngineJson
    if read["status"] == "ok":
        out.update(text=engine_lines(read.get("text") or ""), mtime=read.get("mtime"))
    else:
        out["error"] = read.get("error")
    return out
