"""The completion check of a finished SFT run: ``trainer_log.jsonl`` / ``trainer_state.json``.

Policy: the seed says the JSONL is unreliable mid-run (sparse, empty, frozen) and must never
drive live status; it only answers "did the run reach its last step?" before cleanup. A
resumed run appends and repeats steps, so the LAST record wins, not the largest. Broken or
partial lines (a tail cut mid-record) are skipped; nothing here raises. Standard library only:
this module's source is prepended to the collector (``probes.remote.script``) and runs on the
login node.

Where the files are looked for (:func:`collect_completion`): the job's workdir, the output
directories its log names (``output_dir=``/``output_dir:`` in a config dump or
``TrainingArguments`` repr, ``--output_dir DIR``, ``Saving model checkpoint to
<dir>/checkpoint-N``, ``Model weights saved in <dir>/...``), then its checkpoint roots; at most
:data:`MAX_DIRS` of them, each made absolute against the workdir,
with no ``..`` component. In each: ``trainer_log.jsonl`` (LLaMA-Factory; its last
:data:`JSONL_TAIL` bytes), ``trainer_state.json`` (HF Trainer's ``save_state``) and the highest
``checkpoint-N/trainer_state.json``, each sent with its mtime: a file last written before the
job started is an earlier run's (a rerun into the same output dir), which the probe drops.
Those paths are the job's user's to choose, so every
open, listing and read goes through the job's ``probes.remote.guard.Guard``, as the log's do:
only the user's own regular files (not a symlink, FIFO or device, nothing under /proc, /sys,
/dev; a ``checkpoint-N`` that is a link is not entered; a save dir that is one is followed as
a checkpoint root is), each read bounded and under its deadline. HF writes
``trainer_state.json`` with ``sort_keys``: ``global_step`` sits before the (possibly huge)
``log_history`` and ``max_steps`` after it, so a file over :data:`STATE_WHOLE` bytes is read
as its head plus its last :data:`STATE_TAIL`, and the two top-level keys are taken by pattern.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from math import isfinite
from typing import Any, Dict, Tuple  # noqa: UP035 - Python 3.7 on login nodes

# In-process the guard is imported; when shipped, its source is prepended to the script and
# this import line is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.checkpoint_steps import MTIME_KNOWN

CompletionJson = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9
_MAX_LINE = 65536
MAX_DIRS = 8
JSONL_TAIL = 1 << 16
STATE_WHOLE = 4 << 20
STATE_TAIL = 1 << 20
_MAX_NAMES = 5000
_OUTPUT_DIR = re.compile(
    r"\boutput_dir['\"]?\s*[=:]\s*['\"]?(?P<dir>[^\s'\",)}\]]+)"
    r"|--output[_-]dir[= ](?P<flag>[^\s'\",]+)"
    r"|Saving model checkpoint to (?P<ckpt>\S+?)/checkpoint-\d+"
    r"|(?:Model weights|Configuration|tokenizer config file) saved in (?P<file>\S+)/[^/\s]+"
)
_STATE_KEY = re.compile(r'^\s{0,2}"(global_step|max_steps)": (\d+)', re.MULTILINE)
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def _as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not isfinite(value):
        return None
    return int(value)


def _status(current: int | None, total: int | None, records: int,
            cadence: int = 0) -> CompletionJson:
    """``cadence``: the steps between a run's records when its last one need not be at its
    end (LLaMA-Factory v1): finished too when the next record would have been past the total."""
    finished = current is not None and total is not None and total > 0 and (
        current >= total or (cadence > 0 and current + cadence > total))
    return {"current_steps": current, "total_steps": total, "finished": finished,
            "records": records}


def _record_step(record: Dict[str, Any]) -> Tuple[int | None, bool]:  # noqa: UP006
    """(step, is v1's) of one ``trainer_log.jsonl`` record: v0's ``LogCallback`` writes
    ``current_steps``; v1's ``LoggingCallback`` (``src/llamafactory/v1/utils/callbacks/
    logging_callback.py``) writes ``step`` beside ``total_steps`` instead."""
    step = _as_int(record.get("current_steps"))
    if step is not None:
        return step, False
    if "total_steps" not in record:
        return None, False
    return _as_int(record.get("step")), True


def parse_trainer_log_jsonl(text: str | bytes) -> CompletionJson:
    """The last record's ``current_steps``/``total_steps``; finished when current >= total.

    LLaMA-Factory v1 logs every ``logging_steps`` and writes no record at the end of training,
    so a v1 run's last record is finished when the next one (its cadence on: the steps between
    its last two records) would have been past the total; a lone record has no cadence."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    current, total, records, cadence, v1 = None, None, 0, 0, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("{") or len(line) > _MAX_LINE:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        step, of_v1 = _record_step(record)
        if step is None:
            continue
        v1 = of_v1
        records += 1
        # A resumed run appends from its checkpoint: a step going back keeps the cadence.
        if current is not None and step > current:
            cadence = step - current
        current = step
        total = _as_int(record.get("total_steps")) or total
    return _status(current, total, records, cadence if v1 else 0)


def parse_trainer_state_json(text: str | bytes) -> CompletionJson:
    """HF ``trainer_state.json``: ``global_step`` of ``max_steps`` (finished when reached, or
    when its ``EarlyStoppingCallback`` stopped it: :func:`_early_stopped`).

    A whole document is parsed as JSON; a head+tail cut of a large one by its top-level keys.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    current = total = None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        current, total = _as_int(data.get("global_step")), _as_int(data.get("max_steps"))
    else:
        for key, value in _STATE_KEY.findall(text):
            if key == "global_step" and current is None:
                current = int(value)
            elif key == "max_steps":
                total = int(value)
    status = _status(current, total, 1 if current is not None else 0)
    if not status["finished"] and _early_stopped(data, text):
        status.update(finished=True, early_stopped=True)  # stopped by its own rule
    return status


_EARLY_KEY = re.compile(r'"(early_stopping_patience|early_stopping_patience_counter|'
                        r'should_training_stop)": (\d+|true|false)')


def _early_stopped(data: Any, text: str) -> bool:
    """HF's ``EarlyStoppingCallback`` stopped the run: its state in ``stateful_callbacks``
    (``Trainer._save_checkpoint`` stores each ``ExportableState``'s ``state()``) has the
    patience counter at its patience, and ``TrainerControl`` asked the stop. The run then
    ended by its own rule, short of ``max_steps``: finished, not cut short. A head+tail cut
    (a huge ``log_history``) is read by pattern: ``stateful_callbacks`` sorts after it."""
    found: Dict[str, Any] = {}  # noqa: UP006
    if isinstance(data, dict):
        callbacks = data.get("stateful_callbacks")
        callbacks = callbacks if isinstance(callbacks, dict) else {}
        early = callbacks.get("EarlyStoppingCallback")
        early = early[-1] if isinstance(early, list) and early else early
        for part in (early, callbacks.get("TrainerControl")):
            for section in ("args", "attributes"):
                values = part.get(section) if isinstance(part, dict) else None
                found.update(values if isinstance(values, dict) else {})
    else:
        for key, value in _EARLY_KEY.findall(text):
            found[key] = int(value) if value.isdigit() else value == "true"
    patience = _as_int(found.get("early_stopping_patience"))
    counter = _as_int(found.get("early_stopping_patience_counter"))
    stop = found.get("should_training_stop", True)
    return bool(patience and counter is not None and counter >= patience and stop is True)


def _read_bounded(guard: Guard, dir_fd: int, name: str, path: str, *, head: int,
                  tail: int = 0) -> tuple[bytes, float | None]:
    """Up to ``head`` bytes of the job's regular file ``name`` in ``dir_fd`` (plus its last
    ``tail`` when larger), through the guard (raises as it does), and its mtime."""
    fd = guard.open(name, dir_fd=dir_fd)
    try:
        stat = os.fstat(fd)
        size = stat.st_size
        # An epoch mtime is none (an object-store FUSE mount's "unknown"): sent as unknown.
        mtime = stat.st_mtime if stat.st_mtime >= MTIME_KNOWN else None
        if size <= head + tail:
            return guard.read(fd, 0, head + tail, path), mtime
        return (guard.read(fd, 0, head, path) + b"\n" + guard.read(fd, size - tail, tail, path),
                mtime)
    finally:
        os.close(fd)


def output_dirs(
    workdir: str | None, log_text: str | None, extra: list[str] | None = None
) -> list[str]:
    """The workdir, the output dirs the log names (latest mention first), then ``extra`` (the
    job's checkpoint roots); absolute, no ``..``, at most :data:`MAX_DIRS`."""
    found: list[str] = []
    named = [m.group("dir") or m.group("flag") or m.group("ckpt") or m.group("file")
             for m in _OUTPUT_DIR.finditer(log_text or "")]
    for raw in [workdir or "", *reversed(named), *(extra or ())]:
        path = raw.strip().rstrip("/")
        if not path or "\x00" in path or ".." in path.split("/"):
            continue
        if not path.startswith("/"):
            if not workdir:
                continue
            path = os.path.join(workdir, path)
        path = os.path.normpath(path)
        if path not in found:
            found.append(path)
        if len(found) >= MAX_DIRS:
            break
    return found


def _newest_checkpoint(guard: Guard, dir_fd: int, directory: str) -> str | None:
    """The highest ``checkpoint-N`` among the directory's first :data:`_MAX_NAMES` names."""
    names = guard.list_dir(".", _MAX_NAMES, dir_fd=dir_fd)
    steps = [(int(m.group(1)), n) for m, n in ((_CHECKPOINT.match(n), n) for n in names) if m]
    return max(steps)[1] if steps else None


def _state_file(guard: Guard, dir_fd: int, path: str) -> CompletionJson:
    raw, mtime = _read_bounded(guard, dir_fd, "trainer_state.json", path,
                               head=STATE_WHOLE - STATE_TAIL, tail=STATE_TAIL)
    return dict(parse_trainer_state_json(raw), kind="trainer_state.json", path=path,
                mtime=mtime)


def _states(guard: Guard, root: int, directory: str) -> list[CompletionJson]:
    """``trainer_state.json`` in the directory and in its newest ``checkpoint-N``: both, since
    the top-level one may be an earlier run's (a rerun into the same output dir that stopped
    short never reached ``save_state``); the mtime sent with each tells them apart."""
    found: list[CompletionJson] = []
    with contextlib.suppress(Refused, OSError):
        found.append(_state_file(guard, root, os.path.join(directory, "trainer_state.json")))
    with contextlib.suppress(Refused, OSError):
        newest = _newest_checkpoint(guard, root, directory)
        if newest is not None:
            path = os.path.join(directory, newest, "trainer_state.json")
            with guard.directory(newest, dir_fd=root) as fd:  # a linked checkpoint: refused
                found.append(_state_file(guard, fd, path))
    return found


def _sources(guard: Guard, directory: str) -> list[CompletionJson]:
    """The completion files of one directory (opened as a root: a save dir that is a link to
    the user's scratch is followed, as :meth:`Guard.open_root` allows)."""
    found: list[CompletionJson] = []
    try:
        root = guard.open_root(directory)
    except (Refused, OSError):
        return found
    try:
        path = os.path.join(directory, "trainer_log.jsonl")
        with contextlib.suppress(Refused, OSError):
            raw, mtime = _read_bounded(guard, root, "trainer_log.jsonl", path, head=0,
                                       tail=JSONL_TAIL)
            found.append(dict(parse_trainer_log_jsonl(raw), kind="trainer_log.jsonl",
                              path=path, mtime=mtime))
        found.extend(_states(guard, root, directory))
    finally:
        os.close(root)
    return found


def collect_completion(
    workdir: str | None, log_text: str | None, extra: list[str] | None = None,
    guard: Guard | None = None,
) -> CompletionJson:
    """Every completion file found (see the module docstring), each parsed where it lies.

    Every open, listing and read goes through ``guard`` (the job's: its owner, its deadlines;
    in process, the caller's own files); a check that runs out of time keeps what it read.
    """
    if guard is None:
        guard = Guard(os.geteuid(), 5.0, user="(caller)")
    sources: list[CompletionJson] = []
    with contextlib.suppress(Hung):
        for directory in output_dirs(workdir, log_text, extra):
            sources.extend(_sources(guard, directory))
    return {"sources": sources}
