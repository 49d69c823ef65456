"""``squeue -O`` listings read by field, and the queue signature's digest.

Policy: STANDARD LIBRARY ONLY and Python 3.7+ (shipped with the collector, see
``probes.remote.script``). A listing prints each field followed by a delimiter holding a
nonce, so it is read by counting fields, never by splitting lines: a job name may hold
anything but the nonce, newlines too. The signature listing's digest is computed by a
streamed sweep's prologue before the collector is compiled (to decide whether squeue's
``--json`` document is printed at all) and by the collector itself; both call
:func:`signature_rows` and :func:`rows_digest`, so the two always agree.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterator, List  # noqa: UP035 - Python 3.7

SIGNATURE_FIELDS = (
    "JobID", "ArrayJobID", "ArrayTaskID", "HetJobID", "HetJobOffset", "State", "Reason",
    "UserName", "SubmitTime", "StartTime", "EndTime", "TimeLimit", "exit_code", "Dependency",
    "RestartCnt", "NodeList", "WorkDir", "STDOUT", "Comment", "Command", "Name",
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
    if out.count(delim) != len(rows) * width or out[out.rfind(delim) + len(delim):].strip():
        return None
    return rows


def rows_digest(rows: List[List[str]]) -> str:  # noqa: UP006
    """A digest of the rows' fields, in a sorted order: squeue orders pending jobs by a
    priority that grows with their age, which is no change to any job."""
    return hashlib.sha256(json.dumps(sorted(rows)).encode("utf-8")).hexdigest()
