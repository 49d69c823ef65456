"""One job's files on the login node: its log located and read, its checkpoints and trials.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script before ``collector``, see ``probes.remote.script``). The seed's rules for
logs: verify the scheduler's StdOut exists; if not, list the workdir once (never recursive;
its ``logs/`` too, see :data:`LOG_SUBDIRS`) for ``*_<jobid>.out`` (``mismatch``), else
``missing`` (``failed`` when it could not be listed); read a bounded tail, or from a
``cursor`` only the bytes appended since (``probes.remote.logread``); a read that fails or is
under the line floor is retried once, then ``failed`` (never "dead"). A job's own StdErr
(``sbatch -e``) is read too: its last ``STDERR_TAIL_BYTES`` beside the log (``stderr``, for its
faults: tracebacks go there), or as the log itself when StdOut is ``/dev/null``. Every read
goes through the job's :class:`Guard`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Dict, List  # noqa: UP035 - Python 3.7

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused, resolve_uid
with contextlib.suppress(ImportError):
    from probes.remote.tree import SEEN, collect_checkpoints, listdir
with contextlib.suppress(ImportError):
    from probes.remote.logged_paths import command_mark, resumed_checkpoint_dirs
with contextlib.suppress(ImportError):
    from probes.remote.trial_roots import collect_logged_trials, collect_trials
with contextlib.suppress(ImportError):
    from probes.remote.read_back import FAR_MAX
with contextlib.suppress(ImportError):
    from probes.remote.logread import (
        DEEPEN_MAX,
        MAX_TRIALS_DIRS,
        endless_line,
        plain_text,
        read_tail,
        resume,
        valid_cursor,
    )

STDERR_TAIL_BYTES = 32 << 10
"""Bytes of a separate StdErr's tail read beside the log: enough for a traceback's last frames
and its error line, for the faults only (``probes.slurm.assemble``)."""
DEFAULT_HEAD_BYTES = 256 << 10
"""Bytes of a long log's head sent beside its tail (the config dump; ``head_bytes``)."""

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def _tail(path: str, guard: Guard, max_bytes: int, offset: int, min_lines: int, *,
          head_bytes: int = 0, track: bool = False, deepen_max: int | None = None,
          far_max: int | None = None) -> Json:
    """Read a bounded tail; retry once if it fails or is under the line floor."""
    result: Json = {}
    deepen = DEEPEN_MAX if deepen_max is None else deepen_max
    far = FAR_MAX if far_max is None else far_max
    for attempt in (1, 2):
        result = read_tail(path, max_bytes, offset, guard, head_bytes=head_bytes, track=track,
                           deepen_max=deepen, far_max=far)
        result["attempts"] = attempt
        if result["status"] != "ok":
            if result.get("final"):  # refused or hung: a second try would say the same
                break
            continue
        # An empty file (nothing printed yet) and an incremental read with nothing new are
        # facts, not failures; the floor judges a whole-tail read of a non-empty file.
        if result["size"] == 0 or offset > 0 or result["lines"] >= min_lines:
            return result
        if result.get("endless"):  # a second read would scan as far and find the same line
            return dict(result, status="failed", error=endless_line(result["endless"]))
        result = dict(result, status="failed",
                      error=f"{result['lines']} lines < floor {min_lines}")
    result.pop("final", None)
    return result


LOG_SUBDIRS = ("logs", "log")
"""Directories under the workdir listed (not recursively, never through a link) for a job's
own ``*_<jobid>.out`` when StdOut gives no log: where launch scripts commonly write it."""
_JOB_KEY = re.compile(r"\d+(?:[_+]\d+)?\Z")
"""A job key as this script names jobs: ``123``, an array task ``123_4``, a hetjob ``123+1``."""
_LOG_SUFFIXES = (".out", ".log", ".txt")
_RESTART = re.compile(r"\.\d+\Z")


