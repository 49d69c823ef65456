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

- begins after the last marker of another job that comes before the job's own markers (or
  before the end, when the job has none: it is the latest writer);
- ends after the job's own ``*** JOB`` marker (SLURM ended the job there: whatever follows
  was written by a later attempt), or after its own last step/OOM marker when another job's
  marker follows; else at the end.

Only a plain numeric job id is matched against the marker's (an array task's or a hetjob
component's marker carries its own raw id, which the record does not hold): for those, and for
a log with no marker of another job, the text is the job's whole. An attempt that ended on its
own (a Python traceback and exit 1) leaves no marker, so its lines stay in its successor's part.
"""

from __future__ import annotations

import re

_MARKERS = ("CANCELLED AT", "oom_kill event", "oom-kill event")
_MARK_RE = re.compile(
    r"\*\*\* (JOB|STEP) (\d+)(?:\.\S+)? ON \S+ CANCELLED AT "
    r"|Detected \d+ oom[-_]kill events? in StepId=(\d+)\."
)


def own_span(text: str, job_id: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``job_id``'s own part of ``text`` (character offsets, on line
    boundaries), or ``None`` when that is the whole text."""
    if not job_id.isdigit() or not any(m in text for m in _MARKERS):
        return None
    start, end = 0, len(text)
    own_seen = False
    for match in _MARK_RE.finditer(text):
        marker = match.group(2) or match.group(3)
        line_end = text.find("\n", match.end())
        after = len(text) if line_end < 0 else line_end + 1
        if marker == job_id:
            own_seen, end = True, after
            if match.group(1) == "JOB":  # the job itself was ended here: nothing after is its
                break
        elif own_seen:  # a later attempt's: the job's part ended at its own last marker
            break
        else:
            start = after
    else:
        end = len(text)  # no later writer's marker: the job's part runs to the end
    if (start, end) == (0, len(text)):
        return None
    return start, end


def own_part(text: str, job_id: str) -> tuple[str, int]:
    """``job_id``'s own part of ``text`` and the UTF-8 bytes cut before it."""
    span = own_span(text, job_id)
    if span is None:
        return text, 0
    start, end = span
    return text[start:end], len(text[:start].encode("utf-8", "surrogatepass"))
