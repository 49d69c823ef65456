"""Which live jobs' logs the digest could not read, since when, and what the thread says of it.

Policy: a job whose log could not be fetched (``fetch-failed``) or found (``log-missing``) reads
``unknown`` in the parent, and the change detection tells nothing of it (``report.changes``:
its end is no news either, and a trouble told before it is kept). A one- or two-sweep blip (an
SSH channel closed mid-read) stays so. A live job still unreadable at the third scheduled sweep
(:data:`TOLD_AFTER_INTERVALS` sweep intervals after the first, so a retry a minute later is
not one) is told once in the thread, a line with no table: its run is not being judged. Its
return is told once, only if the outage was; a job that ends meanwhile is told by its end.
As :mod:`bot.cluster_watch` does for a cluster. Pure: the digest keeps the state in its
``seen`` document (``logs``: encoded job key -> ``{"since": ISO, "told": bool}``); the jobs of a
cluster not read this sweep keep theirs. A job whose output its owner sent to ``/dev/null``
(``sbatch -o /dev/null``, no log of its own found either: :func:`discarded_output`) has no log
to lose or get back: it is not told (the parent names it unknown, its row says why).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from bot.cluster_watch import _when
from probes.models import ACTIVE_STATES, ClusterFacts
from report.cells import one_line
from report.changes import Key, decode_key, encode_key
from report.chunks import no_backticks, unformatted
from report.models import JobReport, Report

UNREADABLE_FLAGS = frozenset({"fetch-failed", "log-missing"})
TOLD_AFTER_INTERVALS = 1.5
"""How long a log stays unreadable before it is told: past the second scheduled sweep that
found it so (one interval after the first), at the third (two intervals; a sweep that runs
late by a few seconds still counts)."""
SHOWN = 3
"""Up to this many jobs a sweep are a line each; more (a filesystem gone under many jobs) are
one line naming this many."""


def _ref(job: JobReport) -> str:
    return (f"`{no_backticks(one_line(f'{job.cluster}:{job.job_id}'))}` "
            f"{unformatted(one_line(job.name))}")


def _named(jobs: Sequence[JobReport]) -> str:
    named = ", ".join(_ref(j) for j in jobs[:SHOWN])
    return named + (f" +{len(jobs) - SHOWN} more" if len(jobs) > SHOWN else "")


def unreadable_line(jobs: Sequence[JobReport], since: datetime) -> str:
    """The thread's line for jobs whose logs have been unreadable since ``since``, raw
    (escaped with the sweep's reply)."""
    if len(jobs) == 1:
        return (f"⚠️ {_ref(jobs[0])}: log unreadable since {since:%H:%M}Z: its run is not "
                "being judged; the parent shows it unknown")
    return (f"⚠️ logs of {len(jobs)} jobs unreadable since {since:%H:%M}Z ({_named(jobs)}): "
            "their runs are not being judged; the parent shows them unknown")


def readable_line(jobs: Sequence[JobReport], since: datetime, now: datetime) -> str:
    """The thread's line for jobs whose told unreadable logs read again, raw."""
    span = f"unreadable from {since:%H:%M}Z to {now:%H:%M}Z"
    if len(jobs) == 1:
        return f"✅ {_ref(jobs[0])}: log read again ({span})"
    return f"✅ logs of {len(jobs)} jobs read again ({_named(jobs)}; {span})"


DISCARD = "/dev/null"


def discarded_output(facts: Sequence[ClusterFacts]) -> set[Key]:
    """The jobs with no log because their StdOut is ``/dev/null`` and the collector found no
    log of their own beside it (``probes.remote.job_files``: a discard, looked for as an
    absent StdOut): by their owner's choice, not an outage."""
    return {(c.name, j.record.job_id) for c in facts for j in c.jobs
            if j.log is not None and j.log.status == "missing"
            and j.log.requested_path == DISCARD}


def log_watch(before: Any, report: Report, now: datetime, *, interval_s: float,
              discarded: Collection[Key] = (),
              ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The ``logs`` state for the next sweep and this sweep's thread lines (``discarded``:
    :func:`discarded_output`, never told)."""
    doc: dict[str, Any] = before if isinstance(before, dict) else {}
    state: dict[str, dict[str, Any]] = {}
    gone: list[tuple[JobReport, datetime]] = []
    back: list[tuple[JobReport, datetime]] = []
    for job in report.jobs:
        key = encode_key((job.cluster, job.job_id))
        was = doc.get(key) if isinstance(doc.get(key), dict) else None
        since = _when(was.get("since")) if was else None
        told = bool(was and was.get("told")) and since is not None
        live = job.state in ACTIVE_STATES
        if (job.cluster, job.job_id) in discarded:
            continue  # no log by its owner's choice: nothing lost, nothing to come back
        if live and UNREADABLE_FLAGS & set(job.flags):
            since = since or now
            if not told and (now - since).total_seconds() >= TOLD_AFTER_INTERVALS * interval_s:
                gone.append((job, since))
                told = True
            state[key] = {"since": since.isoformat(), "told": told}
        elif told and live and since is not None:
            back.append((job, since))
    unread = {c.name for c in report.clusters if c.status != "ok"}
    for key, was in doc.items():
        found: Key = decode_key(key) if isinstance(key, str) else ("", "")
        if key not in state and found[0] in unread and isinstance(was, dict):
            state[key] = was  # its cluster not read: its jobs as last read
    lines: list[str] = []
    if 0 < len(gone) <= SHOWN:
        lines += [unreadable_line([job], since) for job, since in gone]
    elif gone:
        lines.append(unreadable_line([j for j, _ in gone], min(s for _, s in gone)))
    if 0 < len(back) <= SHOWN:
        lines += [readable_line([job], since, now) for job, since in back]
    elif back:
        lines.append(readable_line([j for j, _ in back], min(s for _, s in back), now))
    return state, lines