def _job_keys(name: str) -> List[str]:  # noqa: UP006
    """The job keys whose log ``name`` can be: ``*_<key>.out`` (``-`` and ``.`` separate
    too; ``.log``, ``.txt``; a ``.N`` restart before the suffix). So ``run_12_3.out`` can be
    job ``12_3``'s or job ``3``'s, and ``run_12.4.out`` job ``12``'s or job ``4``'s."""
    if name[-4:] not in _LOG_SUFFIXES:
        return []
    stems = [name[:-4]]
    restart = _RESTART.search(stems[0])
    if restart is not None:
        stems.append(stems[0][:restart.start()])
    keys: List[str] = []  # noqa: UP006
    for stem in stems:
        cuts = [at + 1 for at, char in enumerate(stem) if char in "_.-"]
        # A key holds at most one separator ("_"): it starts after one of the last two, or
        # at the stem's start.
        for start in {0, *cuts[-2:]}:
            if _JOB_KEY.match(stem, start) and stem[start:] not in keys:
                keys.append(stem[start:])
    return keys


def _log_names(directory: str, guard: Guard, errors: Dict[str, str],  # noqa: UP006
               follow: bool = True) -> Dict[str, List[str]]:  # noqa: UP006
    """Job key -> the names in ``directory`` that can be its log, the listing read once per
    request (``tree.SEEN``) and indexed once: a sweep whose jobs' StdOut is gone costs one
    pass over a crowded log directory, not one per job. Why the listing failed (not for a
    directory that does not exist) goes in ``errors[directory]``.

    The directory is a SLURM WorkDir or StdOut's parent, kept as the user gave it: often a
    symlink (a scratch or project link), followed here (``/.``: the check of the opened
    directory's device still applies), unlike a link met below it; ``follow=False`` (one of
    :data:`LOG_SUBDIRS` under the workdir) lists it only if it is no link."""
    key = f"logs:{guard.uid}:{directory}:{follow}"
    index = SEEN.get(key)
    if index is None:
        index = {}
        failed: dict[str, str] = {}
        where = directory.rstrip("/") + "/." if follow else directory
        for name in listdir(where, guard, failed) or []:
            for job_key in _job_keys(name):
                index.setdefault(job_key, []).append(name)
        SEEN[key] = index
        SEEN[key + ":error"] = next(iter(failed.values()), None)
    if SEEN.get(key + ":error"):
        errors[directory] = SEEN[key + ":error"]
    return index


def _locate_log(stdout: str | None, workdir: str | None, job_id: str,
                guard: Guard, stderr: str | None = None) -> tuple[str | None, str, str | None]:
    """``(path, status, error)``: ``ok`` at StdOut, ``mismatch`` found in the workdir,
    ``failed`` when StdOut exists but is not the job's to read, else ``missing``. A StdOut
    of ``/dev/null`` is a discard, no log: the job writes its own (``exec > train_$ID.out``),
    looked for as for an absent StdOut; but where the job gave its StdErr a file
    (``-o /dev/null -e train_%j.err``), that file is the log SLURM wrote (``ok``)."""
    if stdout == "/dev/null":
        stdout = None
        try:
            if stderr:
                guard.stat_file(stderr)
                return stderr, "ok", None
        except FileNotFoundError:
            pass
        except (OSError, Refused, Hung) as exc:
            return stderr, "failed", str(exc)
    if stdout:
        try:
            size = guard.stat_file(stdout).st_size
        except FileNotFoundError:
            pass
        except (OSError, Refused, Hung) as exc:
            return stdout, "failed", str(exc)
        else:
            return _preamble_or_log(stdout, size, workdir, job_id, guard, stderr=stderr)
    parent = os.path.dirname(stdout) if stdout else ""
    best, unlisted = _own_logs(stdout, workdir, job_id, guard)
    if best is not None:
        return best[0], "mismatch", None
    if unlisted:  # the search never ran there: nothing says the log is absent
        where, why = next(iter(unlisted.items()))
        return None, "failed", (f"StdOut {stdout or '(none)'} absent and {where} could not"
                                f" be listed: {why}")
    if parent and _absent_dir(parent, guard):  # SLURM could not open StdOut: a launch failure
        return None, "missing", (f"StdOut dir {parent} does not exist"
                                 " (sbatch does not create it)")
    return None, "missing", None


