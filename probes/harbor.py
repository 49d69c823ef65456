"""Harbor trial trees (datagen chunks, eval runs) as facts, and the statistics the rules read.

Policy: the raw ``result.json`` files are reduced by the stdlib-only ``probes.harbor_reduce``
(the same code runs on login nodes); this module turns those reduced dicts into frozen models.
The local reader lists only Harbor's known layout (``research/formats.md`` §4.1): a job dir
``<jobs_dir>/<job>/`` holding ``<trial>/result.json``, or a ``jobs_dir`` whose job dirs are the
chunks of one run. It never walks arbitrary depth. Times Harbor wrote without a zone (older
versions used ``datetime.now()``) are taken as UTC. ``newest_result_at`` prefers the files'
mtimes (what "no new result.json for 60 min" literally means) and falls back to the newest
``finished_at``. Rewards are averaged over the trials that carry one, exactly as Harbor's own
``Mean`` metric does (so the table matches Harbor's "Mean: X"); a trial the verifier never
scored (environment failed to start) is neither a pass nor a fail. Statistics never invent a
zero: with no reward anywhere (datagen without a verifier) ``mean_reward`` and ``pass_rate``
are ``None``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from probes.errors import FetchError
from probes.harbor_reduce import reduce_job, reduce_trial
from probes.models import Frozen, TrialResult, TrialTree

_MAX_RESULT_BYTES = 16 << 20
_INSTANT_S = 1.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TrialStats(Frozen):
    """What a trial tree says, for the Datagen and Eval tables and the pass-rate signal."""

    trials: int
    """Trials with a result.json (in the window when ``last_n`` was given)."""
    trials_total: int | None = None
    completed: int = 0
    """Trials that finished (a finish time, a reward or an exception recorded)."""
    pass_rate: float | None = None
    """Fraction of scored trials with reward > 0; ``None`` when nothing was scored."""
    mean_reward: float | None = None
    avg_turns: float | None = None
    exc_pct: float | None = None
    """Percentage (0-100) of completed trials that recorded an exception."""
    exceptions: dict[str, int] = Field(default_factory=dict)
    top_exception: str | None = None
    instant_fail: int = 0
    """Trials that finished within a second of starting with no output tokens."""


def parse_time(value: object) -> datetime | None:
    """An ISO time as Harbor writes it, zone-aware (naive is taken as UTC); else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return number if math.isfinite(number) else None


def _int(value: object) -> int | None:
    number = _float(value)
    return int(number) if number is not None and number >= 0 and number.is_integer() else None


def trial_from_reduced(name: str, reduced: Mapping[str, object]) -> TrialResult:
    """One reduced trial dict (``reduce_trial``'s output) as a ``TrialResult``."""
    exception = reduced.get("exception_type")
    return TrialResult(
        name=name,
        reward=_float(reduced.get("reward")),
        exception_type=exception if isinstance(exception, str) and exception else None,
        n_turns=_int(reduced.get("n_turns")),
        n_output_tokens=_int(reduced.get("n_output_tokens")),
        started_at=parse_time(reduced.get("started_at")),
        finished_at=parse_time(reduced.get("finished_at")),
    )


def _newest(
    trials: Iterable[TrialResult], reduced: Iterable[Mapping[str, object]]
) -> datetime | None:
    mtimes = [m for r in reduced if (m := _float(r.get("mtime"))) is not None]
    if mtimes:
        try:
            return datetime.fromtimestamp(max(mtimes), tz=UTC)
        except (ValueError, OverflowError, OSError):
            pass  # an impossible mtime (tampered replay): fall back to finish times
    finished = [t.finished_at for t in trials if t.finished_at is not None]
    return max(finished) if finished else None


def build_trial_tree(
    root: str,
    trials: Mapping[str, Mapping[str, object]],
    *,
    job: Mapping[str, object] | None = None,
    chunks_done: int | None = None,
    chunks_total: int | None = None,
) -> TrialTree:
    """A ``TrialTree`` from reduced trials (name -> dict) and the reduced job result.

    Trials come oldest first (by ``finished_at``, unfinished first, then name). A reduced
    trial may carry ``mtime`` (epoch seconds of its result.json) for ``newest_result_at``.
    """
    results = [trial_from_reduced(name, reduced) for name, reduced in trials.items()]
    results.sort(key=lambda t: (t.finished_at is not None, t.finished_at or _EPOCH, t.name))
    return TrialTree(
        root=root,
        trials=tuple(results),
        trials_total=_int((job or {}).get("n_total_trials")),
        chunks_done=chunks_done,
        chunks_total=chunks_total,
        newest_result_at=_newest(results, trials.values()),
        exists=True,
    )


