"""Parsers for SLURM's own output: ``squeue --json``, ``sacct --json``, ``scontrol show job -o``.

Policy: pure functions over text (or its parsed JSON), tolerant of every shape SLURM 22.05 to
25.05 prints (string vs list ``job_state``; integer vs ``{set, infinite, number}`` times and
exit codes; ``standard_output`` unexpanded in 22.05). Unknown keys are ignored; a record we
cannot read at all is skipped, never guessed. Malformed JSON raises :class:`CommandError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from probes.errors import CommandError
from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import array_ids as _array_ids
from probes.remote.stdio_pattern import ended_before, expand_pattern, has_stdio_token
from probes.remote.stdio_pattern import job_key as _job_id
from probes.remote.stdio_pattern import job_user as _job_user
from probes.remote.stdio_pattern import slurm_number as _number
from probes.remote.stdio_pattern import slurm_text as _text

_STATE_NAMES = {s.value for s in JobState}
_STATE_ALIASES = {
    "CONFIGURING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "RESIZING": JobState.RUNNING,
    "REVOKED": JobState.CANCELLED,
    "SPECIAL_EXIT": JobState.FAILED,
    "BOOT_FAIL": JobState.NODE_FAIL,
    "DEADLINE": JobState.TIMEOUT,
}
_DEP_ELEMENT = re.compile(r"(after\w*):([0-9_:+*]+)")


def parse_state(raw: Any) -> JobState:
    """Map a SLURM state (string like ``RUNNING``/``CANCELLED by 0`` or a flag list) to ours."""
    names: list[str]
    if isinstance(raw, list):
        names = [str(x).upper() for x in raw]
    elif isinstance(raw, str):
        names = [raw.split()[0].upper()] if raw.strip() else []
    else:
        return JobState.UNKNOWN
    if "COMPLETING" in names:
        return JobState.COMPLETING
    for name in names:
        if name in _STATE_NAMES:
            return JobState(name)
        if name in _STATE_ALIASES:
            return _STATE_ALIASES[name]
    return JobState.UNKNOWN


def _epoch(raw: Any) -> datetime | None:
    value = _number(raw)
    if value is None or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):  # a corrupt epoch is unknown, not a crash
        return None


def _exit_code(raw: Any) -> tuple[int | None, int | None]:
    """``(return code, signal)`` from any version's exit code.

    squeue up to v0.0.39 prints the raw wait status (``36608`` is exit 143, ``15`` is
    SIGTERM), as an int or a ``{set, number}`` object; sacct and v0.0.40+ print an object
    with ``return_code`` and ``signal`` already split.
    """
    if isinstance(raw, dict) and ("return_code" in raw or "status" in raw):
        code = _number(raw.get("return_code"))
        signal = raw.get("signal")
        sig = _number(signal.get("id")) if isinstance(signal, dict) else None
        return code, (sig or None)
    status = _number(raw)
    if status is None or status < 0:
        return None, None
    return (status >> 8) & 0xFF, (status & 0x7F) or None


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


def record_from_squeue(
    cluster: str, job: Mapping[str, Any], now: datetime,
) -> SchedulerRecord | None:
    """One ``squeue --json`` (or sacct-shaped) job object -> a record; ``None`` if unreadable."""
    job_id = _number(job.get("job_id"))
    if job_id is None:
        return None
    state_block = _block(job, "state")
    state = parse_state(job.get("job_state", state_block.get("current")))
    times = _block(job, "time")
    start = _epoch(job.get("start_time", times.get("start")))
    end = _epoch(job.get("end_time", times.get("end")))
    limit_min = _number(job.get("time_limit", times.get("limit")))
    code, signal = _exit_code(job.get("exit_code"))
    array_job, array_task = _array_ids(job)
    dependency = _text(job.get("dependency"))
    comment = job.get("comment")
    if isinstance(comment, dict):
        comment = comment.get("job")
    return SchedulerRecord(
        cluster=cluster,
        job_id=_job_id(job_id, array_job, array_task),
        labels=_array_labels(job_id, array_task, job.get("array_task_string")),
        name=str(job.get("name") or ""),
        user=_text(job.get("user_name")) or _text(job.get("user")),
        state=state,
        reason=_text(job.get("state_reason")) or _text(state_block.get("reason")),
        submit_time=_epoch(job.get("submit_time", times.get("submission"))),
        start_time=start,
        end_time=end if state not in {JobState.PENDING, JobState.RUNNING} else None,
        elapsed_s=_elapsed(state, start, end, now, _number(times.get("elapsed"))),
        time_limit_s=limit_min * 60 if limit_min is not None else None,
        workdir=_text(job.get("current_working_directory")) or _text(job.get("working_directory")),
        stdout_path=_text(job.get("standard_output")) or _text(job.get("stdout_expanded")),
        dependency=dependency,
        depends_on=parse_dependency(dependency),
        exit_code=code,
        exit_signal=signal,
        command=_text(job.get("command")),
        comment=_text(comment),
        nodes=_text(job.get("nodes")),
        restarts=_number(job.get("restart_cnt")) or 0,
        array_job_id=str(array_job) if array_task is not None and array_job else None,
        array_task_id=str(array_task) if array_task is not None else None,
    )


def _array_labels(job_id: int, array_task: int | None, tasks: Any) -> dict[str, str]:
    # A pending array's unsplit remainder is one record under the array's own id; its task
    # spec (``0-499%8``) says how many tasks it stands for (report/grouping.py counts them).
    if array_task is not None:
        return {"slurm_job_id": str(job_id)}
    return {"array_tasks": tasks} if isinstance(tasks, str) and tasks.strip() else {}


def _block(job: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = job.get(key)
    return value if isinstance(value, dict) else {}


def _elapsed(
    state: JobState, start: datetime | None, end: datetime | None, now: datetime,
    recorded: int | None,
) -> int | None:
    if recorded is not None and recorded > 0:
        return recorded
    if start is None:
        return None
    stop = end if end is not None and state not in {JobState.RUNNING, JobState.COMPLETING} else now
    return max(0, int((stop - start).total_seconds()))


def parse_squeue_json(
    text: str, *, cluster: str, now: datetime, users: Collection[str] | None = None,
) -> list[SchedulerRecord]:
    """Parse ``squeue --json`` or ``sacct --json`` output of any supported version.

    With ``users``, other users' jobs are skipped before any record is built (a big cluster's
    queue is mostly other people's jobs).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"squeue --json printed invalid JSON: {exc}") from exc
    return records_from_squeue(data, cluster=cluster, now=now, users=users)


