"""Where a SLURM job's files are: its ``--output`` pattern and the root templates, filled.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible, because its source is
shipped inside the collector script (``probes.slurm.probe.collector_source``) and run on the login
node, while the probe imports the same functions in process (``slurm_parse.expand_stdout``,
``checkpoints.expand_roots``): a log path is worked out by one piece of code on both sides, so
the path the collector read is the path the record names. It also holds the few readers of
SLURM's JSON values that finding a job's files needs (numbers that may be ``{set, number}``
objects, ``(null)`` texts, array ids, the user), for the same reason. Every token of sbatch's
filename patterns is filled as slurmstepd writes the batch script's log (``%N`` from the job's
node when it is one host name), so no ``scontrol`` is needed when squeue gives the pattern:
scontrol 22.05 prints several of them wrongly (``%%`` kept doubled, ``%3a``, ``%J``, ``%N``
raw). A token it does not know, or ``%N`` with no single node, is never guessed: the answer is
``None`` and the caller asks ``scontrol``.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Mapping, Sequence
from string import Formatter
from typing import Any

_STDIO_TOKEN = re.compile(r"%(%|(\d*)([A-Za-z]))")
_STDIO_EXPANDABLE = frozenset("AaJjNnstux")
_STDIO_NUMBERS = frozenset("AaJjnst")
"""The tokens slurmstepd zero-pads (``%3a``, ``%5j``, ``%2t``); ``%s`` of the batch script is
the word ``batch``, never padded. Replayed on the real SLURM 22.05: ``--output=p_100%%_%j_%J_
%s_%t_%n_%N_%3a_%A_%u_%x_%5j_%2t.out`` (job 597 on node vm, not an array) was written
``p_100%_597_597_batch_0_0_vm_4294967294_597_jtuser_sft-tok-small_00597_00.out``."""
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NO_ARRAY_TASK = "4294967294"
"""What slurmctld prints for ``%a`` of a job that is not an array task (NO_VAL - 1)."""
_ROOT_PLACEHOLDERS = frozenset({"workdir", "name", "job_id", "user"})
SQUEUE_JOB_KEYS = (
    "job_id", "job_state", "state", "state_reason", "name", "user_name", "user",
    "submit_time", "eligible_time", "start_time", "end_time", "time_limit", "time", "exit_code",
    "array_job_id", "array_task_id", "array_task_string", "array_max_tasks", "array",
    "dependency", "comment",
    "current_working_directory", "working_directory", "standard_output", "stdout_expanded",
    "standard_error", "stderr_expanded", "command", "nodes", "restart_cnt", "het_job_id",
    "het_job_offset", "het",
)
"""Every squeue/sacct job-object key the probe reads (``slurm_parse.record_from_squeue`` and
the readers here). The sweep sends this list to the collector, which cuts each job object
down to it on the login node: the rest of a 22.05 object (~110 keys) is never read."""


def slurm_number(raw: Any) -> int | None:
    """An int, or a 23.02+ ``{set, infinite, number}`` object; unset/infinite -> None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        # JSON may carry Infinity/NaN (Python's json reads them): not a number of anything.
        return int(raw) if raw - raw == 0 else None
    if isinstance(raw, dict):
        if raw.get("infinite") or raw.get("set") is False:
            return None
        return slurm_number(raw.get("number"))
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    return None


def slurm_text(raw: Any) -> str | None:
    """A stripped text; SLURM's spellings of nothing (``(null)``, ``None``, ``N/A``) -> None."""
    if raw is None:
        return None
    value = str(raw).strip()
    return value if value and value not in {"(null)", "None", "N/A"} else None


def job_user(job: Mapping[str, Any]) -> str | None:
    """The owner of a squeue/sacct job object (``user_name``, else ``user``)."""
    return slurm_text(job.get("user_name")) or slurm_text(job.get("user"))


