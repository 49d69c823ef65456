"""The queue as the collector reads it before (or instead of) ``squeue --json``'s document.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script before ``collector``, see ``probes.remote.script``). Squeue job objects
become collector job specs here (``_queue_specs``, pending jobs left out, a log path that
cannot be expanded listed as unexpanded). The fast listing (``listing_argv``) names the
running jobs in a few milliseconds, read while the document prints; the signature listing
(``signature_listing``, issue 12) gives a digest that lets a bot's sweep skip the document
when nothing the probe reads has changed, handed out only where the listing was shown to
agree with its document (``_agreeing_digest``). Either listing only saves time: a failure
costs nothing but that.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, List, Tuple  # noqa: UP035 - Python 3.7

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.scheduler import run_argv
with contextlib.suppress(ImportError):
    from probes.remote.listing import (
        SIGNATURE_FIELDS,
        estimated,
        listing_digest,
        listing_rows,
        listing_timeout,
        signature_argv,
        signature_rows,
    )
with contextlib.suppress(ImportError):
    from probes.remote.stdio_pattern import (
        array_ids,
        ended_before,
        expand_pattern,
        expand_roots,
        het_ids,
        job_key,
        job_user,
        own_stderr,
        run_templates,
        slurm_number,
        slurm_text,
    )

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def _queue_specs(jobs: list[Json], request: Json) -> tuple[list[Json], list[str]]:
    """The collector job entries for squeue job objects (what ``collector_request`` builds)."""
    offsets = request.get("offsets") or {}
    cursors = request.get("cursors")  # by job key; present (even empty) on the bot's sweeps
    roots = request.get("roots") or {}
    specs: list[Json] = []
    unexpanded: list[str] = []
    for job in jobs:
        own = slurm_number(job.get("job_id"))
        if own is None or _queue_pending(job.get("job_state", _queue_state(job))):
            continue
        array_job, array_task = array_ids(job)
        key = job_key(own, array_job, array_task, het_ids(job))
        is_task = array_task is not None
        name, user = str(job.get("name") or ""), job_user(job)
        workdir = (slurm_text(job.get("current_working_directory"))
                   or slurm_text(job.get("working_directory")))
        stdout = expand_pattern(
            slurm_text(job.get("standard_output")) or slurm_text(job.get("stdout_expanded")),
            job_id=str(own), array_job_id=str(array_job) if is_task and array_job else None,
            array_task_id=str(array_task) if is_task else None, user=user, name=name,
            workdir=workdir, node=slurm_text(job.get("nodes")))
        if stdout is None:
            unexpanded.append(key)
            continue
        checkpoint = list(roots.get("checkpoint") or [])
        filled = [expand_roots(templates, workdir=workdir, name=name, job_id=key, user=user)
                  for templates in (checkpoint, list(roots.get("trial") or []),
                                    run_templates(checkpoint))]
        state = job.get("job_state", _queue_state(job))
        spec = {"id": key, "user": user, "stdout": stdout, "workdir": workdir,
                "offset": int(offsets.get(stdout) or 0), "completed": _queue_completed(state),
                "checkpoint_roots": filled[0], "trial_roots": filled[1],
                "run_checkpoint_roots": filled[2]}
        stderr = own_stderr(job)
        if stderr is not None:
            spec["stderr"] = stderr
        command = slurm_text(job.get("command"))
        if command:  # its save flags (--ckpt_path ...) name checkpoint dirs: probes.remote.tree
            spec["command"] = command
        if isinstance(cursors, dict) and _queue_names(state) == ["RUNNING"]:
            # Only a running job's log is resumed: an ended job is judged on its whole tail.
            spec["cursor"] = cursors.get(key)
        specs.append(spec)
    return specs, unexpanded


def _queue_state(job: Json) -> Any:
    block = job.get("state")
    return block.get("current") if isinstance(block, dict) else None


def _queue_names(raw: Any) -> list[str]:
    return [str(x).upper() for x in raw] if isinstance(raw, list) else str(raw or "").split()[:1]


def _queue_completed(raw: Any) -> bool:
    """Plainly COMPLETED: the one state the SFT completion check is for."""
    return _queue_names(raw) == ["COMPLETED"]


def _queue_pending(raw: Any) -> bool:
    """Plainly PENDING (not collected). Anything else is collected; the probe has the last word."""
    names = _queue_names(raw)
    return "PENDING" in names and "COMPLETING" not in names

LISTING_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "HetJobID", "HetJobOffset", "UserName",
                  "WorkDir", "STDOUT", "STDERR", "Command", "Name")
"""``squeue -O`` fields of the listing, the job name last (it may hold anything, newlines too).
Each is a field a spec reads (``_queue_specs``): a running job's early read stands only if its
document gives the very same spec (the command: its save flags, ``probes.remote.tree``)."""


def listing_argv(users: List[str], delim: str) -> List[str]:  # noqa: UP006
    """The listing: the users' RUNNING jobs, each field followed by ``delim`` (a nonce)."""
    fmt = ",".join(f"{field}:{delim}" for field in LISTING_FIELDS)
    return ["squeue", "-h", "-t", "RUNNING", "--user=" + ",".join(users), "-O", fmt]