def records_from_squeue(
    data: Any, *, cluster: str, now: datetime, users: Collection[str] | None = None,
    since: datetime | None = None,
) -> list[SchedulerRecord]:
    """:func:`parse_squeue_json` for a document already parsed (the one-trip collector's).

    With ``since``, jobs that ended before it are skipped before any record is built.
    """
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise CommandError("squeue --json output has no 'jobs' list")
    wanted = set(users) if users is not None else None
    cutoff = since.timestamp() if since is not None else None
    records = (
        record_from_squeue(cluster, j, now) for j in jobs
        if isinstance(j, dict) and (wanted is None or _job_user(j) in wanted)
        and not ended_before(j, cutoff)
    )
    return [r for r in records if r is not None]


def slurm_release(data: Any) -> str | None:
    """The SLURM release a parsed ``--json`` document names in its ``meta`` (e.g. ``22.05.8``)."""
    meta = data.get("meta") if isinstance(data, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    release = slurm.get("release") if isinstance(slurm, dict) else None
    return str(release) if release else None


_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_scontrol_line(line: str) -> dict[str, str]:
    """Split one ``scontrol show job -o`` line into ``Key -> value``.

    Values may contain spaces (Command, WorkDir, StdOut) and ``=`` (TRES), so a value runs
    until the next `` Key=`` whose key is followed by ``=``.
    """
    fields: dict[str, str] = {}
    matches = list(_SCONTROL_KEY.finditer(line.rstrip("\n")))
    for i, m in enumerate(matches):
        start = m.end()
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(line.rstrip("\n"))
        key = m.group(1)
        if key not in fields:
            fields[key] = line[start:stop].strip()
    return fields


_SCONTROL_IDS = re.compile(r"JobId=(\d+) (?:ArrayJobId=(\d+) ArrayTaskId=(\d+) )?")


def parse_scontrol_all(
    text: str, wanted: Collection[str] | None = None,
) -> dict[str, dict[str, str]]:
    """``scontrol show job -o`` for many jobs -> ``job id -> fields`` (array ids as ``A_T``).

    With ``wanted``, only those jobs' lines are split (the rest are skipped cheaply).
    """
    out: dict[str, dict[str, str]] = {}
    keep = set(wanted) if wanted is not None else None
    for line in text.splitlines():
        if "JobId=" not in line:
            continue
        if keep is not None and (m := _SCONTROL_IDS.match(line)) is not None and not (
            m.group(1) in keep or f"{m.group(2)}_{m.group(3)}" in keep
        ):
            continue
        fields = parse_scontrol_line(line)
        job_id = fields.get("JobId", "")
        if fields.get("ArrayJobId") and fields.get("ArrayTaskId", "").isdigit():
            out[f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"] = fields
        if job_id:
            out[job_id] = fields
    return out


def merge_scontrol(record: SchedulerRecord, fields: Mapping[str, str] | None) -> SchedulerRecord:
    """Prefer scontrol's expanded StdOut/WorkDir/Dependency where squeue's are missing or raw."""
    if not fields:
        return record
    update: dict[str, Any] = {}
    stdout = _text(fields.get("StdOut"))
    if stdout and (not record.stdout_path or "%" in record.stdout_path
                   or not record.stdout_path.startswith("/")):
        update["stdout_path"] = stdout
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
    exit_raw = fields.get("ExitCode", "")
    if record.exit_code is None and re.fullmatch(r"\d+:\d+", exit_raw):
        code, sig = exit_raw.split(":")
        update["exit_code"] = int(code)
        update["exit_signal"] = int(sig) or None
    if not record.user and (uid := _text(fields.get("UserId"))):
        update["user"] = uid.split("(")[0]
    return record.model_copy(update=update) if update else record


def expand_stdout(record: SchedulerRecord) -> SchedulerRecord:
    """The record with its raw ``--output`` pattern expanded as slurmctld shows ``StdOut``.

    The rules are ``probes.remote.stdio_pattern.expand_pattern`` (shared with the shipped collector,
    which expands the same patterns on the login node); a pattern it cannot expand is left raw
    so the caller asks scontrol.
    """
    raw = record.stdout_path
    master, _, task = record.job_id.partition("_")
    # A plain-format (squeue -o) record of an array task is only keyed "A_T".
    array_task = record.array_task_id or task or None
    array = array_task is not None
    path = expand_pattern(
        raw, job_id=_array_own_id(record) if array else master,
        array_job_id=(record.array_job_id or master) if array else None,
        array_task_id=array_task, user=record.user, name=record.name, workdir=record.workdir,
    )
    if path is None or path == raw:
        return record
    return record.model_copy(update={"stdout_path": path})


def _array_own_id(record: SchedulerRecord) -> str:
    # %j of an array task is the task's own job id, which squeue reports as job_id; a record
    # keyed "A_T" no longer carries it, so fall back to the master id (what %A gives).
    return record.labels.get("slurm_job_id") or record.job_id.partition("_")[0]


def needs_scontrol(record: SchedulerRecord) -> bool:
    """True when the record's log path is still raw or unknown after :func:`expand_stdout`."""
    path = record.stdout_path
    if not record.workdir or not path or not path.startswith("/"):
        return True
    return has_stdio_token(path)


PLAIN_FORMAT = "%i|%u|%T|%r|%V|%S|%e|%l|%E|%M|%j|%Z|%o"
"""``squeue -o`` format used when ``--json`` is unavailable (pipe-separated).

The ten fields a user cannot choose come first and the three they can (job name, workdir,
batch command: any of them may contain ``|``) last, so a job named ``x|alice|RUNNING`` can
never pass for another user's job or another state; extra pipes are kept in the name.
``%o`` is the batch command (squeue's ``-o`` has no StdOut letter: that comes from scontrol).
Run it with ``SLURM_TIME_FORMAT=%s`` so that times are epoch seconds, not the cluster's local
time without a zone.
"""
_PLAIN_FORMAT = PLAIN_FORMAT
_PLAIN_FIXED = 10
"""Fields before the free-text tail (name, workdir, command)."""


def parse_squeue_plain(text: str, *, cluster: str, now: datetime) -> list[SchedulerRecord]:
    """Parse ``squeue -h -t all -o PLAIN_FORMAT`` output (times as epoch seconds or ISO)."""
    records = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < _PLAIN_FIXED + 3 or not parts[0].strip():
            continue
        job_id, user, state_raw, reason, submit, start, end, limit, dep, used = (
            p.strip() for p in parts[:_PLAIN_FIXED])
        tail = parts[_PLAIN_FIXED:]
        name = "|".join(tail[:-2]).strip()
        workdir, command = tail[-2].strip(), tail[-1].strip()
        state = parse_state(state_raw)
        start_at = _plain_time(start)
        elapsed = parse_duration(used)
        records.append(SchedulerRecord(
            cluster=cluster, job_id=job_id, name=name, user=_text(user), state=state,
            reason=_text(reason), submit_time=_plain_time(submit), start_time=start_at,
            end_time=_plain_time(end) if state not in {JobState.RUNNING, JobState.PENDING}
            else None,
            elapsed_s=elapsed if elapsed is not None or start_at is None
            else max(0, int((now - start_at).total_seconds())),
            time_limit_s=parse_duration(limit),
            workdir=_text(workdir), command=_text(command), dependency=_text(dep),
            depends_on=parse_dependency(_text(dep)),
        ))
    return records


def _plain_time(raw: str) -> datetime | None:
    """Epoch seconds (``SLURM_TIME_FORMAT=%s``) or ISO local time (assumed UTC)."""
    raw = raw.strip()
    if raw.isdigit():
        return _epoch(int(raw))
    return _iso(raw)


def _iso(raw: str) -> datetime | None:
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


def filter_users(records: Iterable[SchedulerRecord], users: Iterable[str]) -> list[SchedulerRecord]:
    wanted = set(users)
    return [r for r in records if not wanted or r.user in wanted]
