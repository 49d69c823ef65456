"""The Harbor jobs dir a job's log names: ``harbor run -o DIR`` echoed, or Harbor's own
closing lines.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script after ``logged_paths``, see ``probes.remote.script``). ``harbor run``
writes each job dir to ``<jobs_dir>/<job_name>/`` (``-o``/``--jobs-dir``, default ``jobs``
from its working directory): a jobs dir on scratch (``-o /scratch/$USER/harbor-jobs``) lies
under no default trial root. Harbor prints no path as it starts; the log names the jobs dir
where the batch script echoed its command (``set -x``: ``+ harbor run ... -o DIR``), and as
the run ends (``harbor/cli/jobs.py``): ``Inspect results by running `harbor view
<jobs_dir>```, printed by rich, which on a file
(sbatch: no terminal, 80 columns) folds a long path over lines, cut anywhere: the pieces are
joined back. A terminal's colour codes are dropped first. The dir is the job owner's text:
placed as ``logged_paths`` places a logged trials dir (inside the workdir or a root, entered
component by component; outside them a root of its own, which the guard opens only if the
job's user could list it); a relative one is from the workdir (``harbor`` runs where sbatch
starts the job); one under ``~``, in a variable or an object store, or holding a control
character, is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.logged_paths import _CONTROL, _inside_base

HARBOR_JOBS_DIRS = 2
"""Jobs dirs taken from one log at most (the newest printed first)."""
_GATE = re.compile(r"harbor (?:run|jobs start|view)\b")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PIECE = r"[^\s`'\"]+(?:\n[^\s`'\"]+)*?"
_NAMED = re.compile(
    r"(?:^|\n)[^\n]*?\bharbor (?:run|jobs start)\b[^\n]*?[ \t](?:-o|--jobs-dir)(?:[ \t]+|=)"
    r"['\"]?([^\s'\"`;|&<>()]+)"
    r"|`harbor view[ \t]*\n?(" + _PIECE + r")`")
"""The echoed command's ``-o``/``--jobs-dir`` and Harbor's closing ``harbor view <jobs_dir>``
(maybe folded over lines by rich): each names the jobs dir. Its ``Results written to
<job_dir>/result.json`` is not read: other tools print the same words, and a directory named
by mistake would stand for the run's tree."""


def harbor_jobs_dirs(text: str | None, workdir: str | None,
                     bases: list[str]) -> list[tuple[str, list[str]]]:
    """The Harbor jobs dirs the log names, newest first, as ``(base, components below it)``
    (``logged_paths.logged_trials_dirs``'s form)."""
    if not text or _GATE.search(text) is None:
        return []
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    clean = [os.path.normpath(b) for b in bases if b and b.startswith("/")]
    found: list[tuple[str, list[str]]] = []
    for match in reversed(list(_NAMED.finditer(text))):
        if len(found) >= HARBOR_JOBS_DIRS:
            break
        flag, view = match.groups()
        raw = (flag or view or "").replace("\n", "")
        place = _jobs_dir_place(raw, workdir, clean)
        if place is not None and place not in found:
            found.append(place)
    return found


def _jobs_dir_place(raw: str, workdir: str | None,
           bases: list[str]) -> tuple[str, list[str]] | None:
    """``raw`` as ``(base, below)``: inside a base entered below it, else a root of its own."""
    if (not raw or raw.startswith(("~", "$")) or "://" in raw or "\\" in raw
            or _CONTROL.search(raw)):
        return None
    if not raw.startswith("/"):
        if not workdir or not workdir.startswith("/"):
            return None
        raw = os.path.join(workdir, raw)
    path = os.path.normpath(raw)
    place = _inside_base(path, bases)
    if place is not None:
        return place
    return None if ".." in raw.split("/") else (path, [])