def listing_jobs(out: str, delim: str) -> List[Json]:  # noqa: UP006
    """The listing's rows as squeue job objects (the keys ``_queue_specs`` reads, a job
    RUNNING); a row that does not read as one (cut short, a field not a number) is left out
    (:func:`listing_rows` reads the rows)."""
    jobs: List[Json] = []  # noqa: UP006
    for fields in listing_rows(out, delim, len(LISTING_FIELDS)):
        (job_id, array_job, array_task, het_job, het_offset, user, workdir, stdout, stderr,
         command, name) = fields
        own = slurm_number(job_id)
        if own is None or not user:
            continue
        task = slurm_number(array_task)  # N/A for a job that is not an array task
        jobs.append({"job_id": own, "array_job_id": slurm_number(array_job) or 0,
                     "array_task_id": task, "het_job_id": slurm_number(het_job) or 0,
                     "het_job_offset": slurm_number(het_offset), "user_name": user, "name": name,
                     "current_working_directory": workdir, "standard_output": stdout,
                     "standard_error": stderr, "command": command, "job_state": "RUNNING"})
    return jobs


def _listing_specs(request: Json) -> List[Json]:  # noqa: UP006
    """The collector specs of the users' running jobs as the fast listing gives them (a
    few milliseconds, while ``squeue --json`` takes a few hundred): what
    ``collector._stream`` reads before squeue's document is in. Nothing on a failed listing."""
    users = sorted(set(map(str, request["squeue"]["users"])))
    if not users:  # `--user=` names nobody: no listing
        return []
    delim = "|" + os.urandom(8).hex() + "|"
    status, out, _ = run_argv(listing_argv(users, delim), listing_timeout(request))
    if status != 0:
        return []
    try:  # only the users' jobs, whatever squeue printed (as _queue_head keeps them)
        jobs = [j for j in listing_jobs(out, delim) if j["user_name"] in users]
        specs = _queue_specs(jobs, request)[0]
    except Exception:  # the listing only saves time: never let it cost the sweep
        return []
    return _first_specs(specs)


def _first_specs(specs: List[Json]) -> List[Json]:  # noqa: UP006
    """One spec per key, its first row's (early lines are sent once per key)."""
    first: Dict[str, Json] = {}  # noqa: UP006
    for spec in specs:
        first.setdefault(str(spec["id"]), spec)
    return list(first.values())


EARLY_LISTING: Any = globals().get("EARLY_LISTING")
"""The signature listing a streamed sweep's prologue ran before this module was run
(``probes.remote.script``): ``(argv, exit status, stdout, stderr, digest)`` (the digest
None unless its rows read whole), or None. Taken by the
first ``signature_listing`` of that very argv."""


def signature_listing(request: Json) -> Tuple[List[Json], str] | None:  # noqa: UP006
    """``(jobs, digest)`` of the users' jobs as the signature listing gives them: each row as
    a squeue job object (the keys ``_queue_specs`` and ``ended_before`` read), and a digest
    of every row's fields (in a sorted order, so squeue's ordering of pending jobs by a
    priority that grows with age does not count). None when the listing failed.

    Policy (issue 12): squeue's ``--json`` document takes a few hundred milliseconds to
    print and this listing a few tens. A bot's sweep sends the digest of the listing that
    preceded the document it holds (``squeue.reuse``); an equal digest now means no field
    the probe reads has changed since that document was printed, and the document is not
    printed again. Only a digest of a listing that was shown to agree with its document
    (:func:`_agreeing_digest`) is ever handed out."""
    global EARLY_LISTING
    users = sorted(set(map(str, request["squeue"]["users"])))
    if not users:
        return None
    delim = str(request["squeue"].get("delim") or "|" + os.urandom(8).hex() + "|")
    argv = signature_argv(users, delim)
    early, EARLY_LISTING = EARLY_LISTING, None
    if early is not None and list(early[0]) == argv:  # its digest taken there already
        status, out, digest = early[1], early[2], early[4]
    else:
        status, out, _ = run_argv(argv, listing_timeout(request))
        digest = listing_digest(out, delim, len(SIGNATURE_FIELDS)) if status == 0 else None
    rows = signature_rows(out, delim, len(SIGNATURE_FIELDS)) if digest is not None else None
    if rows is None or digest is None:
        return None  # failed, or rows out of step or cut short: no signature from it
    jobs = []
    for row in rows:
        job = dict(zip(SIGNATURE_FIELDS, row))  # noqa: B905 - Python 3.7 (rows are whole)
        jobs.append({"estimated": estimated(row), "start_time": slurm_number(job["StartTime"]),
                     "job_id": slurm_number(job["JobID"]),
                     "array_job_id": slurm_number(job["ArrayJobID"]) or 0,
                     "array_task_id": slurm_number(job["ArrayTaskID"]),
                     "het_job_id": slurm_number(job["HetJobID"]) or 0,
                     "het_job_offset": slurm_number(job["HetJobOffset"]),
                     "user_name": job["UserName"], "name": job["Name"],
                     "current_working_directory": job["WorkDir"],
                     "standard_output": job["STDOUT"], "standard_error": job["STDERR"],
                     "command": job["Command"], "job_state": job["State"],
                     "end_time": slurm_number(job["EndTime"]),
                     "nodes": job["NodeList"]})  # %N in STDOUT (stdio_pattern)
    return jobs, digest