def _read(path: Path) -> bytes | None:
    try:
        with path.open("rb") as fh:
            return fh.read(_MAX_RESULT_BYTES)
    except OSError:
        return None


def _scan_names(path: Path) -> list[tuple[str, bool]] | None:
    """One listing: (name, is_dir) pairs, or ``None`` when ``path`` is not a directory."""
    try:
        with os.scandir(path) as entries:
            return [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FetchError(f"cannot list trial directory {path}: {exc.strerror}") from exc


def _read_job_dir(
    job_dir: Path,
    names: list[tuple[str, bool]],
    budget: list[int],
    out: dict[str, dict[str, object]],
) -> dict[str, object] | None:
    """Reduce ``<job_dir>/<trial>/result.json`` into ``out``; returns the reduced job result."""
    for name, is_dir in sorted(names):
        if not is_dir or budget[0] <= 0:
            continue
        path = job_dir / name / "result.json"
        raw = _read(path)
        reduced = reduce_trial(raw) if raw is not None else None
        if reduced is None:
            continue
        # A file that vanished after reading has no mtime; its finished_at still dates it.
        with contextlib.suppress(OSError):
            reduced["mtime"] = path.stat().st_mtime
        out[name] = reduced
        budget[0] -= 1
    raw_job = _read(job_dir / "result.json") if ("result.json", False) in names else None
    return reduce_job(raw_job) if raw_job is not None else None


def _is_job_dir(names: list[tuple[str, bool]]) -> bool:
    return ("config.json", False) in names or ("result.json", False) in names


def read_trial_tree(root: Path, *, max_trials: int = 20000) -> TrialTree:
    """Read a Harbor job dir, or a jobs_dir of chunk job dirs, with bounded listings."""
    names = _scan_names(root)
    if names is None:
        return TrialTree(root=str(root), exists=False)
    budget = [max_trials]
    trials: dict[str, dict[str, object]] = {}
    if _is_job_dir(names):
        job = _read_job_dir(root, names, budget, trials)
        return build_trial_tree(str(root), trials, job=job)
    jobs: list[dict[str, object] | None] = []
    for name, is_dir in sorted(names):
        sub = _scan_names(root / name) if is_dir else None
        if sub is not None and _is_job_dir(sub):
            jobs.append(_read_job_dir(root / name, sub, budget, trials))
    if len(jobs) <= 1:
        return build_trial_tree(str(root), trials, job=jobs[0] if jobs else None)
    totals = [_int((j or {}).get("n_total_trials")) for j in jobs]
    merged = {"n_total_trials": sum(t for t in totals if t is not None)} if any(totals) else None
    done = sum(1 for j in jobs if j and j.get("finished_at"))
    return build_trial_tree(str(root), trials, job=merged, chunks_done=done, chunks_total=len(jobs))


def _is_instant_fail(trial: TrialResult) -> bool:
    if trial.started_at is None or trial.finished_at is None or trial.n_output_tokens:
        return False
    return abs((trial.finished_at - trial.started_at).total_seconds()) <= _INSTANT_S


def _completed(trial: TrialResult) -> bool:
    return (
        trial.finished_at is not None
        or trial.reward is not None
        or trial.exception_type is not None
    )


def summarize_trials(tree: TrialTree, *, last_n: int | None = None) -> TrialStats:
    """Trial statistics over the whole tree, or over its ``last_n`` most recent trials."""
    trials = list(tree.trials)
    if last_n is not None:
        trials = trials[-last_n:] if last_n > 0 else []
    done = [t for t in trials if _completed(t)]
    rewards = [t.reward for t in done if t.reward is not None]
    turns = [t.n_turns for t in done if t.n_turns is not None]
    exceptions = Counter(t.exception_type for t in done if t.exception_type is not None)
    top = min(exceptions, key=lambda k: (-exceptions[k], k)) if exceptions else None
    return TrialStats(
        trials=len(trials),
        trials_total=tree.trials_total,
        completed=len(done),
        pass_rate=sum(r > 0 for r in rewards) / len(rewards) if rewards else None,
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        avg_turns=sum(turns) / len(turns) if turns else None,
        exc_pct=100.0 * exceptions.total() / len(done) if done else None,
        exceptions=dict(exceptions),
        top_exception=top,
        instant_fail=sum(_is_instant_fail(t) for t in trials),
    )
