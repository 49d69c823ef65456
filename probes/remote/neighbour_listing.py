"""A RUNNING job's neighbours, found and read on the login node in ``jobtables job``'s
command 2: its user's jobs of other names that ran from its workdir, and its own name's
earlier attempts that ended (from any workdir).

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped in front of
the collector, ``probes.remote.script``). Command 2's scheduler commands list the user's jobs
(``squeue -O``, :data:`NEIGHBOUR_FIELDS` then the name, nonce-delimited); the request's
``neighbours`` section names that command and the job, and the collector reads the logs of up
to ``read`` of the jobs it lists in the same trip (:func:`neighbour_specs`): no checkpoint or
trial root (their progress only, never their saves), no shell (every path is data). The probe
parses the very same listing with :func:`neighbour_rows` (``probes.slurm.neighbours``), so
both sides name the same jobs with the same log paths. The earlier attempts
(:func:`attempt_rows`, at most ``attempts`` of them, the latest first) are read whatever the
checkpoint roots: the setting their logs printed (model, image, geometry, config) is what
tells a relaunch in a new setting, which the sweep, reading every log, calls ``deep-probe``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, List  # noqa: UP035 - Python 3.7 on login nodes

with contextlib.suppress(ImportError):
    from probes.remote.stdio_pattern import expand_pattern

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9

NEIGHBOUR_FIELDS = ("JobArrayID", "JobID", "State", "WorkDir", "STDOUT", "NodeList")
"""``squeue -O`` fields of the listing, in order; the name follows them, last (it may hold
anything)."""
NEIGHBOURS_READ = 16
"""Neighbours whose logs one ``jobtables job`` reads at most (a grid's cells share a workdir)."""
ATTEMPTS_READ = 2
"""Ended earlier attempts of the job's own name whose logs one ``jobtables job`` reads at most
(the latest ended one decides a relaunch, ``report.fingerprint.relaunch_change``; one more in
case it printed no setting)."""
_ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL",
          "PREEMPTED", "DEADLINE", "BOOT_FAIL")


def _listing_rows(text: str, asked: Json) -> List[Json]:  # noqa: UP006
    """Every record of the listing (``nonce`` delimits it, ``user`` is theirs) but ``asked``'s
    ``id`` itself, in the listing's order: ``id``, ``own`` (SLURM's own id of an array task,
    else ""), ``state``, ``workdir``, ``stdout`` (the path squeue's ``--output`` gives, filled
    as slurmstepd fills it, else None), ``raw`` (that pattern), ``nodes``, ``name``."""
    nonce = str(asked["nonce"])
    rows = []
    for chunk in text.split("<N:" + nonce + ">")[:-1]:
        fields = chunk.lstrip("\n").split("<F:" + nonce + ">")
        if len(fields) != len(NEIGHBOUR_FIELDS) + 1:
            continue
        key, own, state, where, raw, nodes, name = fields
        key, own, state, nodes = key.strip(), own.strip(), state.strip(), nodes.strip()
        if key == str(asked["id"]) or not where:
            continue
        row: Json = {"id": key, "own": own if "_" in key and own.isdigit() else "", "state": state,
                     "workdir": where, "raw": raw, "nodes": nodes, "name": name}
        row["stdout"] = _log_path(row, str(asked.get("user") or ""))
        rows.append(row)
    return rows


def neighbour_rows(text: str, asked: Json) -> List[Json]:  # noqa: UP006
    """The listing's jobs that ran from ``asked``'s ``workdir`` under another name than its
    ``name``, as :func:`_listing_rows` gives them."""
    home = os.path.normpath(asked.get("workdir") or "/")
    return [r for r in _listing_rows(text, asked)
            if r["name"] != str(asked["name"]) and os.path.normpath(r["workdir"]) == home]


def attempt_rows(text: str, asked: Json) -> List[Json]:  # noqa: UP006
    """The listing's jobs of ``asked``'s own ``name`` that ended, submitted before it (a lower
    id; no array task), with a known log, from any workdir: its earlier attempts, the latest
    first, at most ``asked``'s ``attempts``."""
    mine = str(asked["id"])
    if not mine.isdigit():
        return []
    rows = [r for r in _listing_rows(text, asked)
            if r["name"] == str(asked["name"]) and r["state"] in _ENDED and r["id"].isdigit()
            and int(r["id"]) < int(mine) and r["stdout"] is not None]
    rows.sort(key=lambda r: int(r["id"]), reverse=True)
    return rows[:max(0, int(asked.get("attempts", 0)))]


def _log_path(row: Json, user: str) -> str | None:
    """Where slurmstepd wrote the row's job's log by its raw ``--output`` (``probes.slurm.parse``'s
    ``expand_stdout`` and ``stdout_final`` of such a record): the filled pattern, a plain
    absolute path as it is, else None (a token 22.05 does not know: no path guessed)."""
    raw = row["raw"]
    master, _, task = row["id"].partition("_")
    array = bool(task)
    path = expand_pattern(
        raw or None, job_id=(row["own"] or master) if array else master,
        array_job_id=master if array else None, array_task_id=task or None, user=user,
        name=row["name"], workdir=row["workdir"], node=row["nodes"] or None)
    if path is not None and path != (raw or None):
        return path
    plain = raw.startswith("/") and "%" not in raw and "\\" not in raw
    return raw if plain else None


def rows_to_read(rows: List[Json], read: int = NEIGHBOURS_READ) -> List[Json]:  # noqa: UP006
    """The rows whose logs are read: started, with a log path, running ones first, at most
    ``read``."""
    started = [r for r in rows if r["state"] != "PENDING" and r["stdout"] is not None]
    started.sort(key=lambda r: r["state"] != "RUNNING")
    return started[:max(0, read)]


def neighbour_specs(request: Json, ran: List[Any]) -> List[Json]:  # noqa: UP006
    """The collector job specs of the neighbours the request's ``neighbours`` section asks
    for (``command``: the index of the listing among the scheduler commands ``ran``; ``nonce``,
    ``id``, ``name``, ``workdir``, ``user`` of the job; ``read``: how many at most), then of
    its earlier attempts (``attempts``: how many at most, :func:`attempt_rows`): their log
    only (no checkpoint or trial root), as the request's own jobs are read. None when the
    listing did not run or failed."""
    asked = request.get("neighbours")
    if not isinstance(asked, dict):
        return []
    index = int(asked.get("command", -1))
    done = ran[index] if 0 <= index < len(ran) else None
    if not isinstance(done, dict) or done.get("exit") != 0:
        return []
    user = str(asked.get("user") or "")
    text = str(done.get("stdout") or "")
    rows = rows_to_read(neighbour_rows(text, asked), int(asked.get("read", NEIGHBOURS_READ)))
    return [{"id": r["id"], "user": user, "stdout": r["stdout"], "workdir": r["workdir"],
             "offset": 0, "completed": r["state"] == "COMPLETED", "checkpoint_roots": [],
             "run_checkpoint_roots": [], "trial_roots": []}
            for r in [*rows, *attempt_rows(text, asked)]]
