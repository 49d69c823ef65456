"""The part of a log that is one job's own, where several jobs wrote the file one after another.

A chain run often sends every attempt's output to one file (``sbatch -o run.out
--open-mode=append`` for the launch and each afterany restart). Read whole, such a log gives a
restart the steps, metrics and faults of the attempts before it (a healthy-looking row while
the restart is still in bring-up, or the predecessor's NCCL timeout as its own fault), and gives
an ended attempt the steps and faults of the ones after it.

Policy: SLURM marks where a job it ended stops writing. slurmstepd prints, into that job's own
StdOut, ``slurmstepd: error: *** JOB 1332 ON node CANCELLED AT 2026-... DUE TO TIME LIMIT ***``
(also ``... DUE TO PREEMPTION``, ``... DUE TO NODE FAILURE``, or nothing after a plain scancel;
``*** STEP 1332.0 ON ...`` for a step) and, for a cgroup OOM kill, ``Detected 1 oom_kill event
in StepId=1332.batch``. With those lines as boundaries, a job's own part:

- begins after the last marker of an earlier job (a lower id: a restart is submitted after
  the job it restarts) that comes before the job's own lines;
- ends after the job's own ``*** JOB`` marker (SLURM ended the job there: whatever follows
  was written by a later attempt), or after its own last step/OOM marker when a later job's
  marker follows; else at the end.

A job SLURM reran under its own id (``scontrol requeue``, ``--requeue`` after a preemption or
a node failure) appends its rerun after its own ``*** JOB`` marker: a job that is live again
(pending, running, completing) and a marker ``DUE TO JOB REQUEUE`` never end its part. An
earlier attempt that ended on its own (a Python traceback and exit 1, a COMPLETED run) leaves
no marker: its part runs up to the start of the next later job's marker line (that attempt's
lines begin at no marked line, so they stay in its part), never from after it; and its lines
stay in its successor's part. Only a plain numeric job id is matched against the marker's (an
array task's or a hetjob component's marker carries its own raw id, which the record does not
hold): for those, and for a log with no marker of another job, the text is the job's whole.
"""

from __future__ import annotations

import re

_MARKERS = ("CANCELLED AT", "StepId=")
"""Substrings every marker holds: two scans find most logs have none (the regex after)."""
_MARK_RE = re.compile(
    r"\*\*\* (JOB|STEP) (\d+)(?:\.\S+)? ON \S+ CANCELLED AT "
    r"|Detected \d+ oom[-_]kill events? in StepId=(\d+)\."
)
_REQUEUE = "DUE TO JOB REQUEUE"


def own_span(text: str, job_id: str, *, live: bool = False) -> tuple[int, int] | None:
    """``(start, end)`` of ``job_id``'s own part of ``text`` (character offsets, on line
    boundaries), or ``None`` when that is the whole text. ``live``: the job is pending,
    running or completing (what follows its own markers is its own rerun)."""
    if not job_id.isdigit() or not any(m in text for m in _MARKERS):
        return None
    own = int(job_id)
    start, end = 0, len(text)
    last_own: int | None = None  # just after the job's own last marker
    went_on = False  # the job wrote on after that marker (a rerun under its own id)
    for match in _MARK_RE.finditer(text):
        marker = int(match.group(2) or match.group(3))
        line_end = text.find("\n", match.end())
        after = len(text) if line_end < 0 else line_end + 1
        if marker == own:
            rerun = live or _REQUEUE in text[match.end():after]
            if match.group(1) == "JOB" and not rerun:
                end = after  # the job itself was ended here: nothing after is its
                break
            last_own, went_on = after, rerun
        elif marker > own or last_own is not None:
            # A later attempt's end: the job's part is over before that attempt's lines, at
            # its own last end, or (none, or it went on after it) where no line marks it.
            end = (last_own if last_own is not None and not went_on
                   else text.rfind("\n", 0, match.start()) + 1)
            break
        else:  # an earlier attempt's end: the job's part begins after it
            start = after
    if (start, end) == (0, len(text)):
        return None
    return start, end


def own_part(text: str, job_id: str, *, live: bool = False) -> tuple[str, int]:
    """``job_id``'s own part of ``text`` and the UTF-8 bytes cut before it."""
    span = own_span(text, job_id, live=live)
    if span is None:
        return text, 0
    start, end = span
    return text[start:end], len(text[:start].encode("utf-8", "surrogatepass"))