def _own_logs(stdout: str | None, workdir: str | None, job_id: str, guard: Guard,
              skip: tuple[str | None, ...] = (), *, engines: bool = True,
              ) -> tuple[tuple[str, float, int] | None, dict[str, str]]:
    """The newest ``*_<jobid>.out`` of the job's own beside StdOut (``(path, mtime, size)``;
    StdOut itself and the paths in ``skip`` are none; a file named for an inference engine,
    :data:`ENGINE_NAME`, only where there is no other, and none with ``engines`` false), and
    the directories that could not be listed (why)."""
    skipped = {os.path.normpath(p) for p in (stdout, *skip) if p}
    dirs: list[tuple[str, bool]] = []
    if workdir:
        dirs.append((workdir, True))
    parent = os.path.dirname(stdout) if stdout else ""
    if parent and parent != workdir:  # `-o logs/%x_%j.out`: the log's own directory
        dirs.append((parent, True))
    if workdir:  # `exec > logs/train_$SLURM_JOB_ID.out`: the script's own log directory
        dirs.extend((os.path.join(workdir, sub), False) for sub in LOG_SUBDIRS
                    if os.path.join(workdir, sub) != parent)
    best: tuple[str, float, int] | None = None
    best_rank = (False, 0.0)
    unlisted: dict[str, str] = {}
    for directory, follow in dirs:
        quiet: dict[str, str] = {}  # a subdir that is absent, a link or unreadable: no say
        names = _log_names(directory, guard, unlisted if follow else quiet, follow)
        for name in names.get(job_id, ()):
            path = os.path.join(directory, name)
            if os.path.normpath(path) in skipped or (not engines and ENGINE_NAME.search(name)):
                continue
            try:  # a candidate that is not the job's own regular file is no candidate
                st = guard.stat_file(path)
            except (OSError, Refused, Hung):
                continue
            # the newest, but the job's own before its engine's (read for the launch checks,
            # and written every 10 s: the newer while the job's log may be quiet)
            rank = (ENGINE_NAME.search(name) is None, st.st_mtime)
            if best is None or rank > best_rank:
                best, best_rank = (path, st.st_mtime, st.st_size), rank
    return best, unlisted


ENGINE_NAME = re.compile(r"(?i)vllm|sglang|engine|server")
"""A file of the job's named so is its inference engine's own log (``vllm serve ... >
vllm_$SLURM_JOB_ID.log &``), read for the launch checks (``engine_logs``)."""
PREAMBLE_BYTES = 4 << 10
"""A StdOut under this size may hold only the batch script's preamble ("Job 12 starting on
node7") while the job sends its program's output to its own ``*_<jobid>.out``."""


def _preamble_or_log(stdout: str, size: int, workdir: str | None, job_id: str,
                     guard: Guard, *, stderr: str | None) -> tuple[str | None, str, str | None]:
    """StdOut, unless it is a short preamble and the job's own larger log sits beside it
    (``python train.py > logs/train_$SLURM_JOB_ID.out``): then that log, ``mismatch``. The
    job's own StdErr file is no candidate: it is read beside the log, for its faults; nor is
    its engine's log, which outgrows an eval's short Harbor console from the start and is
    read for the launch checks."""
    if size >= PREAMBLE_BYTES:
        return stdout, "ok", None
    best, _unlisted = _own_logs(stdout, workdir, job_id, guard, (stderr,), engines=False)
    if best is None or best[2] <= size:
        return stdout, "ok", None
    return best[0], "mismatch", (f"StdOut {stdout} holds only a {size}-byte preamble;"
                                 f" the job's own log is {best[0]}")


def _absent_dir(path: str, guard: Guard) -> bool:
    """Whether the directory ``path`` (followed as the user gave it) does not exist."""
    try:
        with guard.directory(path.rstrip("/") + "/."):
            return False
    except FileNotFoundError:
        return True
    except (OSError, Refused, Hung):
        return False


