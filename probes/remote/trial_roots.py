"""Trial trees on the login node: Harbor job dirs and trials dirs counted whole, bounded by time.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). A trial root is a Harbor job dir, a flat
trials dir (SkyRL's Harbor generator writes ``<trials_dir>/<task>__<id>/`` with no job dir
above), or a dir of job dirs (chunks), each ``<trial>/result.json`` reduced and folded into a
whole-run tally (``probes.remote.trial_count``) with no count cap: the bound is TIME
(``budget_s``), and a tally cut short says so. Which directories are job dirs, trial dirs or
plain levels above job dirs (``jobs/<model>/``) is ``probes.remote.job_dirs``'s to tell.
The trials dirs a job's log names are counted too (``probes.remote.logged_paths``). Every
open goes through the guard, a directory entered through its parent without following a link;
only a root (or a logged dir's base) that is itself a link is followed, to a directory the job's
user could list (``Guard.open_root``).
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator  # noqa: UP035 - Python 3.7 on login nodes

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import reduce_job, reduce_trial, slim_result
with contextlib.suppress(ImportError):
    from probes.remote.job_dirs import (
        GROUP_LISTINGS,
        _below,
        _flat_trials,
        _job_dirs,
        _job_files_in,
    )
with contextlib.suppress(ImportError):
    from probes.remote.trajectory_turns import agent_turns
with contextlib.suppress(ImportError):
    from probes.remote.trial_count import (
        add_trial,
        add_turns,
        is_instant,
        keep_recent,
        new_tally,
        window_key,
    )
with contextlib.suppress(ImportError):
    from probes.remote.logged_paths import logged_trials_dirs
with contextlib.suppress(ImportError):
    from probes.remote.harbor_paths import harbor_jobs_dirs
with contextlib.suppress(ImportError):
    from probes.remote.tree import SEEN, _entries, _read_stamped

TRIAL_BUDGET_S = 20.0
"""Seconds of trial counting per trial-root set when the request names none."""

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


class _Clock:
    """The trial count's time bound: ``budget_s`` from the first call, at most half the time
    left in the request (the jobs after this one still get read), and never past the guard's
    request deadline (a read refused for lack of time would undercount silently)."""

    def __init__(self, budget_s: float, guard: Guard, clock: Callable[[], float]) -> None:
        if guard.until is not None:
            budget_s = min(budget_s, max(0.0, 0.5 * (guard.until - time.monotonic())))
        self.clock = clock
        self.started = clock()
        self.until = self.started + budget_s
        self.guard_until = guard.until

    def spent(self) -> bool:
        if self.guard_until is not None and time.monotonic() >= self.guard_until - 0.5:
            return True
        return self.clock() >= self.until


RESULT_BYTES = 64 << 20
"""A Harbor result.json is read whole up to this size: a trial's with terminus-2's rollout
details (every turn's prompt token ids) or a large eval's job result (every trial's name in
``reward_stats``) runs to megabytes, and a JSON document cut short reads as nothing."""
UNREADABLE = (b"", -1.0)
"""``_trial_result``'s answer for a result.json that is there but could not be read."""


def _trial_result(top: int, name: str, guard: Guard) -> tuple[bytes, float] | None:
    """``<name>/result.json`` below an open job dir, the trial dir entered without a link;
    ``None`` when there is none (a trial in flight: Harbor writes it as the trial ends), or the
    trial dir is not entered; ``UNREADABLE`` when it is there but cannot be read (its mode,
    not a file)."""
    try:
        with guard.directory(name, dir_fd=top) as sub:
            try:
                return guard.read_small("result.json", RESULT_BYTES, dir_fd=sub)
            except (OSError, Refused) as exc:
                gone = isinstance(exc, OSError) and exc.errno == errno.ENOENT
                return None if gone else UNREADABLE
    except (OSError, Refused, Hung):
        return None


def _reduced_trial(found: tuple[bytes, float]) -> dict[str, Any] | None:
    """The trial reduced; one past ``RESULT_BYTES`` still counts, finished when its file was
    last written (Harbor writes result.json as the trial ends), its fields unknown. Its
    rollout details' token ids are cut from the text first: parsed, they alone are Python
    objects at twice the file's size and more."""
    raw, mtime = found
    reduced = reduce_trial(slim_result(raw))
    if reduced is None and len(raw) >= RESULT_BYTES:
        try:
            finished = datetime.fromtimestamp(mtime, timezone.utc).isoformat()  # noqa: UP017
        except (OverflowError, OSError, ValueError):
            return None
        reduced = {"finished_at": finished}
    return reduced


MAX_STEPS = 32
"""Steps of a multi-step trial whose trajectories are read at most."""


def _agent_dir_turns(parent: int, guard: Guard) -> int | None:
    """The agent steps of ``agent/trajectory.json`` below the open ``parent``."""
    try:
        with guard.directory("agent", dir_fd=parent) as agent:
            raw = guard.read_small("trajectory.json", RESULT_BYTES, dir_fd=agent)[0]
    except (OSError, Refused, Hung):
        return None
    return agent_turns(raw)


def _trajectory_turns(top: int, name: str, guard: Guard,
                      resumed: bool = False) -> tuple[int | None, int]:
    """An installed agent's turns (claude-code, openhands, ...: the agents that do not count
    them in result.json) and its agent runs: the agent steps of ``<name>/agent/
    trajectory.json`` (``probes.remote.trajectory_turns``), else, for a task with steps
    (``harbor.trial.multi_step`` relocates each step's agent logs to ``steps/<step>/agent/``),
    those of each step's trajectory summed, one agent run a step that has one (as
    ``harbor_reduce`` counts step results); with ``resumed`` (the steps continue one session:
    each step's trajectory holds the turns so far) the most of them, not their sum. Each
    directory is entered without a link."""
    counted: list[int | None] = []
    try:
        with guard.directory(name, dir_fd=top) as trial:
            turns = _agent_dir_turns(trial, guard)
            if turns is not None:
                return turns, 1
            with guard.directory("steps", dir_fd=trial) as steps:
                names = [n for n, is_dir in _entries(steps, name, guard) if is_dir]
                for step in names[:MAX_STEPS]:
                    with guard.directory(step, dir_fd=steps) as sub:
                        counted.append(_agent_dir_turns(sub, guard))
    except (OSError, Refused, Hung):
        pass
    found = [t for t in counted if t is not None]
    if not found:
        return None, 1
    return (max(found) if resumed else sum(found)), len(found)


TURN_SAMPLE = 100
"""Trajectories read at most per job dir for an installed agent's turns: those of the most
recently finished trials (the rulebook's "last 100"). A trajectory carries every observation
the agent saw (hundreds of KiB a trial): reading each of a 10k-trial run's took 30 s of the
login node a sweep (``tests/bench/bench_trials.py --trajectory-kb 200``), past the count's
time bound, where counting its result.json files takes under one. One agent runs every trial
of a job dir, so the recent trials' turns are the run's realness gate (avg_turns ~ 1.0: a
dead engine), and a run whose engine died lately shows it there first."""


def _sampled_turns(top: int, turnless: list[Any], tally: Json, guard: Guard,
                   clock: _Clock) -> None:
    """The turns of the trials in ``turnless`` (a heap of the ``TURN_SAMPLE`` most recent ended
    trials whose result.json counts none), newest first, from their trajectories, folded into
    ``tally``; stops when the time bound is spent (the count stays whole: only fewer turns
    are averaged)."""
    for _key, name, reduced in sorted(turnless, key=lambda item: item[:2], reverse=True):
        if clock.spent():
            return
        instant = is_instant(reduced)
        reduced["n_turns"], runs = _trajectory_turns(top, name, guard,
                                                      bool(reduced.get("resumed")))
        if runs > 1:
            reduced["agent_runs"] = runs  # as harbor_reduce sends it: only above 1
        add_turns(tally, reduced["n_turns"], reduced.get("agent_runs"))
        # the trial's record (it may ride in the recent window) reads as the tally counts it
        tally["instant_fail"] += int(is_instant(reduced)) - int(instant)


def _read_samples(top: int, samples: list[Any], guard: Guard, clock: _Clock) -> None:
    """Every job dir's turn sample (``(parts below the open root, heap, tally)``), the job dir
    with the most recent trial first, once the root's every job dir is counted: the chunks
    share one time bound, and a chunk's trajectories (hundreds of KiB each) read before the
    next chunk was counted left that chunk's count cut short. Fewer turns, never fewer trials."""
    for parts, turnless, tally in sorted(
            samples, key=lambda s: max(item[:2] for item in s[1]), reverse=True):
        if clock.spent():
            return
        try:
            with _below(top, parts, guard) as fd:
                _sampled_turns(fd, turnless, tally, guard, clock)
        except (OSError, Refused, Hung):
            continue  # gone, or replaced by a link, since it was counted: no turns


def _ended(reduced: dict[str, Any]) -> bool:
    """A trial that ended (``add_trial``'s completed): only its turns are counted."""
    return any(reduced.get(key) is not None
               for key in ("finished_at", "reward", "exception_type"))


def _count_job_dir(job_dir: str, guard: Guard, clock: _Clock, window: list[Any],
                   label: str, *, top: int | None = None,
                   samples: list[Any] | None = None, parts: list[str] | None = None) -> Json:
    """One Harbor job directory: its job result.json and a tally of every trial's (``top``:
    the directory already open, else it is opened by its path). The trials whose turns are
    in their trajectories are added to ``samples`` with ``parts`` (the dir below the root),
    read once every job dir of the root is counted (``_read_samples``); without ``samples``
    they are read here."""
    tally = new_tally()
    started = clock.clock()
    job_raw = None
    job_mtime = created = None
    try:
        with _opened(job_dir, guard, top) as fd:
            stamped = _read_stamped("result.json", guard, RESULT_BYTES, dir_fd=fd)
            if stamped is not None:
                job_raw, job_mtime = stamped
            with contextlib.suppress(OSError, Refused, Hung):
                created = guard.stat_file("config.json", dir_fd=fd).st_mtime
            entries = _entries(fd, job_dir, guard)
            turnless: list[Any] = []
            for name, is_dir in entries:
                if not is_dir:
                    continue
                if clock.spent():
                    tally["complete"] = False
                    break
                found = _trial_result(fd, name, guard)
                reduced = (_reduced_trial(found)
                           if found is not None and found is not UNREADABLE else None)
                if found is not None and reduced is None:
                    # There (the trial ended) but not read or parsed (cut off mid-write, its
                    # mode): counted apart, its reward unknown, never taken for one in flight.
                    tally["unreadable"] += 1
                if reduced is not None and reduced.get("n_turns") is None and _ended(reduced):
                    item = (window_key(reduced, name), name, reduced)
                    if len(turnless) < TURN_SAMPLE:
                        heapq.heappush(turnless, item)
                    elif item[0] > turnless[0][0]:
                        heapq.heapreplace(turnless, item)
                if reduced is not None:
                    # The stall rule ("no new result.json for 60+ min") reads file times.
                    reduced["mtime"] = found[1]  # type: ignore[index]
                    add_trial(tally, reduced, found[1])  # type: ignore[index]
                    keep_recent(window, reduced, label + name, job_dir)
            if samples is None:
                _sampled_turns(fd, turnless, tally, guard, clock)
            elif turnless:
                samples.append((parts or [], turnless, tally))
    except Hung:
        tally["complete"] = False
    except (OSError, Refused):
        pass
    tally["seconds"] = round(clock.clock() - started, 3)
    # Whose run the job dir can be, in a shared jobs/: Harbor rewrites the job result.json at
    # every trial start and end (its mtime: the last write) and writes config.json as a run
    # starts or resumes (its mtime: that start).
    return {"job": reduce_job(job_raw) if job_raw is not None else None, "tally": tally,
            "trials": {}, "mtime": job_mtime, "created": created}


@contextlib.contextmanager
def _opened(path: str, guard: Guard, fd: int | None) -> Iterator[int]:
    """``fd`` itself (left open), or ``path`` opened as the job's directory for the block."""
    if fd is not None:
        yield fd
        return
    with guard.directory(path) as opened:
        yield opened


def _open_below(base: str, below: list[str], guard: Guard) -> int:
    """``base`` opened as a root (``Guard.open_root``), then each component ``below`` it
    through its parent's descriptor without following a link (a logged dir never leads out of
    its base)."""
    fd = guard.open_root(base)
    for part in below:
        try:
            sub = guard.open(part, directory=True, dir_fd=fd)
        finally:
            os.close(fd)
        fd = sub
    return fd


def _count_root(root: str, guard: Guard, clock: _Clock,
                below: list[str] | None = None) -> Json:
    """One trial root (or the directory ``below`` it, entered component by component)."""
    path = os.path.join(root, *below) if below else root
    try:
        top = _open_below(root, below, guard) if below else guard.open_root(root)
    except FileNotFoundError:
        return {"exists": False, "jobs": {}}
    except (OSError, Refused, Hung) as exc:
        return {"exists": False, "jobs": {}, "error": str(exc)}
    try:
        try:
            own = _job_files_in(top, guard)
            entries = [] if own else _entries(top, path, guard)
            # a Harbor job dir, or trials directly below the root: counted in the open dir
            flat = own or _flat_trials(top, path, entries, guard)
        except (OSError, Refused, Hung) as exc:
            return {"exists": False, "jobs": {}, "error": str(exc)}
        # Only Harbor job dirs are chunks: a stray or empty directory is not a trial tree; a
        # symlinked chunk is not entered (it is opened without following).
        # in path order, whichever order the bound looked through them in
        found = [] if flat else sorted(_job_dirs(top, path, entries, guard,
                                                        listings=[GROUP_LISTINGS]))
        window: list[Any] = []
        jobs: Json = {}
        samples: list[Any] = []
        if flat:
            jobs[path] = _count_job_dir(path, guard, clock, window, "", top=top,
                                        samples=samples)
        for parts in found:
            job_dir = os.path.join(path, *parts)
            if clock.spent():
                tally = new_tally()
                tally["complete"] = False
                jobs[job_dir] = {"job": None, "tally": tally, "trials": {}}
                continue
            label = "/".join(parts) + "/" if len(found) > 1 else ""
            try:
                with _below(top, parts, guard) as fd:
                    jobs[job_dir] = _count_job_dir(job_dir, guard, clock, window, label, top=fd,
                                                   samples=samples, parts=parts)
            except (OSError, Refused, Hung) as exc:
                # gone, or replaced by a link, since it was listed: a chunk of unknown trials
                tally = new_tally()
                tally["complete"] = not isinstance(exc, Hung)
                jobs[job_dir] = {"job": None, "tally": tally, "trials": {}, "mtime": None,
                                 "created": None}
        _read_samples(top, samples, guard, clock)
    finally:
        os.close(top)
    for _key, _order, job_dir, name, reduced in window:
        jobs[job_dir]["trials"][name.rsplit("/", 1)[-1]] = reduced
    return {"exists": True, "jobs": jobs}


def collect_trials(roots: list[str], guard: Guard | None = None,
                   budget_s: float = TRIAL_BUDGET_S,
                   clock: Callable[[], float] = time.monotonic) -> Json:
    """Every trial root: a Harbor job dir itself, or a dir of job dirs (chunks), each counted
    whole within ``budget_s`` seconds; the ``WINDOW`` most recent trials ride as records."""
    guard = guard or Guard(os.geteuid(), 30.0)
    bound = _Clock(budget_s, guard, clock)
    return {root: _count_root(root, guard, bound) for root in roots}


def collect_logged_trials(text: str | None, workdir: str | None, bases: list[str],
                          skip: list[str], guard: Guard, *,
                          budget_s: float = TRIAL_BUDGET_S) -> Json:
    """The trials dirs the log names (``logged_trials_dirs``), then the Harbor jobs dirs it
    names (``harbor_jobs_dirs``), newest first, each counted like a trial root (``skip``: the
    roots already counted); once per request and owner."""
    out: Json = {}
    bound: _Clock | None = None
    named = logged_trials_dirs(text, workdir, bases) + harbor_jobs_dirs(text, workdir, bases)
    for base, below in named:
        path = os.path.join(base, *below)
        if path in skip or path in out:
            continue
        key = f"lt:{guard.uid}:{path}"
        if key not in SEEN:
            bound = bound or _Clock(budget_s, guard, time.monotonic)
            SEEN[key] = _count_root(base, guard, bound, below)
        out[path] = SEEN[key]
    return out
