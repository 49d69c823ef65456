"""Whole-run trial statistics reduced where the result.json files lie (the login node).

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). The rulebook says "count result.json over the
whole run, not just the tail", and an eval can hold 100k trials in one job directory, so
nothing here keeps per-trial records: every reduced trial is folded into a small tally (count,
completed, scored, passed, reward sum, turns, exception counts, instant failures, newest
mtime) and only the ``WINDOW`` most recently finished trials are kept as records, for the
rules that read the last 100 (the pass-rate signal, instant-fail). The tally's arithmetic is
``probes.harbor.summarize_trials``'s, rule for rule (a test holds the two to the same answers):
a trial is completed when it has a finish time, a reward or an exception; rewards, turns and
exceptions count over completed trials; instant-fail over all, on the agent's execution phase
when the result has one (a second, or the retries of a connection failure). The time bound
belongs to the caller (``probes.remote.trial_roots``): a tally that stopped early says so
(``complete: false``) with the seconds it spent.
"""

from __future__ import annotations

import heapq
import itertools
import math
from datetime import datetime, timezone
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

WINDOW = 100
"""Per-trial records kept per trial root: the rulebook's "last 100" window."""

EXCEPTION_KINDS = 64
"""Distinct exception types a tally counts by name; a trial whose type is not among them by
then counts under ``OTHER_EXCEPTIONS``. Harbor's types are a few dozen class names; a tree of
trials each naming its own (corrupt or hostile files) would otherwise grow the answer by one
key a trial, and the answer budget is shared with every later job of the request."""
OTHER_EXCEPTIONS = "(other exception types)"

_INSTANT_S = 1.0
RETRIED_S = 600.0
"""The longest agent phase that is only an agent's LLM client retrying an unreachable endpoint:
terminus-2 makes 3 x 3 attempts with 4-8 s waits (about 36 s refused, a few minutes when each
attempt waits out a connect timeout), well under the agent timeouts tasks set (15 min and up).
Past it, a run without a token is not the rulebook's finished_at ≈ started_at."""
_TALLY_ORDER = itertools.count()

Tally = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def new_tally() -> Tally:
    """An empty tally (JSON-able: it crosses the wire as it is)."""
    return {"trials": 0, "completed": 0, "scored": 0, "passed": 0, "reward_sum": 0.0,
            "turns_n": 0, "turns_sum": 0, "exceptions": {}, "instant_fail": 0,
            "newest_mtime": None, "complete": True, "seconds": 0.0, "unreadable": 0}


def iso_epoch(value: Any) -> float | None:
    """Epoch seconds of an ISO time as Harbor writes it (naive is UTC); else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)  # noqa: UP017 - datetime.UTC is 3.11+
    try:
        return stamp.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def is_instant(reduced: Tally) -> bool:
    """No output tokens, and the agent phase (else the whole trial) took at most a second, or
    at most ``RETRIED_S`` ending in a connection failure: the agent never got an answer from
    the model, only its client's retries ran (a timeout is never one: its trial is scored). A
    trial that never started (an exception before any agent ran: a sandbox refused at once) is
    never one: the environment failed, not the tunnel (``probes.harbor.never_started``); nor is
    a trial its verifier scored above 0 (it did the work: Harbor's oracle agent runs solve.sh
    in under a second and calls no model)."""
    reward = reduced.get("reward")
    if reduced.get("n_output_tokens") or (
            isinstance(reward, (int, float)) and not isinstance(reward, bool) and reward > 0):
        return False
    start = iso_epoch(reduced.get("agent_started_at"))
    end = iso_epoch(reduced.get("agent_finished_at"))
    if start is None and end is None:
        if _never_started(reduced):
            return False  # no agent ran: the sandbox's failure, not the tunnel's
        start, end = iso_epoch(reduced.get("started_at")), iso_epoch(reduced.get("finished_at"))
    if start is None or end is None:
        return False
    bound = RETRIED_S if reduced.get("connection_failure") is True else _INSTANT_S
    return abs(end - start) <= bound


def _never_started(reduced: Tally) -> bool:
    """``probes.harbor.never_started``'s twin on a reduced trial."""
    return (reduced.get("exception_type") is not None and reduced.get("reward") is None
            and reduced.get("n_output_tokens") is None and reduced.get("n_turns") is None
            and reduced.get("agent_started_at") is None
            and reduced.get("agent_finished_at") is None)


def _tally_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def add_trial(tally: Tally, reduced: Tally, mtime: float | None) -> None:
    """Fold one reduced trial (``reduce_trial``'s dict) into the tally."""
    tally["trials"] += 1
    reward = _tally_number(reduced.get("reward"))
    exception = reduced.get("exception_type")
    exception = exception if isinstance(exception, str) and exception else None
    if reduced.get("finished_at") is not None or reward is not None or exception is not None:
        tally["completed"] += 1
        if reward is not None:
            tally["scored"] += 1
            tally["passed"] += 1 if reward > 0 else 0
            tally["reward_sum"] += reward
        add_turns(tally, reduced.get("n_turns"), reduced.get("agent_runs"))
        if exception is not None:
            counts = tally["exceptions"]
            if exception not in counts and len(counts) >= EXCEPTION_KINDS:
                exception = OTHER_EXCEPTIONS
            counts[exception] = counts.get(exception, 0) + 1
    if is_instant(reduced):
        tally["instant_fail"] += 1
    if mtime is not None and (tally["newest_mtime"] is None or mtime > tally["newest_mtime"]):
        tally["newest_mtime"] = mtime


def add_turns(tally: Tally, turns: Any, runs: Any) -> None:
    """Fold one completed trial's turns (``runs``: its agent runs, one a step of a multi-step
    trial) into the tally's average; turns that are no count are not."""
    if isinstance(turns, int) and not isinstance(turns, bool) and turns >= 0:
        good = isinstance(runs, int) and not isinstance(runs, bool) and runs > 0
        tally["turns_n"] += runs if good else 1
        tally["turns_sum"] += turns


def window_key(reduced: Tally, name: str) -> tuple[bool, float, str]:
    """The order ``probes.harbor.build_trial_tree`` gives trials: unfinished first, then by
    finish time, then by name; the window keeps the largest keys."""
    finished = iso_epoch(reduced.get("finished_at"))
    return (finished is not None, finished if finished is not None else 0.0, name)


def keep_recent(window: list[Any], reduced: Tally, name: str, where: str,
                size: int = WINDOW) -> None:
    """Keep ``reduced`` in ``window`` (a heap) if it is among the ``size`` most recent."""
    item = (window_key(reduced, name), next(_TALLY_ORDER), where, name, reduced)
    if len(window) < size:
        heapq.heappush(window, item)
    elif item[0] > window[0][0]:
        heapq.heapreplace(window, item)
