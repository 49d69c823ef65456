"""``scontrol show job -o`` read so that no job's text can forge another job's fields.

Policy: scontrol prints every value raw (no quoting), and a job's owner chooses several of
them (JobName, Command, WorkDir, Comment, StdErr/StdIn/StdOut, MailUser), newlines and
`` Key=`` included. So:

* A record starts only at a line that begins ``JobId=<digits> `` with an id squeue knows, and
  only where no earlier record's user text can be: the values the caller already knows byte
  for byte from squeue (``Known``: name, command, workdir) are skipped whole, so a forged
  ``\\nJobId=...`` inside them is never a record start. A job id that still starts more
  than one record is ambiguous and gets no scontrol fields at all (a forger can deny its
  victim the enrichment, never feed it).
* Within a record each key is read from where scontrol prints it (22.05 to 25.05 order):
  the scheduler's keys from between the name and ``Command=``, the paths from after
  ``WorkDir=`` in the order StdErr, StdIn, StdOut, ending at ``Power=``. Text in a later
  user field (``MailUser=x StdOut=/planted``) cannot add or replace a key.
* What stays ambiguous is a job's own text against its own fields: a StdErr that itself
  contains `` StdIn=`` can shift that job's StdIn. That is the job's own fields from its own
  text, never another job's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import slurm_text as _text

_DEP_ELEMENT = re.compile(r"(after\w*):([0-9_:+*]+)")
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
_START = re.compile(r"^JobId=(\d+) ", re.MULTILINE)
_HEAD = re.compile(
    r"JobId=(\d+) (?:ArrayJobId=(\d+) ArrayTaskId=(\d+) |HetJobId=(\d+) HetJobOffset=(\d+) )?")
_PATHS = ("StdErr", "StdIn", "StdOut")
_AFTER_WORKDIR = ("Comment", "AdminComment", "SystemComment", "StdErr")
"""Keys scontrol may print right after WorkDir (the comments only when set)."""


@dataclass(frozen=True)
class Known:
    """A job's user-chosen values as squeue printed them (``None``: not known)."""

    name: str | None = None
    command: str | None = None
    workdir: str | None = None


def known_from(record: SchedulerRecord) -> Known:
    """What squeue already told us about a job, to read its scontrol record with."""
    return Known(name=record.name, command=record.command, workdir=record.workdir)


DEADLINE_REASON = "DeadLine"
"""The reason a job SLURM ended at its ``--deadline`` carries (state DEADLINE): the contract
has no DEADLINE state, so it is TIMEOUT, and this reason says it is no walltime TIMEOUT
(``report.holds``). squeue gives it; a record whose state alone says DEADLINE (sacct's, one
printed with another reason, scontrol's ``JobState=DEADLINE``) gets it too."""


def parse_dependency(raw: str | None) -> tuple[str, ...]:
    """Job ids named in a dependency string such as ``afterany:12(unfulfilled),afterok:13``."""
    if not raw or raw in {"(null)", "null"}:
        return ()
    ids: list[str] = []
    for _kind, targets in _DEP_ELEMENT.findall(raw):
        for target in targets.split(":"):
            job = target.split("+")[0].split("(")[0]
            if job and job[0].isdigit():
                ids.append(job)
    return tuple(dict.fromkeys(ids))


def parse_scontrol_line(line: str) -> dict[str, str]:
    """Split text of scheduler-chosen ``Key=value`` pairs (first occurrence of a key wins).

    Values may contain spaces and ``=`` (TRES), so a value runs until the next `` Key=``.
    Use it on text no user chose; a whole record goes through :func:`parse_scontrol_record`.
    """
    fields: dict[str, str] = {}
    text = line.rstrip("\n")
    matches = list(_SCONTROL_KEY.finditer(text))
    for i, m in enumerate(matches):
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        fields.setdefault(m.group(1), text[m.end():stop].strip())
    return fields


def _skip(text: str, at: int, key: str, value: str | None,
          until: tuple[str, ...]) -> tuple[str, int]:
    """``(value, end)`` of `` key=`` at ``at``: the known value if it is there verbatim
    (followed by one of the ``until`` keys), else up to the first ``until`` key after it (or
    the end of the line)."""
    start = at + len(key) + 2  # " Key="
    if value is not None and any(text.startswith(f"{value} {k}=", start) for k in until):
        return value, start + len(value)
    found = [i for i in (text.find(f" {k}=", start) for k in until) if i >= 0]
    stop = min(found) if found else text.find("\n", start)
    stop = len(text) if stop < 0 else stop
    return text[start:stop], stop


