"""Parsers for SLURM's own output: ``squeue --json``, ``sacct --json``, ``scontrol show job -o``.

Policy: pure functions over text (or its parsed JSON), tolerant of every shape SLURM 22.05 to
25.05 prints (string vs list ``job_state``; integer vs ``{set, infinite, number}`` times and
exit codes; ``standard_output`` unexpanded in 22.05). Unknown keys are ignored; a record we
cannot read at all is skipped, never guessed. Malformed JSON raises :class:`CommandError`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from probes.errors import CommandError
from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import array_ids as _array_ids
from probes.remote.stdio_pattern import (
    ended_before,
    expand_pattern,
    has_stdio_token,
    het_ids,
    own_stderr,
)
from probes.remote.stdio_pattern import job_key as _job_id
from probes.remote.stdio_pattern import job_user as _job_user
from probes.remote.stdio_pattern import slurm_number as _number
from probes.remote.stdio_pattern import slurm_text as _text
from probes.slurm.scontrol import DEADLINE_REASON, parse_dependency

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


SUSPENDED_REASON = "Suspended"
"""The reason a suspended job's record carries (``scontrol suspend``, gang scheduling, a
preemption by suspension): the contract has no SUSPENDED state, so it is RUNNING (it holds its
nodes), and this reason says it is not running; SLURM's own reason for it is ``None``."""
_SUSPENDED_NAMES = frozenset({"SUSPENDED", "STOPPED"})

def _state_names(raw_state: Any) -> list[str]:
    names = raw_state if isinstance(raw_state, list) else [raw_state]
    return [n.split(" ")[0].upper() for n in names if isinstance(n, str) and n.strip()]


_DESCRIBED_REASONS = {"job requeued in held state": "JobHeldUser"}
"""Descriptions squeue ``-o %r`` prints in place of the reason, as the reason its --json
gives (22.05: ``scontrol requeuehold`` sets JobHeldUser with this description): a held job
read as waiting said 'pending (job requeued in held state), expected start ...'."""


def state_reason(raw_state: Any, reason: str | None) -> str | None:
    """``reason``; :data:`DEADLINE_REASON` for a job in state DEADLINE whatever reason it was
    printed with; :data:`SUSPENDED_REASON` for a suspended job SLURM gave none."""
    names = _state_names(raw_state)
    if "DEADLINE" in names:
        return DEADLINE_REASON
    if reason:
        return _DESCRIBED_REASONS.get(reason, reason)
    return SUSPENDED_REASON if _SUSPENDED_NAMES.intersection(names) else None


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


def epoch(raw: Any) -> datetime | None:
    """A SLURM epoch (int or ``{set, number}``); unset, zero or corrupt -> None."""
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


def record_from_squeue(
    cluster: str, job: Mapping[str, Any], now: datetime,
) -> SchedulerRecord | None:
    """One ``squeue --json`` (or sacct-shaped) job object -> a record; ``None`` if unreadable.

    ``job`` is JSON as parsed (dicts, lists, strings, numbers, booleans, ``None``): every field
    below then has its declared type by construction, so the record is built as validation
    would build it, without validating (:func:`_record`)."""
    job_id = _number(job.get("job_id"))
    if job_id is None:
        return None
    state_block = _block(job, "state")
    raw_state = job.get("job_state", state_block.get("current"))
    state = parse_state(raw_state)
    code, signal = _exit_code(job.get("exit_code"))
    array_job, array_task = _array_ids(job)
    dependency = _text(job.get("dependency"))
    key, labels = _key_and_labels(job, job_id, array_job, array_task)
    return _record({  # SchedulerRecord's fields, in its order; every one given but the pods'
        "cluster": str(cluster),
        "job_id": key,
        "name": str(job.get("name") or ""),
        "user": _text(job.get("user_name")) or _text(job.get("user")),
        "state": state,
        "reason": state_reason(raw_state, _text(job.get("state_reason"))
                               or _text(state_block.get("reason"))),
        **_time_fields(job, state, now),
        "workdir": _text(job.get("current_working_directory"))
        or _text(job.get("working_directory")),
        "stdout_path": _text(job.get("standard_output")) or _text(job.get("stdout_expanded")),
        "stderr_path": own_stderr(job),
        "dependency": dependency,
        "depends_on": parse_dependency(dependency),
        "exit_code": code,
        "exit_signal": signal,
        "command": _text(job.get("command")),
        "comment": _text(_comment(job)),
        "nodes": _text(job.get("nodes")),
        "restarts": _number(job.get("restart_cnt")) or 0,
        "array_job_id": str(array_job) if array_task is not None and array_job else None,
        "array_task_id": str(array_task) if array_task is not None else None,
        "pods_total": None,
        "pods_running": None,
        "labels": labels,
    })