def _collect_log(job: Json, req: Json, guard: Guard) -> Json:
    path, status, error = _locate_log(job.get("stdout"), job.get("workdir"), str(job["id"]),
                                      guard, job.get("stderr"))
    out: Json = {"requested": job.get("stdout"), "path": path, "status": status}
    if error is not None:  # refused or hung at StdOut: final, a retry would say the same
        out.update(error=error, attempts=1)
    if path is None or status == "failed":
        return out
    fresh = None
    if "cursor" in job:  # the bot's warm sweep: only the bytes appended since its last read
        cursor = valid_cursor(job["cursor"], path)
        fresh = "new" if cursor is None else None
        if cursor is not None:
            try:
                fresh, resumed = resume(path, guard, cursor, int(req["tail_bytes"]))
            except (Refused, Hung) as exc:  # final: a cold read would say the same
                out.update(status="failed", error=str(exc), attempts=1)
                return out
            except OSError as exc:
                out.update(status="failed", error=f"{type(exc).__name__}: {exc}", attempts=1)
                return out
            if resumed is not None:
                return _resumed(out, resumed)
    offset = int(job.get("offset") or 0) if path == job.get("stdout") and fresh is None else 0
    read = _tail(path, guard, int(req["tail_bytes"]), offset, int(req.get("min_lines", 1)),
                 head_bytes=int(req.get("head_bytes", DEFAULT_HEAD_BYTES)),
                 track=fresh is not None, deepen_max=req.get("deepen_bytes"),
                 far_max=req.get("far_bytes"))
    if read["status"] != "ok":
        out.update(status="failed", error=read.get("error"), attempts=read.get("attempts", 1))
        return out
    read.pop("status")
    out.update(read)
    if fresh is not None:
        out["fresh"] = fresh
    return out


def _stderr_tail(path: str, guard: Guard) -> Json:
    """A separate StdErr's last ``STDERR_TAIL_BYTES`` (read whole each sweep: its faults,
    never its metrics, are wanted), or why not (``status``)."""
    read = read_tail(path, STDERR_TAIL_BYTES, 0, guard,  # its tail only
                     deepen_max=0, deepen_scan=0)
    out: Json = {"path": path, "status": read["status"]}
    if read["status"] == "ok":
        out.update(text=read.get("text") or "", size=read.get("size"))
    else:
        out["error"] = read.get("error")
    return out


def _resumed(out: Json, read: Json) -> Json:
    """A resumed read's answer: no ``text`` at all when nothing was appended."""
    data = read.pop("data")
    out.update(read, attempts=1, lines=0)
    if data:
        out["text"] = plain_text(data)
        out["lines"] = len(out["text"].splitlines())
    return out


def _guard(job: Json, request: Json, until: float) -> Guard:
    """The job's read rules: its owner (resolved here), per-read and request deadlines."""
    op = float(request.get("read_timeout_s") or 5.0)
    if "user" not in job:  # an in-process caller reading its own files
        return Guard(os.geteuid(), op, until, user="(caller)")
    user = str(job.get("user") or "")
    key = "uid:" + user
    if key not in SEEN:
        SEEN[key] = resolve_uid(user)
    return Guard(SEEN[key], op, until, user=user)


def _failed(job: Json, error: str) -> Json:
    return {"log": {"requested": job.get("stdout"), "path": None, "status": "failed",
                    "error": error, "attempts": 1}}


def _keep(kept: Json, phase: str, entry: Json, roots: List[str]) -> None:  # noqa: UP006
    """Note what of the entry is read before the next ``phase`` reads ``roots``, for
    :func:`given_up`: the log and its cursor copied (a reader given up on at the request's
    deadline may still be adding to them), the rest never changed once read."""
    log = dict(entry["log"])
    if isinstance(log.get("cursor"), dict):
        log["cursor"] = dict(log["cursor"])
    kept.update(entry=dict(entry, log=log), phase=phase, roots=list(roots))


def given_up(job: Json, kept: Json, why: str) -> Json:
    """The entry of a job whose reader was given up (``why``: a read stuck on a hung mount, or
    the request's deadline): what was read before (:func:`_keep`), the tree it was reading
    when it stopped unreadable with the reason; ``failed`` when not even its log was read."""
    entry: Json | None = kept.get("entry")
    if entry is None:
        return _failed(job, why)
    roots = kept.get("roots") or [job.get("workdir") or "(the job's files)"]
    # the root the stuck operation names ("open /root/sub: no answer..."), else all unread
    named = [r for r in roots if any(f" {r.rstrip('/')}{end}" in why for end in ":/")]
    roots = named or roots
    if kept.get("phase") == "trials":
        entry["trials"] = dict(entry.get("trials") or {}, **{
            root: {"exists": False, "jobs": {}, "error": why} for root in roots})
    elif kept.get("phase") == "checkpoints":
        entry["checkpoints"] = {"listings": {}, "errors": {root: why for root in roots}}
    return entry


