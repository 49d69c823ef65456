"""``squeue -o`` for clusters without ``--json`` (SLURM < 21.08), read so no name can forge.

Policy: squeue prints a job's name, workdir and command raw, so a ``|`` or a newline in them
would let one job pass for several, or swallow the next. The format therefore wraps every
record and separates every field with a fresh random token per sweep (``plain_format``):
squeue prints it literally, and no job submitted before the sweep can contain it. A record
is the text between two record tokens, fields the text between field tokens: N jobs give N
records, each field byte for byte what was submitted. A record with the wrong field count is
skipped, a job id seen twice is kept once (the first). Times are asked as epoch seconds
(``SLURM_TIME_FORMAT=%s``), never the cluster's zone-less local time.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import slurm_text as _text
from probes.slurm.parse import epoch, parse_state, state_reason
from probes.slurm.scontrol import parse_dependency

PLAIN_FIELDS = ("%i", "%u", "%T", "%r", "%V", "%S", "%e", "%l", "%E", "%M", "%j", "%Z", "%o")
"""Job id, user, state, reason, submit, start, end, limit, dependency, used, then the three a
user chooses: name, workdir, batch command (squeue's ``-o`` has no StdOut: scontrol has it)."""
PLAIN_FORMAT = "|".join(PLAIN_FIELDS)
"""The same fields ``|``-separated (the captured fixtures' layout; see ``parse_squeue_plain``)."""


def new_nonce() -> str:
    """A per-sweep token: hex only, so squeue prints it as it is."""
    return secrets.token_hex(8)


def plain_format(nonce: str) -> str:
    """The ``squeue -o`` format for one sweep: ``<R:nonce>`` before each record, ``<F:nonce>``
    between its fields."""
    return f"<R:{nonce}>" + f"<F:{nonce}>".join(PLAIN_FIELDS)


def _records(text: str, nonce: str | None) -> list[list[str]]:
    if nonce is None:  # a capture taken with PLAIN_FORMAT: one line per job, no hostile names
        return [line.split("|") for line in text.splitlines()]
    out = []
    for chunk in text.split(f"<R:{nonce}>")[1:]:
        # squeue ends each record with one newline; anything after it is not the job's.
        out.append(chunk.removesuffix("\n").split(f"<F:{nonce}>"))
    return out


def parse_squeue_plain(
    text: str, *, cluster: str, now: datetime, nonce: str | None = None,
) -> list[SchedulerRecord]:
    """Parse ``squeue -h -t all -o plain_format(nonce)`` output (see the module docstring).

    Without ``nonce``, ``text`` is in ``PLAIN_FORMAT`` (captured fixtures): one job per line,
    the name taking any extra ``|``.
    """
    records: dict[str, SchedulerRecord] = {}
    fixed = len(PLAIN_FIELDS) - 3
    for parts in _records(text, nonce):
        if len(parts) < len(PLAIN_FIELDS) or (nonce and len(parts) != len(PLAIN_FIELDS)):
            continue
        if not parts[0].strip():
            continue
        job_id, user, state_raw, reason, submit, start, end, limit, dep, used = (
            p.strip() for p in parts[:fixed])
        name = "|".join(parts[fixed:-2]) if nonce else "|".join(parts[fixed:-2]).strip()
        workdir, command = parts[-2], parts[-1]
        if job_id in records:
            continue
        state = parse_state(state_raw)
        start_at = _plain_time(start)
        elapsed = parse_duration(used)
        if state is JobState.PENDING:  # squeue's start of a pending job is a projection
            elapsed = None
        elif elapsed is None and start_at is not None:
            elapsed = max(0, int((now - start_at).total_seconds()))
        records[job_id] = SchedulerRecord(
            cluster=cluster, job_id=job_id, name=name, user=_text(user), state=state,
            reason=state_reason(state_raw, _text(reason)),
            submit_time=_plain_time(submit), start_time=start_at,
            end_time=_plain_time(end) if state not in {JobState.RUNNING, JobState.PENDING}
            else None,
            elapsed_s=elapsed, time_limit_s=parse_duration(limit),
            workdir=_raw(workdir) if nonce else _text(workdir),
            command=_raw(command) if nonce else _text(command),
            dependency=_text(dep), depends_on=parse_dependency(_text(dep)),
        )
    return list(records.values())


def _raw(value: str) -> str | None:
    """A user-chosen value byte for byte; squeue's spellings of nothing -> None."""
    return None if value in {"", "(null)", "N/A"} else value


def _plain_time(raw: str) -> datetime | None:
    """Epoch seconds (``SLURM_TIME_FORMAT=%s``) or ISO local time (assumed UTC)."""
    raw = raw.strip()
    if raw.isdigit():
        return epoch(int(raw))
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def parse_duration(raw: str) -> int | None:
    """``D-HH:MM:SS``, ``HH:MM:SS`` or ``MM:SS`` -> seconds; ``UNLIMITED``/invalid -> None."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", raw.strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