def _time_fields(job: Mapping[str, Any], state: JobState, now: datetime) -> dict[str, Any]:
    """The record's time fields, in its order: submitted, eligible, started, ended (not for a
    pending or running job), elapsed and the limit in seconds."""
    times = _block(job, "time")
    start = epoch(job.get("start_time", times.get("start")))
    end = epoch(job.get("end_time", times.get("end")))
    limit_min = _number(job.get("time_limit", times.get("limit")))
    return {
        "submit_time": epoch(job.get("submit_time", times.get("submission"))),
        "eligible_time": epoch(job.get("eligible_time", times.get("eligible"))),
        "start_time": start,
        "end_time": end if state not in {JobState.PENDING, JobState.RUNNING} else None,
        "elapsed_s": _elapsed(state, start, end, now, _number(times.get("elapsed"))),
        "time_limit_s": limit_min * 60 if limit_min is not None else None,
    }


def _comment(job: Mapping[str, Any]) -> Any:
    """The job's comment (squeue's string, or sacct's ``{"job": ...}`` block's)."""
    comment = job.get("comment")
    return comment.get("job") if isinstance(comment, dict) else comment


def _key_and_labels(job: Mapping[str, Any], job_id: int, array_job: int | None,
                    array_task: int | None) -> tuple[str, dict[str, str]]:
    """The record's job id (an array task's or a hetjob component's) and its labels."""
    het = het_ids(job)
    key = _job_id(job_id, array_job, array_task, het)
    labels = _array_labels(job_id, array_task, job.get("array_task_string"),
                           _array_throttle(job) if array_job else None)
    if het[0] is not None:  # a hetjob component: its own id is what %j expands to
        labels = {**labels, "slurm_job_id": str(job_id)}
    return key, labels


_GIVEN = frozenset(SchedulerRecord.model_fields) - {"pods_total", "pods_running"}
"""The fields :func:`record_from_squeue` gives (its ``model_fields_set``)."""
_set = object.__setattr__


def _record(fields: dict[str, Any]) -> SchedulerRecord:
    """``SchedulerRecord(**fields)`` (pods' fields left out) for ``fields`` that hold every
    field, in order, each of its declared type: strings (exact ``str``), ints (no bools), a
    ``JobState``, aware datetimes, a tuple and a dict of strings, or ``None``. Validating them
    would only copy (12 us of a record's 30: a sweep's head builds hundreds, before any job
    is read); the model has no validator that could change them
    (``tests/probes/slurm/test_record_direct.py`` holds both to that)."""
    record = SchedulerRecord.__new__(SchedulerRecord)
    _set(record, "__dict__", fields)
    _set(record, "__pydantic_fields_set__", set(_GIVEN))
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def _array_labels(job_id: int, array_task: int | None, tasks: Any,
                  throttle: int | None = None) -> dict[str, str]:
    # A pending array's unsplit remainder is one record under the array's own id; its task
    # spec (``0-499%8``) says how many tasks it stands for (report/grouping.py counts them).
    # The throttle (``%8``; 0: none) tells a restart chain by array (``%1``, each task
    # resuming the last) from a grid run in waves (report/chain.py).
    limit = {"array_throttle": str(throttle)} if throttle is not None else {}
    if array_task is not None:
        return {"slurm_job_id": str(job_id), **limit}
    spec = {"array_tasks": tasks} if isinstance(tasks, str) and tasks.strip() else {}
    return {**spec, **limit} if spec else {}


def _array_throttle(job: Mapping[str, Any]) -> int | None:
    """squeue's ``array_max_tasks`` or sacct's ``array.limits.max.running.tasks`` (0: no
    throttle), or None when the object has neither."""
    raw = job.get("array_max_tasks")
    if raw is None:
        limits = _block(_block(_block(_block(job, "array"), "limits"), "max"), "running")
        raw = limits.get("tasks")
    value = _number(raw)
    return value if value is not None and value >= 0 else None