def _head(text: str, begin: int, known: Known) -> tuple[dict[str, str], int]:
    """The fields up to WorkDir, and where the record's known user text ends (absolute)."""
    line_end = text.find("\n", begin)
    line_end = len(text) if line_end < 0 else line_end
    name_at = text.find(" JobName=", begin, line_end)
    if name_at < 0 or text.find(" UserId=", name_at) < 0:
        # Not scontrol's layout (no name, or no UserId after it): keys as they come.
        return parse_scontrol_line(text[begin:line_end]), line_end
    fields = parse_scontrol_line(text[begin:name_at])
    fields["JobName"], end = _skip(text, name_at, "JobName", known.name, ("UserId",))
    command_at = text.find(" Command=", end)
    if command_at < 0:
        return fields, end
    for key, value in parse_scontrol_line(text[end:command_at]).items():
        fields.setdefault(key, value)
    fields["Command"], end = _skip(text, command_at, "Command", known.command, ("WorkDir",))
    if text.startswith(" WorkDir=", end):
        fields["WorkDir"], end = _skip(text, end, "WorkDir", known.workdir, _AFTER_WORKDIR)
    return fields, end


def _tail(text: str, start: int, stop: int) -> dict[str, str]:
    """StdErr, StdIn, StdOut in ``[start, stop)``, each after the one before, StdOut to Power."""
    fields: dict[str, str] = {}
    at = start
    for i, key in enumerate(_PATHS):
        found = text.find(f" {key}=", at, stop)
        if found < 0:
            continue
        begin = found + len(key) + 2
        stop_key = _PATHS[i + 1] if i + 1 < len(_PATHS) else "Power"
        end = text.find(f" {stop_key}=", begin, stop)
        end = stop if end < 0 else end
        fields[key] = text[begin:end]
        at = end
    return fields


def parse_scontrol_record(text: str, known: Known | None = None) -> dict[str, str]:
    """One job's record (the whole of ``text``), read as the module docstring says."""
    fields, end = _head(text, 0, known or Known())
    fields.update(_tail(text, end, len(text.rstrip("\n"))))
    return fields


def parse_scontrol_all(
    text: str, wanted: Collection[str] | None = None,
    known: Mapping[str, Known] | None = None,
) -> dict[str, dict[str, str]]:
    """``scontrol show job -o`` for many jobs -> ``job id -> fields`` (array ids as ``A_T``).

    With ``wanted``, only those jobs are kept; ``known`` gives squeue's values per job id.
    """
    known = known or {}
    out: dict[str, dict[str, str]] = {}
    ambiguous: set[str] = set()
    starts = [m.start() for m in _START.finditer(text)]
    if known:  # squeue named every job there is: a start with another id is some job's text
        starts = [b for b in starts if any(k in known for k in _ids(text[b:b + 200]))]
    i = 0
    while i < len(starts):
        begin = starts[i]
        ids = _ids(text[begin:begin + 200])
        fields, safe = _head(text, begin, next((known[k] for k in ids if k in known), Known()))
        # A start inside this record's known user text is part of that text, not a record.
        while i + 1 < len(starts) and starts[i + 1] < safe:
            i += 1
        stop = starts[i + 1] if i + 1 < len(starts) else len(text)
        while stop > safe and text[stop - 1] == "\n":
            stop -= 1
        fields.update(_tail(text, safe, stop))
        for key in ids:
            if key in out or key in ambiguous:  # two records claim one id: trust neither
                ambiguous.add(key)
                out.pop(key, None)
            elif wanted is None or any(k in wanted for k in ids):
                out[key] = fields
        i += 1
    return out


def _ids(head: str) -> list[str]:
    """The keys a record is known by: its own id and, for an array task, ``A_T``, for a
    hetjob component ``L+N`` (the ids a sweep names them by)."""
    m = _HEAD.match(head)
    if m is None:
        return []
    keys = [m.group(1)]
    if m.group(2) and m.group(3):
        keys.insert(0, f"{m.group(2)}_{m.group(3)}")
    elif m.group(4) and m.group(5):
        keys.insert(0, f"{m.group(4)}+{m.group(5)}")
    return keys


