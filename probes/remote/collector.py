"""One batched read of every job's files: the log tail, workdir listing, checkpoints, trials.

Policy: this module is STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible,
because its source (with the modules it imports prepended, see
``probes.remote.script``) is sent to a SLURM login node on SSH stdin and run by
``python3 -``; the request travels inside that script as a Python string literal, so no user
text ever reaches a shell. It follows the seed's rules for logs: verify the scheduler's StdOut
exists; if not, list the workdir once (never recursive, never ``find``/``du``) for
``*_<jobid>.out`` (``mismatch``; a workdir SLURM holds as a symlink is followed there),
else ``missing`` (``failed`` when it could not be listed: the search never ran); read a
bounded tail (at most
``tail_bytes``, from the caller's byte offset when one is given) or, for a job sent with a
``cursor`` (the bot's warm sweeps), only the bytes appended since, once the file is shown to
be the same one (``probes.remote.logread``); a tail read that fails or returns fewer lines than
the floor is retried once, then reported ``failed`` (never "dead").
Checkpoint trees are searched to their layouts' bounded depth (``probes.remote.tree``) and
trial trees counted whole under a time bound (``probes.remote.trial_roots``).
For one job (``probes.slurm.onejob``) the request may also name scheduler commands
(``probes.remote.scheduler``), run here before the files, in the same trip, and ask for the
logs of the job's neighbours one of them lists (``probes.remote.neighbour_listing``), read
after the job's own files.
Every open, read and listing goes through ``probes.remote.guard`` (only the job's own regular
files, no symlink followed, nothing under /proc /sys /dev, a deadline per operation); the
request has a whole deadline and an answer budget, and a job past either is ``failed`` with
the reason. The process exits when its SSH session goes away.

One job's reads are ``probes.remote.job_files``; the queue's listings and job specs
``probes.remote.queue_listing``; ``squeue --json`` and its document
``probes.remote.queue_document``. This module serves the request and writes the answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple  # noqa: UP035 - Python 3.7

# In-process the reducer and the path rules are imported; when shipped, their sources are
# prepended to this script and each import line below is replaced by ``pass``
# (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.hung_marks import mark_hung
with contextlib.suppress(ImportError):
    from probes.remote.guard import Hung, leave_if_stuck, supervised
with contextlib.suppress(ImportError):
    from probes.remote.scheduler import answer_bytes, exit_with_the_session, run_scheduler
with contextlib.suppress(ImportError):
    from probes.remote.neighbour_listing import neighbour_specs
with contextlib.suppress(ImportError):
    from probes.remote.tree import SEEN
with contextlib.suppress(ImportError):
    from probes.remote.trial_roots import collect_trials
with contextlib.suppress(ImportError):
    from probes.remote.logread import DEEPEN_MAX, read_tail
with contextlib.suppress(ImportError):
    from probes.remote.read_back import FAR_MAX
with contextlib.suppress(ImportError):
    from probes.remote.completion import collect_completion
with contextlib.suppress(ImportError):
    from probes.remote.job_files import (
        DEFAULT_HEAD_BYTES,
        _collect_one,
        _failed,
        _guard,
        _keep,
        given_up,
    )
with contextlib.suppress(ImportError):
    from probes.remote.engine_logs import engine_log, runs_harbor
with contextlib.suppress(ImportError):
    from probes.remote.queue_listing import (
        LISTING_FIELDS,
        _listed,
        _listed_head,
        _listing_specs,
        _queue_specs,
        listing_argv,
        listing_jobs,
    )
with contextlib.suppress(ImportError):
    from probes.remote.queue_document import SQUEUE_FIELD_MAX_CHARS, _queue_head, _run_squeue

PROTOCOL = 1
STREAM = 2
"""The protocol of a streamed answer (``"stream": true`` in the request, see ``_stream``)."""
DEFAULT_ANSWER_BUDGET = 32 << 20
"""Bytes of answer per request when the request names none (``answer_budget_bytes``)."""

__all__ = [  # and names the in-process callers (tests) import from here
    "DEFAULT_HEAD_BYTES", "LISTING_FIELDS", "SQUEUE_FIELD_MAX_CHARS", "_collect_one",
    "_queue_specs", "collect", "collect_queue", "collect_trials", "listing_argv",
    "listing_jobs", "main", "read_tail",
]

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def encode(value: Any) -> bytes:
    """One JSON value as the answer carries it (``scheduler.answer_bytes``): valid UTF-8,
    a path's bytes that are not UTF-8 (a workdir's ``log\\xff_7.out``) as ``\\udcXX``."""
    return answer_bytes(value)


def _each_job(request: Json, started: float | None,
             left: int) -> Iterator[Tuple[str, Json, bytes]]:  # noqa: UP006 - Python 3.7
    """``(key, entry, encoded entry)`` per requested job, in order, each encoded ONCE: the
    answer budget is counted from the very bytes that are sent (``left`` bytes remain)."""
    SEEN.clear()
    deadline_s = float(request.get("deadline_s") or 60.0)
    until = (time.monotonic() if started is None else started) + deadline_s
    budget = int(request.get("answer_budget") or DEFAULT_ANSWER_BUDGET)
    try:
        for job in request.get("jobs", []):
            key = str(job["id"])
            if time.monotonic() >= until:
                entry = _failed(job, f"collector deadline of {deadline_s:g}s reached before"
                                     " this job")
                data = encode(entry)
                left -= len(data)
                yield key, entry, data
                continue
            kept: Json = {}  # what the reader had read, should it be given up
            try:
                entry = supervised(_read_job, (job, dict(
                    request, deepen_bytes=deepen_share(left, budget),
                    far_bytes=far_share(left, budget)), until, kept), until)
            except Hung as exc:
                entry = given_up(job, kept, str(exc))
                if kept.get("guard") is not None and kept["guard"].base:
                    # left stuck there: no later collector touches it while this one waits
                    mark_hung(kept["guard"].base)
            data = encode(entry)
            if len(data) > left:
                entry = _failed(job, f"collector answer budget of {budget}"
                                     f" bytes spent before this job ({len(data)} bytes)")
                data = encode(entry)  # the short reason is sent (never dropped)
            left -= len(data)
            yield key, entry, data
    finally:
        SEEN.clear()


def deepen_share(left: int, budget: int) -> int:
    """Bytes the next job's cold tail may be read back to when it resamples
    (``probes.remote.logread.DEEPEN_MAX`` at most): what is left of the first quarter of the
    answer budget. A read-back is sent whole; bound per job only, five runs' read-backs spent
    the 32 MiB budget by the third and every job after it was failed for want of it."""
    return max(0, min(DEEPEN_MAX, left - (budget - budget // 4)))


def far_share(left: int, budget: int) -> int:
    """Bytes the next job's read-back may send of the lines its lead is counted from past
    what it sends whole (``probes.remote.read_back.FAR_MAX`` at most): what is left of the
    first half of the answer budget, after the read-backs' quarter. Per job only, a request
    of 32 resampling runs each sending its 1 MiB would spend the default 32 MiB budget."""
    return max(0, min(FAR_MAX, left - budget // 2))


def _read_job(job: Json, request: Json, until: float, kept: Json) -> Json:
    """One job's entry: its files (``job_files``), its engine's log, its completion check
    (``kept``: what is read before each step, ``job_files.given_up``)."""
    guard = kept["guard"] = _guard(job, request, until)
    entry = _collect_one(job, request, guard, kept)
    _keep(kept, "engine", entry, [])
    log = entry.get("log") or {}
    if runs_harbor(entry.get("trials") or {}) and log.get("status") != "failed":
        # its engine's own log, if it writes one, for the launch checks
        engine = engine_log(job, log.get("path"), guard)
        if engine is not None:
            log["engine"] = engine
    if job.get("completed"):
        # The SFT completion check (probes.remote.completion): only for a COMPLETED job, a
        # few bounded reads of the user's own files in its workdir and logged outputs,
        # through the same guard.
        entry["completion"] = collect_completion(
            job.get("workdir"), (entry.get("log") or {}).get("text"),
            list(job.get("checkpoint_roots", [])), guard)
    return entry


def collect(request: Json, started: float | None = None) -> Json:
    """Serve one request (see the module docstring); returns a JSON-able dict.

    ``deadline_s`` bounds the whole request and ``answer_budget`` the answer's size in bytes:
    a job reached after either is spent gets ``failed`` with the reason, never dropped.
    """
    budget = int(request.get("answer_budget") or DEFAULT_ANSWER_BUDGET)
    left = int(request.get("answer_budget_left", budget))  # squeue's document came first
    jobs = {key: entry for key, entry, _ in _each_job(request, started, left)}
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
    started = time.monotonic()  # squeue's time counts against the request's deadline
    head, specs = _queue_head(request, started)
    if "json" not in head["squeue"]:
        return {"protocol": PROTOCOL, "jobs": {}, **head}
    # The document travels in the same answer: it is paid from the same budget first.
    budget = int(request.get("answer_budget") or DEFAULT_ANSWER_BUDGET)
    spent = len(encode(head))
    answer = collect(dict(request, jobs=specs, answer_budget_left=budget - spent), started)
    answer.update(head)
    return answer



def _queue_part(request: Json, started: float, write: Callable[[List[Json]], None],  # noqa: UP006
                ) -> Tuple[Json, List[Json], Dict[str, Json]]:  # noqa: UP006
    """What :func:`_stream`'s head says of the queue, the job specs in its order, and the
    specs of the running jobs ``write`` sent before it (key -> spec), for a request with
    ``squeue`` (without: no head yet, the request's own jobs, none sent early)."""
    head: Json = {}
    early: Dict[str, Json] = {}  # noqa: UP006 - key -> the spec read before the head
    specs = list(request.get("jobs", []))
    if "squeue" in request:
        queue = request["squeue"]
        # A bot's sweep holds the document of its last one (``reuse``, its listing's digest):
        # the signature listing comes first, and squeue's document only if the queue changed.
        listed = _listed(request) if "reuse" in queue else None
        if listed is not None and queue["reuse"] and listed.digest == queue["reuse"]:
            head, specs = _listed_head(request, listed)
        else:
            document = None
            if "reuse" in queue or queue.get("listing"):
                # squeue --json runs while the running jobs a fast listing names are read and
                # sent: the document is checked against each of them below. (It starts after
                # the signature listing: that digest is then of a queue no newer than it.)
                ran_squeue: List[Tuple[int, str, str]] = []  # noqa: UP006
                thread = threading.Thread(target=lambda: ran_squeue.append(_run_squeue(request)),
                                          name="squeue", daemon=True)
                thread.start()
                if "reuse" not in queue:
                    first = _listing_specs(request)
                else:
                    first = listed.running if listed is not None else []
                write(first)
                early = {str(spec["id"]): spec for spec in first}
                thread.join()
                document = ran_squeue[0]
            head, specs = _queue_head(request, started, document, listed)
    return head, specs, early


def _stream(request: Json, ran: Any, started: float) -> None:
    """The answer as lines, each written as soon as it is known (``STREAM``): the caller
    parses each job while the next is read. With ``squeue.listing``, first one
    ``<key>\\t<entry>`` line per running job the fast listing names (read while
    ``squeue --json`` runs). Then the head (squeue's document, the scheduler commands'
    output, the job keys in ``order``, and in ``sent`` those of the early lines that stand:
    their spec is the one the document gives), then one ``<key>\\t<entry>`` line per other
    key of ``order``, in that order, then ``{"part": "end"}``. Every line is encoded once and
    its entry's bytes are what the answer budget counts, in the order sent."""
    out = sys.stdout.buffer
    left = int(request.get("answer_budget") or DEFAULT_ANSWER_BUDGET)
    count = 0

    def write(jobs: List[Json]) -> None:  # noqa: UP006
        nonlocal left, count
        for key, _entry, data in _each_job(dict(request, jobs=jobs), started, left):
            # The key is a SLURM job key (digits, "_", "+"): no tab or newline in it.
            out.write(key.encode("utf-8") + b"\t" + data + b"\n")
            out.flush()
            left -= len(data)
            count += 1

    head, specs, early = _queue_part(request, started, write)
    if ran is not None:
        head["scheduler"] = ran
    # A job read early stands only if squeue's document gives it the very same spec; any
    # other is read again below, and the reader drops every early line not in ``sent``.
    sent = [str(s["id"]) for s in specs if early.get(str(s["id"])) == s]
    head.update(protocol=STREAM, part="head", host=os.uname().nodename,
                order=[str(job["id"]) for job in specs], sent=sent)
    line = encode(head) + b"\n"
    out.write(line)
    out.flush()
    left -= len(line)
    kept = set(sent)
    write([s for s in specs if str(s["id"]) not in kept])
    out.write(encode({"protocol": STREAM, "part": "end", "now": time.time(),
                      "jobs": count}) + b"\n")
    out.flush()


def main(request_json: str) -> None:
    """Entry point of the shipped script: request JSON in, answer JSON on stdout (one
    document, or with ``"stream": true`` the lines :func:`_stream` writes)."""
    exit_with_the_session()
    request = json.loads(request_json)
    ran = None
    if "scheduler" in request:  # before the files: their deadline counts from here too
        ran = run_scheduler(list(request["scheduler"]),
                            0.4 * float(request.get("deadline_s") or 60.0))
        # A one-job read's neighbours (probes.remote.neighbour_listing): their logs, after
        # the job's own files, in this same trip.
        request["jobs"] = [*request.get("jobs", []), *neighbour_specs(request, ran)]
    if request.get("stream"):
        _stream(request, ran, time.monotonic())
        leave_if_stuck()
        return
    answer = collect_queue(request) if "squeue" in request else collect(request)
    if ran is not None:
        answer["scheduler"] = ran
    sys.stdout.buffer.write(encode(answer) + b"\n")
    sys.stdout.flush()
    leave_if_stuck()
