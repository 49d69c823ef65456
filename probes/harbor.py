"""Harbor trial trees (datagen chunks, eval runs) as facts, and the statistics the rules read.

Policy: the raw ``result.json`` files are read and reduced on the login node by the shipped
collector (``probes.remote``), which lists only Harbor's known layout (``research/formats.md``
§4.1): a job dir ``<jobs_dir>/<job>/`` holding ``<trial>/result.json``, SkyRL's flat trials dir
(trial dirs with no job dir above), or a ``jobs_dir`` whose job dirs are the chunks of one run,
never walking arbitrary depth; it sends each result.json's mtime
beside the reduced trial. This module turns those reduced dicts into frozen models. Times Harbor
wrote without a zone (older versions used ``datetime.now()``) are taken as UTC.
``newest_result_at`` prefers the files' mtimes (what "no new result.json for 60 min" literally
means) and falls back to the newest ``finished_at``. Rewards are averaged over the trials that
carry one, as Harbor 0.26's ``Mean`` metric does (so the table matches its "Mean: X"); the
pass-rate is over every completed trial: one the verifier never scored (its agent crashed, its
environment never started) did not pass.
Statistics never invent a zero: with no reward anywhere (datagen without a verifier)
``mean_reward`` and ``pass_rate`` are ``None``. Instant-fail (seed: "null output tokens,
finished_at ≈ started_at") is judged on the agent's execution phase (``agent_execution``), since
a real trial spends tens of seconds in environment and agent setup before an agent that fails at
once; only a result without that phase falls back to the trial's own times, and never for a
trial that never started (:func:`never_started`: an exception before any agent ran, such as a
sandbox provider refusing credentials at once), which is the environment's failure, not the
tunnel's: its trials are told by the never-started rule. An agent whose LLM
client retries a dead endpoint is no faster than its retries (terminus-2: about 36 s), so a phase
without a token that ended in a connection failure is instant up to ``RETRIED_S``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, ValidationError

from probes.models import Frozen, TrialCounts, TrialResult, TrialTree

_MAX_RESULT_BYTES = 16 << 20
_INSTANT_S = 1.0
RETRIED_S = 600.0
"""``probes.remote.trial_count.RETRIED_S``'s twin (the report layer may not import
``probes.remote``): the longest agent phase of LLM retries alone into a dead endpoint."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TrialStats(Frozen):
    """What a trial tree says, for the Datagen and Eval tables and the pass-rate signal."""

    trials: int
    """Trials with a result.json (in the window when ``last_n`` was given)."""
    trials_total: int | None = None
    completed: int = 0
    """Trials that finished (a finish time, a reward or an exception recorded)."""
    pass_rate: float | None = None
    """Fraction of completed trials with reward > 0 (one that finished unscored did not pass:
    the rulebook's "fraction with reward > 0", CONTRACT's "of the last 100 trials");
    ``None`` when nothing was scored (no verifier)."""
    mean_reward: float | None = None
    avg_turns: float | None = None
    exc_pct: float | None = None
    """Percentage (0-100) of completed trials that recorded an exception."""
    exceptions: dict[str, int] = Field(default_factory=dict)
    top_exception: str | None = None
    instant_fail: int = 0
    """Trials whose agent finished within a second of starting with no output tokens."""
    count_complete: bool = True
    """False when the collector's time bound stopped the count (``trials`` is a floor)."""
    count_seconds: float | None = None
    """Seconds the collector spent counting (whole-run counts only)."""


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
        agent_runs=_int(reduced.get("agent_runs")) or 1,
        n_output_tokens=_int(reduced.get("n_output_tokens")),
        started_at=parse_time(reduced.get("started_at")),
        finished_at=parse_time(reduced.get("finished_at")),
        agent_started_at=parse_time(reduced.get("agent_started_at")),
        agent_finished_at=parse_time(reduced.get("agent_finished_at")),
        auth_failure=reduced.get("auth_failure") is True,
        connection_failure=reduced.get("connection_failure") is True,
        api_base=api_base if isinstance(api_base := reduced.get("api_base"), str) else None,
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


def merge_counts(tallies: Sequence[Any]) -> tuple[TrialCounts | None, float | None]:
    """The collector's per-chunk tallies summed, and their newest result.json mtime.

    ``None`` when no chunk sent a tally (an older collector, or a replay of one)."""
    parsed: list[TrialCounts] = []
    newest: list[float] = []
    for raw in tallies:
        if not isinstance(raw, Mapping):
            continue
        try:
            parsed.append(TrialCounts.model_validate(
                {k: v for k, v in raw.items() if k in TrialCounts.model_fields}))
        except ValidationError:
            continue
        if (mtime := _float(raw.get("newest_mtime"))) is not None:
            newest.append(mtime)
    if not parsed:
        return None, None
    exceptions: Counter[str] = Counter()
    for c in parsed:
        exceptions.update(c.exceptions)
    summed = TrialCounts(
        **{k: sum(getattr(c, k) for c in parsed) for k in (
            "trials", "completed", "scored", "passed", "reward_sum", "turns_n", "turns_sum",
            "instant_fail", "seconds", "unreadable")},
        exceptions=dict(exceptions),
        complete=all(c.complete for c in parsed),
    )
    return summed, max(newest) if newest else None