_BATCH_TOKEN = re.compile(r"%(%|(\d*)([NsntJ]))")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _batch_filled(stdout: str | None, batch_host: str | None, job_id: str | None) -> str | None:
    """scontrol's StdOut with the tokens slurmstepd fills for a batch script and scontrol
    (22.05) prints raw: ``%N`` its node (``BatchHost``), ``%s`` ``batch``, ``%t``/``%n`` 0 and
    ``%J`` the job id (``p_%j_%2t_%3n_%J_%4s.out`` is written ``p_328_00_000_328_batch.out``).
    Only a host name is put in the path (``..`` or a ``/`` never is)."""
    if not stdout or "%" not in stdout:
        return stdout
    host = batch_host if batch_host and _HOST.fullmatch(batch_host) else None
    values = {"s": "batch", "t": "0", "n": "0",
              "J": job_id if job_id and job_id.isdigit() else None, "N": host}

    def fill(m: re.Match[str]) -> str:
        value = values.get(m[3]) if m[1] != "%" else None
        if value is None:
            return m[0]
        width = min(int(m[2].lstrip("0") or 0), 10) if m[3] != "N" else 0
        return value.zfill(width) if value.isdigit() else value

    return _BATCH_TOKEN.sub(fill, stdout)


def merge_scontrol(record: SchedulerRecord, fields: Mapping[str, str] | None, *,
                   keep_stdout: bool = False) -> SchedulerRecord:
    """Prefer scontrol's expanded StdOut/WorkDir/Dependency (and its NodeList and Restarts)
    where squeue's are missing or raw; ``keep_stdout``: the record's log path is the one
    slurmstepd writes (``probes.slurm.parse.stdout_final``), never scontrol's."""
    if not fields:
        return record
    update: dict[str, Any] = {}
    stdout = _batch_filled(_text(fields.get("StdOut")), _text(fields.get("BatchHost")),
                           fields.get("JobId"))
    if stdout and not keep_stdout and (not record.stdout_path or "%" in record.stdout_path
                                       or not record.stdout_path.startswith("/")):
        update["stdout_path"] = stdout
    stderr = _batch_filled(_text(fields.get("StdErr")), _text(fields.get("BatchHost")),
                           fields.get("JobId"))
    # StdErr names StdOut's file when the job gave it none; a token left raw is not guessed.
    if (stderr and not record.stderr_path and stderr not in (stdout, "/dev/null")
            and "%" not in stderr and stderr.startswith("/")):
        update["stderr_path"] = stderr
    workdir = _text(fields.get("WorkDir"))
    if workdir and not record.workdir:
        update["workdir"] = workdir
    dep = _text(fields.get("Dependency"))
    if dep:
        ids = tuple(dict.fromkeys((*record.depends_on, *parse_dependency(dep))))
        if ids != record.depends_on:
            update["depends_on"] = ids
        if not record.dependency:
            update["dependency"] = dep
    if (fields.get("JobState", "").upper() == "DEADLINE"
            and record.state is JobState.TIMEOUT and record.reason != DEADLINE_REASON):
        update["reason"] = DEADLINE_REASON  # its --deadline, whatever squeue printed
    exit_raw = fields.get("ExitCode", "")
    if record.exit_code is None and re.fullmatch(r"\d+:\d+", exit_raw):
        code, sig = exit_raw.split(":")
        update["exit_code"] = int(code)
        update["exit_signal"] = int(sig) or None
    # squeue -o (``jobtables job``, SLURM without --json) prints no nodes: without them a
    # job that ran and lost its log reads as one that never ran (report.judge).
    if not record.nodes and (nodes := _text(fields.get("NodeList"))):
        update["nodes"] = nodes
    # squeue -o has no restart count either: a requeued run read as its first launch.
    restarts = fields.get("Restarts", "")
    if not record.restarts and restarts.isdigit() and int(restarts):
        update["restarts"] = int(restarts)
    if not record.user and (uid := _text(fields.get("UserId"))):
        update["user"] = uid.split("(")[0]
    # squeue -o has no array throttle; scontrol prints ArrayTaskThrottle for a throttled
    # array only (report.chain: a %1 array is a restart chain, any other runs in waves).
    if fields.get("ArrayJobId") and "array_throttle" not in record.labels:
        throttle = fields.get("ArrayTaskThrottle", "0")
        if throttle.isdigit():
            update["labels"] = {**record.labels, "array_throttle": throttle}
    return record.model_copy(update=update) if update else record