def array_ids(job: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(array job id, task id)`` from squeue's flat keys or sacct's ``array`` block."""
    block = job.get("array")
    block = block if isinstance(block, dict) else {}
    array_job = slurm_number(job.get("array_job_id", block.get("job_id")))
    array_task = slurm_number(job.get("array_task_id", block.get("task_id")))
    return array_job, array_task


_ENDED_STATES = frozenset({
    "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED",
})


def ended_before(job: Mapping[str, Any], since: float | None) -> bool:
    """True for a squeue job object that ended before the epoch ``since`` (too old to report).

    slurmctld keeps finished jobs for ``MinJobAge``; a busy user can have thousands of them.
    Dropping the old ones before anything else is built keeps a sweep's cost with the jobs it
    reports. A job whose state or end time cannot be read is kept.
    """
    if since is None:
        return False
    raw = job.get("job_state")
    states = [str(x).upper() for x in raw] if isinstance(raw, list) else (
        [str(raw).split()[0].upper()] if isinstance(raw, str) and raw.strip() else [])
    if not states or "COMPLETING" in states or not any(s in _ENDED_STATES for s in states):
        return False
    end = slurm_number(job.get("end_time"))
    return end is not None and 0 < end < since


def het_ids(job: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(hetjob leader id, component offset)`` from squeue's flat keys or sacct's ``het``
    block; ``(None, None)`` for a job that is not a hetjob component (squeue gives 0)."""
    block = job.get("het")
    block = block if isinstance(block, dict) else {}
    leader = slurm_number(job.get("het_job_id", block.get("job_id")))
    offset = slurm_number(job.get("het_job_offset", block.get("job_offset")))
    return (leader, offset) if leader and offset is not None else (None, None)


def job_key(job_id: int, array_job: int | None, array_task: int | None,
            het: tuple[int | None, int | None] = (None, None)) -> str:
    """Our id for a job: ``A_T`` for an array task, ``L+N`` for a hetjob component (as
    squeue prints both, and as ``jobtables job`` takes them), else SLURM's own id."""
    # The task that keeps the array's own id (job_id == array_job_id) is a task too.
    if array_task is not None and array_job:
        return f"{array_job}_{array_task}"
    if het[0] is not None and het[1] is not None:
        return f"{het[0]}+{het[1]}"
    return str(job_id)


def expand_pattern(
    pattern: str | None,
    *,
    job_id: str,
    array_job_id: str | None,
    array_task_id: str | None,
    user: str | None,
    name: str,
    workdir: str | None,
    node: str | None = None,
) -> str | None:
    """A raw ``--output`` pattern as slurmstepd writes the batch script's log; None if not
    expandable.

    SLURM 22.05 puts the unexpanded pattern in ``squeue --json``'s ``standard_output`` (empty
    for the default). Filled here: ``%%`` (one ``%``), ``%A %a %j %J`` (``%J`` of the batch
    script is its job id), ``%s`` (``batch``), ``%t %n`` (0), ``%u %x``, ``%N`` (``node``, the
    job's node list when it is one host name), the numbers zero-padded to a width (``%3a``),
    a ``slurm-%j.out`` / ``slurm-%A_%a.out`` default and the WorkDir prefix for a relative
    path. ``job_id`` is SLURM's own id of the job (an array task's own id, for ``%j``); an
    absolute path without ``%`` is returned as it is.
    """
    if pattern and "\\" in pattern:
        # slurmstepd expands nothing in a path holding a backslash: it drops each single one
        # ("\\" is one), ``esc\_%j.out`` is written ``esc_%j.out``; an absolute path with no
        # ``%`` too (``abs\_x.out`` is written ``abs_x.out``): checked before that shortcut.
        path = _unescaped(pattern)
        return path if path.startswith("/") else (
            workdir.rstrip("/") + "/" + path if workdir else None)
    if pattern and "%" not in pattern and pattern.startswith("/"):
        return pattern
    if not workdir:
        return None
    array = array_task_id is not None
    text = pattern or ("slurm-%A_%a.out" if array else "slurm-%j.out")
    tokens = {m.group(3) for m in _STDIO_TOKEN.finditer(text) if m.group(3)}
    host = node if node and _HOST_NAME.fullmatch(node) else None
    if tokens - _STDIO_EXPANDABLE or ("N" in tokens and host is None):
        return None
    values = {"A": array_job_id or job_id, "a": array_task_id or _NO_ARRAY_TASK, "j": job_id,
              "J": job_id, "s": "batch", "t": "0", "n": "0", "N": host or "",
              "u": user or "", "x": name}

    def fill(m: re.Match[str]) -> str:
        if m.group(1) == "%":
            return "%"
        value = values[m.group(3)]
        padded = m.group(3) in _STDIO_NUMBERS and value.isdigit()
        return value.zfill(_width(m.group(2))) if padded else value

    path = _STDIO_TOKEN.sub(fill, text)
    if not path.startswith("/"):
        path = workdir.rstrip("/") + "/" + path
    return path


def own_stderr(job: Mapping[str, Any]) -> str | None:
    """A squeue job object's StdErr when it is a file of its own (``sbatch -e``), filled as
    slurmstepd writes it; None when stderr goes to StdOut (22.05's ``standard_error`` is then
    empty, ``squeue -O STDERR`` repeats the StdOut pattern) or the pattern is not filled here.
    Tracebacks, CUDA OOMs, NCCL errors and tqdm bars are written to stderr."""
    raw = slurm_text(job.get("standard_error")) or slurm_text(job.get("stderr_expanded"))
    out = slurm_text(job.get("standard_output")) or slurm_text(job.get("stdout_expanded"))
    if not raw or raw in (out, "/dev/null"):
        return None
    own = slurm_number(job.get("job_id"))
    array_job, array_task = array_ids(job)
    is_task = array_task is not None
    workdir = (slurm_text(job.get("current_working_directory"))
               or slurm_text(job.get("working_directory")))
    fill = functools.partial(
        expand_pattern, job_id=str(own), user=job_user(job), name=str(job.get("name") or ""),
        workdir=workdir, node=slurm_text(job.get("nodes")),
        array_job_id=str(array_job) if is_task and array_job else None,
        array_task_id=str(array_task) if is_task else None)
    path = fill(raw)
    return None if path is None or path == fill(out) else path


def _unescaped(path: str) -> str:
    """SLURM's ``remove_path_slashes``: ``\\\\`` -> ``\\``, a single ``\\`` dropped."""
    out = []
    i = 0
    while i < len(path):
        if path[i] == "\\":
            if path[i + 1:i + 2] == "\\":
                out.append("\\")
                i += 1
        else:
            out.append(path[i])
        i += 1
    return "".join(out)


MAX_PAD = 10
"""slurmd zero-pads a number to this many digits at most (``%999999999j`` writes 10)."""


def _width(digits: str) -> int:
    """A token's padding as slurmd applies it: at most :data:`MAX_PAD` (the pattern is the
    job owner's text: ``%999999999j`` is no 1 GB path, nor 5000 digits an int to parse)."""
    digits = digits.lstrip("0")
    return MAX_PAD if len(digits) > 2 else min(int(digits or 0), MAX_PAD)


def has_stdio_token(path: str) -> bool:
    """True when ``path`` still holds a ``%`` token (``%%`` aside)."""
    return any(m.group(3) for m in _STDIO_TOKEN.finditer(path))


def _component(value: str) -> bool:
    """True for a value that can only ever be one path component (no ``/``, ``.``, ``..``)."""
    return bool(value) and "/" not in value and "\x00" not in value and value not in {".", ".."}


def expand_roots(
    templates: Sequence[str],
    *,
    workdir: str | None,
    name: str,
    job_id: str,
    user: str | None,
) -> list[str]:
    """Fill ``{workdir} {name} {job_id} {user}``; a template needing a missing value is skipped.

    Unknown placeholders and malformed templates are skipped too; results are normalised and
    de-duplicated in order. The job's name, id and user are chosen by whoever submitted it, so
    each must fill exactly one path component (a name such as ``../../x`` or ``a/b`` skips
    the template), ``{workdir}`` must be absolute, and the normalised result must stay under
    the template's root (its text up to the first placeholder, filled): no root can leave
    its directory whatever a job is called.
    """
    values = {"workdir": workdir, "name": name, "job_id": job_id, "user": user}
    out: list[str] = []
    for template in templates:
        read = _template(template)
        if read is None:
            continue
        parsed, fields = read
        if any(not values[f] for f in fields):
            continue
        if any(not _component(str(values[f])) for f in fields - {"workdir"}):
            continue
        if "workdir" in fields and not str(workdir).startswith("/"):
            continue
        path = posixpath.normpath(template.format_map(values))
        if _inside(path, _root_of(parsed, values)) and path not in out:
            out.append(path)
    return out


_RUN_PLACEHOLDERS = frozenset({"name", "job_id"})


def run_templates(templates: Sequence[str]) -> list[str]:
    """The root templates specific to one run: those holding ``{name}`` or ``{job_id}`` (a
    folder no other run saves to, trusted like a folder its log names, ``probes.remote.tree``);
    malformed ones are none."""
    out = []
    for template in templates:
        read = _template(template)
        if read is not None and read[1] & _RUN_PLACEHOLDERS:
            out.append(template)
    return out


@functools.lru_cache(maxsize=256)
def _template(template: str) -> tuple[list[tuple[str, str | None, str | None, str | None]],
                                      frozenset[str]] | None:
    """A root template's parse and its placeholders; None for a malformed one or one with an
    unknown placeholder. Read once per template (a sweep fills each for every job)."""
    try:
        parsed = list(Formatter().parse(template))
    except ValueError:
        return None
    fields = frozenset(f for _, f, _, _ in parsed if f is not None)
    return (parsed, fields) if fields <= _ROOT_PLACEHOLDERS else None


def _root_of(parsed: list[tuple[str, str | None, str | None, str | None]],
             values: Mapping[str, str | None]) -> str:
    """The directory a template's result must stay in: literal text up to the first
    placeholder other than ``{workdir}`` (with ``{workdir}`` filled), cut at its last ``/``."""
    text = ""
    for literal, field, _, _ in parsed:
        text += literal
        if field is None:
            continue
        if field != "workdir":
            break
        text += str(values["workdir"])
    else:
        return posixpath.normpath(text)
    return posixpath.normpath(text.rsplit("/", 1)[0] or "/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
