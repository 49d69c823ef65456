"""``squeue -O`` listings read by field, and the queue signature's digest.

Policy: STANDARD LIBRARY ONLY and Python 3.7+ (shipped with the collector, see
``probes.remote.script``). A listing prints each field followed by a delimiter holding a
nonce, so it is read by counting fields, never by splitting lines: a job name may hold
anything but the nonce, newlines too. The signature listing's digest is computed by a
streamed sweep's prologue (to decide whether squeue's ``--json`` document is printed at all)
or, without one, by the collector itself; both call :func:`listing_digest`, so the two
always agree.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterator, List  # noqa: UP035 - Python 3.7

SIGNATURE_FIELDS = (
    "JobID", "ArrayJobID", "ArrayTaskID", "HetJobID", "HetJobOffset", "State", "Reason",
    "UserName", "SubmitTime", "StartTime", "EndTime", "TimeLimit", "exit_code", "Dependency",
    "RestartCnt", "NodeList", "WorkDir", "STDOUT", "STDERR", "Comment", "Command", "Name",
)
"""``squeue -O`` fields of the queue's signature listing: each field squeue prints of the job
object keys the probe reads (``SQUEUE_JOB_KEYS``), the name last (it may hold anything)."""


def signature_argv(users: List[str], delim: str) -> List[str]:  # noqa: UP006
    """The signature listing: every job of the users, in every state squeue still holds,
    times as epoch seconds (``SLURM_TIME_FORMAT``, as squeue's document gives them)."""
    fmt = ",".join(f"{field}:{delim}" for field in SIGNATURE_FIELDS)
    return ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-t", "all",
            "--user=" + ",".join(users), "-O", fmt]


def listing_timeout(request: Dict[str, Any]) -> float:  # noqa: UP006
    """Seconds a listing may take: a tenth of the request's deadline, at most ten."""
    return min(10.0, 0.1 * float(request.get("deadline_s") or 60.0))


def listing_rows(out: str, delim: str, width: int) -> Iterator[List[str]]:  # noqa: UP006
    """The rows of a ``squeue -O`` listing of ``width`` fields, each followed by ``delim``.

    squeue prints each field followed by ``delim`` and each row followed by a newline, so the
    text split at ``delim`` is the fields in order, every row's first one after the first row
    opening with that newline. No field can hold ``delim`` without its nonce; a name may hold
    anything else (a newline after a delimiter too: rows are counted in fields, never split
    at newlines). Rows stop at the first one out of step (not squeue's rows)."""
    tokens = out.split(delim)
    for at in range(0, len(tokens) - width, width):  # the last token follows the last field
        fields = tokens[at:at + width]
        if at:
            if not fields[0].startswith("\n"):
                return  # out of step: nothing after this is read
            fields[0] = fields[0][1:]
        yield fields


def signature_rows(out: str, delim: str, width: int) -> List[List[str]] | None:  # noqa: UP006
    """Every row of a listing, or None unless the whole text reads as whole rows (every
    delimiter in a row, nothing after the last one but its newline)."""
    rows = list(listing_rows(out, delim, width))
    last = out.rfind(delim)
    tail = out[last + len(delim):] if last >= 0 else out  # no delimiter: no row, no text
    if out.count(delim) != len(rows) * width or tail.strip():
        return None
    return rows


_STATE, _START, _END = (SIGNATURE_FIELDS.index(f) for f in ("State", "StartTime", "EndTime"))


def estimated(fields: List[str]) -> bool:  # noqa: UP006
    """A signature row whose start and end times are SLURM's estimate, left out of the
    digest: a pending job whose JobID is a number (22.05 prints an unsplit array's pending
    remainder as its own id, ``123``, with ArrayTaskID ``1-9``; a JobID in any other form
    keeps its times in the digest).
    The backfill scheduler rewrites such estimates every few seconds, so a queue that holds
    pending jobs would never read as unchanged; a bot's sweep that reuses its document is
    sent these rows' start times instead (``queue_listing.Listed.estimates``)."""
    return fields[_STATE].strip() == "PENDING" and fields[0].strip().isdigit()


def listing_digest(out: str, delim: str, width: int) -> str | None:
    """A digest of a listing's rows, in a sorted order (squeue orders pending jobs by a
    priority that grows with their age, which is no change to any job), or None exactly when
    :func:`signature_rows` reads none. Taken on the text, each row's fields joined by NUL
    (squeue prints C strings: no field holds one), before any field is read: it decides
    whether squeue's document is printed at all, so it is on the sweep's path. A signature
    listing's estimated rows (:func:`estimated`) count without their start and end times."""
    blanks = width == len(SIGNATURE_FIELDS)
    if "\0" in out:
        return None
    tokens = out.split(delim)
    count = len(tokens) - 1
    if count % width or tokens[-1].strip():
        return None  # a row cut short, or something after the last row
    rows = []
    for at in range(0, count, width):
        first = tokens[at]
        if at:
            if first[:1] != "\n":
                return None  # out of step
            first = first[1:]
        fields = [first, *tokens[at + 1:at + width]]
        if blanks and estimated(fields):
            fields[_START] = fields[_END] = ""
        rows.append("\0".join(fields))
    rows.sort()
    return hashlib.sha256("\n".join(rows).encode("utf-8", "surrogatepass")).hexdigest()
