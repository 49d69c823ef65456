"""``squeue --json`` run on the login node and its document read into the answer's head.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script before ``collector``, see ``probes.remote.script``). squeue runs with half
the request's deadline and a byte cap (``SQUEUE_MAX_BYTES``): past it squeue is killed and
the answer says why. Only the asked users' jobs are kept, each string cut to
``SQUEUE_FIELD_MAX_CHARS`` where the request names the keys it reads; a document that is not
squeue's JSON is handed back as text for the caller to judge.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Dict, List, Tuple  # noqa: UP035 - Python 3.7

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.scheduler import _LONE_SURROGATE, OUTPUT_CAPPED, finish_argv, run_argv
with contextlib.suppress(ImportError):
    from probes.remote.stdio_pattern import ended_before, job_user
with contextlib.suppress(ImportError):
    from probes.remote.queue_listing import Listed, _agreeing_digest, _queue_specs

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def _queue_head(request: Json, started: float,
                ran: Tuple[int, str, str] | None = None,  # noqa: UP006
                listed: Listed | None = None,
                ) -> Tuple[Json, List[Json]]:  # noqa: UP006
    """Run ``squeue`` (or take ``ran``, its result) and read its document:
    ``(head, job specs)``, where ``head`` holds ``squeue`` and ``unexpanded`` as
    :func:`collect_queue` describes them. With ``listed`` (the signature listing run before
    squeue), ``squeue.digest`` is its digest when it agrees with the document."""
    queue = request["squeue"]
    status, out, err = ran if ran is not None else _run_squeue(request)
    data = None
    if status == 0 and out.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            data = json.loads(out)
    undecodable = _undecodable(out)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        # Not our JSON: the caller judges it exactly as if it had run squeue itself.
        return {"squeue": {"exit": status, "stdout": _shown(out) if undecodable else out,
                           "stderr": err}, "unexpanded": []}, []
    users = set(queue["users"])
    since = queue.get("since")
    mine = [j for j in data["jobs"] if isinstance(j, dict) and job_user(j) in users]
    kept = [j for j in mine if not ended_before(j, since)]
    specs, unexpanded = _queue_specs(kept, request)
    digest = (_agreeing_digest(request, listed, mine, specs, unexpanded)
              if listed is not None and not data.get("errors") else None)
    keys = queue.get("keys")
    if keys is not None:  # a few wanted keys looked up, not every key of every job scanned
        # Each string cut to SQUEUE_FIELD_MAX_CHARS on the way (squeue's nested blocks hold
        # numbers and flags): a few per cent of this cut's time, no other pass.
        cap = SQUEUE_FIELD_MAX_CHARS
        kept = [{k: v if type(v) is not str or len(v) <= cap else _cut(k, v)
                 for k in keys if k in j for v in (j[k],)} for j in kept]
    data["jobs"] = kept
    if undecodable:  # after the specs: a %x log path is filled with the name's own bytes
        data = _shown_but_paths(data)
    said: Json = {"exit": status, "json": data, "stderr": err}
    if digest is not None:
        said["digest"] = digest
    return {"squeue": said, "unexpanded": unexpanded}, specs


EARLY_SQUEUE: Any = globals().get("EARLY_SQUEUE")
"""squeue started by the script's prologue before this module was compiled
(``probes.remote.script``; the body runs in the prologue's globals, so this keeps it): a
``subprocess.Popen`` of the request's squeue argv, or None. Taken by the first
``_run_squeue`` of that very argv."""


SQUEUE_MAX_BYTES = 512 << 20
"""The most of ``squeue --json``'s output read (a request's ``squeue.max_bytes`` may say
otherwise): a 22.05 job object is ~5 KB, so this is ~100,000 jobs; past it squeue is killed
and the answer says why rather than the login node holding (and parsing) it all."""

SQUEUE_FIELD_MAX_CHARS = 4096
"""The longest string kept in a job object cut to the sweep's keys (its start: a comment's
tags, a dependency's first edges; PATH_MAX, so no log path that could be opened is cut): a
user's huge ``--comment`` or ``--wrap`` command does not cross the SSH link whole, per job."""


EXACT_KEYS = frozenset(("standard_output", "standard_error", "standard_input",
                        "current_working_directory", "working_directory", "stdout_expanded",
                        "stderr_expanded", "stdin_expanded"))
"""A job object's paths: the only strings whose bytes that are not UTF-8 travel as they are
(lone surrogates, ``collector.encode``), so the probe can name the file again."""


def _undecodable(text: str) -> bool:
    """squeue printed bytes that are not UTF-8 (decoded as lone surrogates, ``run_argv``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _shown(text: str) -> str:
    """``text`` with each byte that is not UTF-8 (each lone surrogate) as U+FFFD, as every
    text is shown."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _shown_but_paths(value: Any) -> Any:
    """``value`` with every string but the paths (:data:`EXACT_KEYS`) :func:`_shown`: a job's
    name or comment reaches tables and Slack as it did before paths kept their bytes."""
    if isinstance(value, str):
        return _shown(value)
    if isinstance(value, list):
        return [_shown_but_paths(v) for v in value]
    if isinstance(value, dict):
        return {k: v if k in EXACT_KEYS and isinstance(v, str) else _shown_but_paths(v)
                for k, v in value.items()}
    return value


def _cut(key: str, value: str) -> str:
    """``value`` cut to SQUEUE_FIELD_MAX_CHARS; a dependency at its last whole edge (a cut
    job id would name another job)."""
    cut = value[:SQUEUE_FIELD_MAX_CHARS]
    if key == "dependency":
        ends = max(cut.rfind(","), cut.rfind("?"))
        cut = cut[:ends] if ends > 0 else ""
    return cut


def _run_squeue(request: Json) -> Tuple[int, str, str]:  # noqa: UP006
    global EARLY_SQUEUE
    argv = [str(a) for a in request["squeue"]["argv"]]
    timeout_s = 0.5 * float(request.get("deadline_s") or 60.0)
    cap = int(request["squeue"].get("max_bytes") or SQUEUE_MAX_BYTES)
    early, EARLY_SQUEUE = EARLY_SQUEUE, None
    if early is not None and list(early.args) == argv:
        ran = finish_argv(early, timeout_s, cap)
    else:
        ran = run_argv(argv, timeout_s, cap)
    if ran[0] == OUTPUT_CAPPED:
        return (ran[0], "", f"squeue --json printed more than {cap} bytes on the login node:"
                " killed, not read (thousands of jobs, or jobs with huge comments, commands or"
                " names?)")
    return ran