def _collect_one(job: Json, request: Json, guard: Guard, kept: Json | None = None) -> Json:
    """One job's log, then its trials and checkpoints; ``kept`` (when given) notes what is
    read before each tree is entered, so a tree on a hung mount costs only itself
    (:func:`given_up`): the log, read first, is the job's facts."""
    kept = {} if kept is None else kept
    log = _collect_log(job, request, guard)
    stderr = job.get("stderr")
    if stderr and stderr != log.get("path") and log.get("status") != "failed":
        log["stderr"] = _stderr_tail(str(stderr), guard)
    trial_roots = list(job.get("trial_roots", []))
    trials_key = f"trials:{guard.uid}:" + json.dumps(trial_roots)
    if trials_key not in SEEN:
        _keep(kept, "trials", {"log": log}, trial_roots)
        # Counted whole, bounded by time (probes.remote.trial_roots), never by a trial count.
        SEEN[trials_key] = collect_trials(trial_roots, guard,
                                           float(request.get("trial_budget_s") or 20.0))
    roots = list(job.get("checkpoint_roots", []))
    # The config dump that names the save folder (verl's default_local_dir, SkyRL's
    # ckpt_path) is printed at start-up: a long log's head, read beside its tail (whole: a
    # tail's lines are read from its end, as many as a tail of steps needs).
    text, head = log.get("text") or None, log.get("head") or None
    command = job.get("command") if isinstance(job.get("command"), str) else None
    found: list[tuple[str, list[str]]] | None = None
    keep: list[Json] | None = None
    prior = job.get("cursor")
    if "cursor" in log:
        # A resumed read has only the new text: the dirs earlier reads found ride in the
        # cursor (re-checked here as any the log prints: inside workdir/roots, or a root of
        # their own that needs no '..'), and so do the folders' answers (probes.remote.tree).
        bases = [b for b in [job.get("workdir"), *roots] if b]
        # The command line is read again only when the folders carried may lack its own: a
        # read from nothing (a new, rotated or rewritten log), another line or other bases.
        mark = command_mark(command, bases, job.get("workdir")) if command else ""
        known = (bool(mark) and log.get("continued") is True and isinstance(prior, dict)
                 and prior.get("cmd") == mark)
        found, whole = resumed_checkpoint_dirs(log["cursor"]["dirs"], text, bases,
                                               job.get("workdir"), command, known=known,
                                               head=head)
        log["cursor"]["dirs"] = [os.path.join(base, *below) for base, below in found]
        if mark and whole:
            log["cursor"]["cmd"] = mark
        keep = []
    trials = SEEN[trials_key]
    # So are the trials dirs it names (SkyRL's harbor_trial_config.trials_dir), searched
    # first: they are the run's own (inside workdir/roots only, entered without a link). A
    # read from a cursor has only the new text: the dirs found before ride in the cursor.
    cursor = log.get("cursor")
    carried = cursor.get("trials") or [] if isinstance(cursor, dict) else []
    _keep(kept, "trials", {"log": log, "trials": trials}, [])
    logged = collect_logged_trials(
        "\n".join([*("trials_dir: " + d for d in carried),
                   *(t for t in (log.get("head"), log.get("text")) if t)]),
        job.get("workdir"), [b for b in [job.get("workdir"), *trial_roots, *roots] if b],
        trial_roots, guard, budget_s=float(request.get("trial_budget_s") or 20.0))
    if isinstance(cursor, dict):
        cursor["trials"] = list(logged)[:MAX_TRIALS_DIRS]
    if logged:
        trials = dict(logged, **{r: v for r, v in trials.items() if r not in logged})
    _keep(kept, "checkpoints", {"log": log, "trials": trials}, roots)
    # The checkpoint dirs the log prints or the command line names are searched too.
    checkpoints = collect_checkpoints(
        roots, guard, text, job.get("workdir"),
        run_roots=list(job.get("run_checkpoint_roots") or []), command=command, logged=found,
        carried=prior.get("ckpt") if isinstance(prior, dict) else None, keep=keep, head=head)
    if keep:  # the named folders' answers ride in the cursor too (probes.remote.tree._folder),
        # or "same" when every one is the record the request's cursor brought (the bot has it)
        log["cursor"]["ckpt"] = "same" if isinstance(prior, dict) and keep == prior.get(
            "ckpt") else keep
    return {"log": log, "checkpoints": checkpoints, "trials": trials}
