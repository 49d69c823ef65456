"""The collector as one ``python3 -`` script: the shipped modules' sources joined in process.

Policy: the login node has nothing of ours installed, so the stdlib-only modules the
collector imports (``guard``, ``harbor_reduce``, ``stdio_pattern``, ``tree``, ``completion``,
``job_files``, the ``queue_*`` pair and the rest of :data:`_SHIPPED_MODULES`) are prepended
to ``collector`` and their import
lines there become ``pass``; the request rides inside the script as a string literal (never
on a command line). A request with scheduler commands and no jobs (a one-job read's first
command) ships ``scheduler`` alone with its own entry point: the same answer from a fifth of
the script.

A streamed sweep request (``squeue --json`` beside the fast listing, ``collector._stream``)
starts that squeue first of all: the collector's ~100 KB of source is compiled and its
module body run only after (~80 ms on a login node, before which nothing else can start), so
the script is a short prologue that starts it (:data:`_PROLOGUE`), then the collector from a
string literal (``exec``), whose ``_run_squeue`` takes the running process
(``queue_document.EARLY_SQUEUE``) instead of starting another.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probes.remote.listing import SIGNATURE_FIELDS, listing_timeout, signature_argv

_HERE = Path(__file__).resolve().parent

COLLECTOR_ARGV = ("python3", "-I", "-")
"""How the login node (or, for ``local = true``, this host) runs a shipped script, given on
stdin: isolated (``-I``, Python 3.4+), so neither the directory it runs in (the login
account's home; the directory ``jobtables`` was started from) nor the user's site-packages is
on its path and no ``PYTHON*`` variable is read. ``python3 -`` put the current directory first:
a ``json.py`` or ``__future__.py`` someone left there ran as the bot's account. The scripts
are standard library only."""
_FUTURE = re.compile(r"^from __future__ import [^\n]*\n", re.MULTILINE)
_SHIPPED_IMPORT = re.compile(
    r"^([ \t]*)from probes\.remote\.(\w+) import (?:\([^)]*\)|[^\n(]*)$", re.MULTILINE,
)
_SHIPPED_MODULES = ("hung_marks.py", "posix_acl.py", "guard.py", "harbor_reduce.py",
                    "trajectory_turns.py", "stdio_pattern.py",
                    "neighbour_listing.py", "trial_count.py",
                    "checkpoint_steps.py", "logged_paths.py", "harbor_paths.py", "tree.py",
                    "job_dirs.py",
                    "trial_roots.py",
                    "read_back.py", "logread.py",
                    "completion.py", "scheduler.py", "listing.py", "job_files.py",
                    "engine_logs.py", "queue_listing.py", "queue_document.py")
"""Stdlib-only modules whose source is prepended to the collector (it imports them in process),
in dependency order: each imports only modules before it."""


def _inline(text: str, name: str, shipped: tuple[str, ...] = _SHIPPED_MODULES) -> str:
    """``text`` with each import of a shipped module replaced by ``pass`` (source prepended)."""
    def replace(m: re.Match[str]) -> str:
        if f"{m.group(2)}.py" not in shipped:
            raise RuntimeError(f"probes/remote/{name} imports probes.remote.{m.group(2)},"
                               " which is not shipped")
        return f"{m.group(1)}pass  # source prepended above"

    return _SHIPPED_IMPORT.sub(replace, text)


@functools.cache
def collector_source() -> str:
    """The shipped modules + collector as one script body (without ``main(...)``)."""
    names = (*_SHIPPED_MODULES, "collector.py")
    parts = [_inline((_HERE / name).read_text(encoding="utf-8"), name) for name in names]
    body = "\n\n".join(_FUTURE.sub("", text) for text in parts)
    # One __future__ line, first: it is only legal before any other statement.
    return "from __future__ import annotations\n" + body


@functools.cache
def scheduler_source() -> str:
    """``probes/remote/scheduler.py`` alone as a script body (it imports nothing of ours)."""
    text = _inline((_HERE / "scheduler.py").read_text(encoding="utf-8"), "scheduler.py")
    return "from __future__ import annotations\n" + _FUTURE.sub("", text)


_PROLOGUE = """\
import subprocess
_ARGV = {argv!r}
try:
    EARLY_SQUEUE = subprocess.Popen(_ARGV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
except OSError:
    EARLY_SQUEUE = None  # the collector runs it itself, and says why it cannot
exec(compile({body!r}, "<jobtables-collector>", "exec"))
main({request!r})
"""
"""A streamed sweep's script: squeue started, then the collector compiled and run."""

_SIGNED_PROLOGUE = """\
from __future__ import annotations
import subprocess
{listing}
import time
_LISTING = {listing_argv!r}
_BY = time.monotonic() + {timeout!r}
try:
    _RUN = subprocess.Popen(_LISTING, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
except OSError as exc:
    _RUN, EARLY_LISTING = None, (_LISTING, 127, "", str(exc))
_CODE = compile({body!r}, "<jobtables-collector>", "exec")  # while the listing runs
if _RUN is not None:
    try:
        _OUT, _ERR = _RUN.communicate(timeout=max(0.0, _BY - time.monotonic()))
        EARLY_LISTING = (_LISTING, _RUN.returncode, _OUT.decode("utf-8", "surrogateescape"),
                         _ERR.decode("utf-8", "replace"))  # paths' bytes kept, as run_argv
    except subprocess.TimeoutExpired:
        _RUN.kill()
        _RUN.communicate()
        EARLY_LISTING = (_LISTING, 124, "", "")
EARLY_LISTING += (listing_digest(EARLY_LISTING[2], {delim!r}, {width!r})
                  if EARLY_LISTING[1] == 0 else None,)
EARLY_SQUEUE = None
if not {reuse!r} or EARLY_LISTING[4] != {reuse!r}:
    try:
        EARLY_SQUEUE = subprocess.Popen({argv!r}, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError:
        pass  # the collector runs it itself, and says why it cannot
exec(_CODE)
main({request!r})
"""
"""A bot's streamed sweep (``squeue.reuse``): the signature listing first, then squeue's
document started only if the listing's digest is not the one of the document the bot holds
(``queue_listing.signature_listing``; the listing always comes before the document, so a digest
is of a queue no newer than its document), then the collector run; it takes both
(``EARLY_LISTING``, ``EARLY_SQUEUE``). The collector is compiled while the listing runs
(~30 ms each on the login node here), within the listing's timeout."""


@functools.cache
def listing_source() -> str:
    """``probes/remote/listing.py`` as a script part (it imports nothing of ours)."""
    return _inline((_HERE / "listing.py").read_text(encoding="utf-8"), "listing.py")


def build_collector_script(request: Mapping[str, Any]) -> str:
    """The script run by ``python3 -``: the request rides inside it as a string literal."""
    if _scheduler_only(request):
        return f"{scheduler_source()}\n\nanswer_scheduler({json.dumps(request)!r})\n"
    signed = _signed_listing(request)
    if signed is not None:
        argv, delim, reuse = signed
        return _SIGNED_PROLOGUE.format(
            listing=_FUTURE.sub("", listing_source()), listing_argv=argv, delim=delim,
            width=len(SIGNATURE_FIELDS), reuse=reuse, timeout=listing_timeout(dict(request)),
            argv=_early_squeue_argv(request), body=collector_source(),
            request=json.dumps(request))
    early = _early_squeue(request)
    if early is not None:
        return _PROLOGUE.format(argv=early, body=collector_source(),
                                request=json.dumps(request))
    return f"{collector_source()}\n\nmain({json.dumps(request)!r})\n"


def _early_squeue(request: Mapping[str, Any]) -> list[str] | None:
    """The squeue argv a streamed sweep runs beside its listing (started by the prologue)."""
    queue = request.get("squeue")
    if not (request.get("stream") and isinstance(queue, Mapping) and queue.get("listing")):
        return None
    if "reuse" in queue:  # a bot's sweep: its signature listing comes first
        return None
    return _early_squeue_argv(request)


def _early_squeue_argv(request: Mapping[str, Any]) -> list[str] | None:
    argv = [str(a) for a in request["squeue"].get("argv") or ()]
    return argv if argv[:1] == ["squeue"] else None


def _signed_listing(request: Mapping[str, Any]) -> tuple[list[str], str, str] | None:
    """``(listing argv, delimiter, digest held)`` of a bot's streamed sweep (``squeue.reuse``
    and ``squeue.delim``, some users), run by :data:`_SIGNED_PROLOGUE`."""
    queue = request.get("squeue")
    if not (request.get("stream") and isinstance(queue, Mapping) and "reuse" in queue
            and queue.get("delim") and queue.get("users")
            and _early_squeue_argv(request) is not None):
        return None
    users = sorted({str(u) for u in queue["users"]})
    delim = str(queue["delim"])
    return signature_argv(users, delim), delim, str(queue["reuse"] or "")


def _scheduler_only(request: Mapping[str, Any]) -> bool:
    """Scheduler commands and nothing the collector itself serves (no jobs, no squeue)."""
    return ("scheduler" in request and not request.get("jobs") and "squeue" not in request
            and not request.get("stream"))




# -- the deep probe's reader (issue 14): shipped by the same builder, over the same connection --


_ROLLOUT_MODULES = ("hung_marks.py", "posix_acl.py", "guard.py", "harbor_reduce.py",
                    "rollout_budget.py", "rollout_trials.py")
"""Stdlib-only modules whose source is prepended to the deep probe's ``rollouts.py``, in
dependency order (each imports only modules before it); kept apart from
:data:`_SHIPPED_MODULES` so the collector's script carries none of the reader's source."""


@functools.cache
def rollouts_source() -> str:
    """:data:`_ROLLOUT_MODULES` + ``rollouts.py`` as one script body: the deep probe reads under
    the collector's own guard and reduces a trial as the counts do (their import lines there
    become ``pass``)."""
    parts = [_inline((_HERE / name).read_text(encoding="utf-8"), name, _ROLLOUT_MODULES)
             for name in (*_ROLLOUT_MODULES, "rollouts.py")]
    return "from __future__ import annotations\n" + "\n\n".join(
        _FUTURE.sub("", text) for text in parts)


def build_rollouts_script(request: Mapping[str, Any]) -> str:
    """The deep probe's ``python3 -`` script: the request rides inside it as a string literal."""
    return f"{rollouts_source()}\n\nmain({json.dumps(request)!r})\n"