class Listed:
    """The signature listing's jobs, their digest, and the specs built from them once: those
    of the users' kept jobs (as ``_queue_head`` keeps the document's), the unexpanded keys,
    and the running jobs' specs (one per key: read before squeue's document is in)."""

    def __init__(self, request: Json, jobs: List[Json], digest: str) -> None:  # noqa: UP006
        queue = request["squeue"]
        users, since = set(map(str, queue["users"])), queue.get("since")
        self.jobs, self.digest = jobs, digest
        kept = [j for j in jobs if job_user(j) in users and not ended_before(j, since)]
        running = _queue_specs([j for j in kept if j["job_state"] == "RUNNING"], request)
        other = _queue_specs([j for j in kept if j["job_state"] != "RUNNING"], request)
        self.specs: List[Json] = running[0] + other[0]  # noqa: UP006
        self.unexpanded: List[str] = running[1] + other[1]  # noqa: UP006
        self.running: List[Json] = _first_specs(running[0])  # noqa: UP006
        self.estimates: Dict[str, int | None] = {  # noqa: UP006
            str(j["job_id"]): _estimate(j.get("start_time"))
            for j in jobs if j["estimated"] and job_user(j) in users}
        """Each estimated row's (``listing.estimated``) start time, epoch seconds or None:
        sent with ``same``, for the probe to set in the document it holds. Its end time is
        not sent: nothing reads a pending job's end (``parse_squeue_json`` gives it none), and
        squeue prints it otherwise than its document where the job has no time limit (NONE
        in the listing, the start plus 2^32 - 60 s in the document: SLURM 22.05)."""


def _listed(request: Json) -> Listed | None:
    """The signature listing read (:class:`Listed`), or None where it failed or raised: it
    only saves time, never costs the sweep."""
    try:
        got = signature_listing(request)
        return Listed(request, *got) if got is not None else None
    except Exception:
        return None


def _listed_head(request: Json, listed: Listed) -> Tuple[Json, List[Json]]:  # noqa: UP006
    """``_queue_head``'s ``(head, specs)`` for a queue unchanged since the document the bot
    holds: the specs built from the signature listing (which agreed with that document)."""
    return {"squeue": {"exit": 0, "same": listed.digest, "stderr": "",
                       "estimates": listed.estimates},
            "unexpanded": listed.unexpanded}, listed.specs


def _estimate(raw: Any) -> int | None:
    """An estimated time as epoch seconds; None where SLURM has none (0, unset, N/A)."""
    value = slurm_number(raw)
    return value if value is not None and value > 0 else None


def _agreeing_digest(request: Json, listed: Listed, document_jobs: List[Json],  # noqa: UP006
                     specs: List[Json], unexpanded: List[str]) -> str | None:  # noqa: UP006
    """The listing's digest if the listing reads as its document does: the same jobs of the
    users (ids, and the end time of each that ended: what ``ended_before`` reads), and the
    same specs and unexpanded jobs built from either (the document's are ``specs`` and
    ``unexpanded``), and the same estimated start times. Otherwise None: on a SLURM that
    prints a field of the listing otherwise than its document, the document is always
    printed. Nor is a digest handed out for a document that carries a job's elapsed time
    itself (a sacct-shaped ``time`` block): a document reused later would give that job the
    elapsed time of when it was printed."""
    users = set(map(str, request["squeue"]["users"]))
    if any(isinstance(j.get("time"), dict) and "elapsed" in j["time"] for j in document_jobs):
        return None

    def ends(rows: List[Json]) -> Dict[Tuple[Any, Any], int]:  # noqa: UP006
        # ended_before(job, inf): the job ended at a known time (a running job's end time is
        # its limit, which squeue prints as NONE where the document gives a date).
        count: Dict[Tuple[Any, Any], int] = {}  # noqa: UP006
        for j in rows:
            if job_user(j) in users:
                key = (slurm_number(j.get("job_id")), slurm_number(j.get("end_time"))
                       if ended_before(j, float("inf")) else None)
                count[key] = count.get(key, 0) + 1
        return count

    if sorted(listed.unexpanded) != sorted(unexpanded) or ends(listed.jobs) != ends(document_jobs):
        return None
    # Estimated times are left out of the digest and the start sent with each reuse: the
    # listing's must be the document's, job by job (a job whose estimate moved in between: no
    # digest). The end is not compared: nothing reads it (Listed.estimates).
    theirs_est = {key: _estimate(j.get("start_time")) for j in document_jobs
                  for key in (str(slurm_number(j.get("job_id"))),) if key in listed.estimates}
    if theirs_est != listed.estimates:
        return None
    mine = {str(x["id"]): x for x in listed.specs}
    theirs = {str(x["id"]): x for x in specs}
    if len(mine) != len(listed.specs) or len(theirs) != len(specs) or mine != theirs:
        return None
    return listed.digest