def build_trial_tree(
    root: str,
    trials: Mapping[str, Mapping[str, object]],
    *,
    job: Mapping[str, object] | None = None,
    chunks_done: int | None = None,
    chunks_total: int | None = None,
    tallies: Sequence[Any] = (),
) -> TrialTree:
    """A ``TrialTree`` from reduced trials (name -> dict) and the reduced job result.

    Trials come oldest first (by ``finished_at``, unfinished first, then name). A reduced
    trial may carry ``mtime`` (epoch seconds of its result.json) for ``newest_result_at``.
    With ``tallies`` (the collector's whole-run counts per chunk) ``trials`` is the recent
    window only, and the counts speak for the whole run.
    """
    results = [trial_from_reduced(name, reduced) for name, reduced in trials.items()]
    results.sort(key=lambda t: (t.finished_at is not None, t.finished_at or _EPOCH, t.name))
    counts, newest_mtime = merge_counts(tallies)
    stamps: list[Mapping[str, object]] = list(trials.values())
    if newest_mtime is not None:
        stamps.append({"mtime": newest_mtime})  # the whole run's newest, not the window's
    return TrialTree(
        root=root,
        trials=tuple(results),
        counts=counts,
        trials_total=_int((job or {}).get("n_total_trials")),
        chunks_done=chunks_done,
        chunks_total=chunks_total,
        newest_result_at=_newest(results, stamps),
        exists=True,
    )


def is_instant_fail(trial: TrialResult) -> bool:
    """No output tokens, and the agent's execution phase (else, for a result without one, the
    whole trial, unless it never started) finished within a second of starting, or within
    ``RETRIED_S`` when it ended in a connection failure (``probes.remote.trial_count.is_instant``,
    rule for rule). A trial its verifier scored above 0 did the work (Harbor's oracle agent
    runs solve.sh in under a second and calls no model): never one."""
    if trial.n_output_tokens or (trial.reward is not None and trial.reward > 0):
        return False
    start: datetime | None = trial.agent_started_at
    end: datetime | None = trial.agent_finished_at
    if start is None and end is None:
        if never_started(trial):
            return False  # no agent ran: the sandbox's failure, not the tunnel's
        start, end = trial.started_at, trial.finished_at
    if start is None or end is None:
        return False  # not started, or the agent is still running
    bound = RETRIED_S if trial.connection_failure else _INSTANT_S
    return abs((end - start).total_seconds()) <= bound


def never_started(trial: TrialResult) -> bool:
    """A trial that ended in an exception before its agent ran: no agent phase, no agent
    output, never scored (Harbor writes ``agent_result``/``verifier_result`` null when the
    environment never started, e.g. ``EnvironmentStartTimeoutError``)."""
    return (
        trial.exception_type is not None
        and trial.reward is None
        and trial.n_output_tokens is None
        and trial.n_turns is None
        and trial.agent_started_at is None
        and trial.agent_finished_at is None
    )


def _completed(trial: TrialResult) -> bool:
    return (
        trial.finished_at is not None
        or trial.reward is not None
        or trial.exception_type is not None
    )


def _from_counts(tree: TrialTree, c: TrialCounts) -> TrialStats:
    """The whole run's statistics from the collector's counts (same arithmetic as below)."""
    top = min(c.exceptions, key=lambda k: (-c.exceptions[k], k)) if c.exceptions else None
    return TrialStats(
        trials=c.trials,
        trials_total=tree.trials_total,
        completed=c.completed,
        pass_rate=c.passed / c.completed if c.scored and c.completed else None,
        mean_reward=c.reward_sum / c.scored if c.scored else None,
        avg_turns=c.turns_sum / c.turns_n if c.turns_n else None,
        exc_pct=100.0 * sum(c.exceptions.values()) / c.completed if c.completed else None,
        exceptions=dict(c.exceptions),
        top_exception=top,
        instant_fail=c.instant_fail,
        count_complete=c.complete,
        count_seconds=c.seconds,
    )


def summarize_trials(tree: TrialTree, *, last_n: int | None = None) -> TrialStats:
    """Trial statistics over the whole tree, or over its ``last_n`` most recent trials.

    The whole tree is the collector's counts when it sent them (``tree.trials`` is then the
    recent window); ``last_n`` always reads the records, oldest first."""
    if last_n is None and tree.counts is not None:
        return _from_counts(tree, tree.counts)
    trials = list(tree.trials)
    if last_n is not None:
        trials = trials[-last_n:] if last_n > 0 else []
    done = [t for t in trials if _completed(t)]
    rewards = [t.reward for t in done if t.reward is not None]
    turns = [t.n_turns for t in done if t.n_turns is not None]
    runs = sum(t.agent_runs for t in done if t.n_turns is not None)
    exceptions = Counter(t.exception_type for t in done if t.exception_type is not None)
    top = min(exceptions, key=lambda k: (-exceptions[k], k)) if exceptions else None
    return TrialStats(
        trials=len(trials),
        trials_total=tree.trials_total,
        completed=len(done),
        pass_rate=sum(r > 0 for r in rewards) / len(done) if rewards else None,
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        avg_turns=sum(turns) / runs if turns else None,
        exc_pct=100.0 * exceptions.total() / len(done) if done else None,
        exceptions=dict(exceptions),
        top_exception=top,
        instant_fail=sum(is_instant_fail(t) for t in trials),
    )