def _block(job: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = job.get(key)
    return value if isinstance(value, dict) else {}


def _elapsed(
    state: JobState, start: datetime | None, end: datetime | None, now: datetime,
    recorded: int | None,
) -> int | None:
    if state is JobState.PENDING:
        # A pending job has not run: its start/end are SLURM's projection (a --begin job's
        # "elapsed" would be negative, 4294967236 as a u32), so it has no elapsed time.
        return None
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
        data = json.loads(past_banner(text))
    except json.JSONDecodeError as exc:
        raise CommandError(f"squeue --json printed invalid JSON: {exc}") from exc
    except RecursionError as exc:  # arrays nested past the parser (a tampered recording)
        raise CommandError("squeue --json printed JSON nested too deep") from exc
    return records_from_squeue(data, cluster=cluster, now=now, users=users)


def past_banner(text: str) -> str:
    """``text`` from its first line that opens a JSON object (all of it when none does): a
    login node's shell may print text on stdout before any command's own (a motd echoed by
    ``~/.bashrc``, ``module load`` notes), and a JSON answer is read past it."""
    if text.startswith("{"):
        return text
    at = text.find("\n{")
    return text[at + 1:] if at >= 0 else text


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
        raw, job_id=_array_own_id(record) if array else _het_own_id(record, master),
        array_job_id=(record.array_job_id or master) if array else None,
        array_task_id=array_task, user=record.user, name=record.name, workdir=record.workdir,
        node=record.nodes,
    )
    if path is None or path == raw:
        return record
    return _with_path(record, path)


def _with_path(record: SchedulerRecord, path: str) -> SchedulerRecord:
    """``record.model_copy(update={"stdout_path": path})`` as pydantic makes it (a shallow copy
    of the fields, ``stdout_path`` replaced and counted as set), without its generic copy
    machinery (4 us of a record's expansion: the sweep's head expands hundreds)."""
    copied = SchedulerRecord.__new__(SchedulerRecord)
    _set(copied, "__dict__", {**record.__dict__, "stdout_path": path})
    _set(copied, "__pydantic_fields_set__", record.__pydantic_fields_set__ | {"stdout_path"})
    _set(copied, "__pydantic_extra__", None)  # extra="forbid": never any
    _set(copied, "__pydantic_private__", None)  # no private attributes
    return copied


def _het_own_id(record: SchedulerRecord, key: str) -> str:
    # %j of a hetjob component (keyed "L+N") is the component's own job id (its label).
    return record.labels.get("slurm_job_id", key) if "+" in key else key


def _array_own_id(record: SchedulerRecord) -> str:
    # %j of an array task is the task's own job id, which squeue reports as job_id; a record
    # keyed "A_T" no longer carries it, so fall back to the master id (what %A gives).
    return record.labels.get("slurm_job_id") or record.job_id.partition("_")[0]


def stdout_final(before: SchedulerRecord, after: SchedulerRecord) -> bool:
    """Whether :func:`expand_stdout` made ``after`` from ``before`` with the path slurmstepd
    writes (it is the same object when the pattern could not be expanded, or was already a
    plain absolute path). Such a path is never re-expanded nor taken from scontrol, whose
    22.05 ``StdOut`` is wrong for several tokens: a ``%%`` kept doubled, ``%%j`` printed
    ``%<id>``, ``%3a`` or ``%J`` left raw; and its literal ``%`` (``run_100%_7.out``) or
    ``%j`` (from ``%%j``) is no token left to fill."""
    if after is not before:
        return True
    raw = before.stdout_path
    return raw is not None and raw.startswith("/") and "%" not in raw and "\\" not in raw


def needs_scontrol(record: SchedulerRecord, final: bool | None = None) -> bool:
    """True when the record's log path is still raw or unknown after :func:`expand_stdout`
    (``final``: :func:`stdout_final`; without it, judged from the path's own tokens)."""
    path = record.stdout_path
    if not record.workdir or not path or not path.startswith("/"):
        return True
    return not final if final is not None else has_stdio_token(path)
