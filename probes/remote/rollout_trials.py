"""The deep probe reader's Harbor trials: an evenly spaced sample of one run's trial dirs.

Policy: part of the shipped rollout reader (``probes.remote.rollouts``), so STANDARD LIBRARY
ONLY and Python 3.7+ compatible; ``probes.remote.script.rollouts_source`` prepends it after
``rollout_budget``. The trial roots may be a Harbor job dir, SkyRL's flat trials dir or a dir
of job dirs (told apart by their listings, bounded by ``max_listing``); at most
``max_trials`` trial dirs are read, each result.json through ``harbor_reduce`` as the counts
read it, a trial with no result.json yet counted unfinished from its config.json's mtime.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

# In-process these are imported; shipped, their sources are prepended and these lines are
# ``pass`` (probes.remote.script.rollouts_source).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Hung, Refused
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import reduce_trial_data
with contextlib.suppress(ImportError):
    from probes.remote.rollout_budget import Json, _Budget, list_dir, read_document
with contextlib.suppress(ImportError):
    # The reducer's _dict/_number, the one definition in the shipped script's namespace
    # (tests/probes/remote/test_shipped_names.py).
    from probes.remote.harbor_reduce import _dict, _number


def _sample(names: list[str], k: int) -> list[str]:
    """``k`` names spread evenly over the sorted list (always the first and the last)."""
    if len(names) <= k:
        return list(names)
    if k <= 1:
        return names[-1:]
    step = (len(names) - 1) / float(k - 1)
    return [names[round(i * step)] for i in range(k)]


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "".join(str(_dict(p).get("text") or "") for p in message)
    return ""


def _agent_messages(trial_dir: str, result: Json, budget: _Budget) -> tuple[list[str], int | None]:
    """The agent's last messages: ``agent/trajectory.json`` (ATIF), else ``all_messages``;
    and the trajectory's turns, its top-level ``agent`` steps (Harbor's count: an installed
    agent's only record of them), ``None`` with no trajectory."""
    texts: list[str] = []
    trajectory = read_document(os.path.join(trial_dir, "agent", "trajectory.json"), budget)
    steps = _dict(trajectory).get("steps")
    for step in steps if isinstance(steps, list) else []:
        if _dict(step).get("source") == "agent":
            texts.append(_message_text(step.get("message")))
    turns = len(texts) if isinstance(steps, list) else None
    if not texts:
        messages = _dict(_dict(result.get("agent_result")).get("metadata")).get("all_messages")
        for msg in messages if isinstance(messages, list) else []:
            if _dict(msg).get("role") == "assistant":
                texts.append(_message_text(msg.get("content")))
    return [t[:budget.max_text] for t in texts[-3:]], turns


def _trial(trial_dir: str, budget: _Budget) -> Json | None:
    result = read_document(os.path.join(trial_dir, "result.json"), budget)
    if not isinstance(result, dict):
        return None
    agent = _dict(result.get("agent_result"))
    # Reward, exception, turns, output tokens and the agent phase as the counts read them
    # (``harbor_reduce``, shipped in front): a multi-step trial's from its steps.
    reduced = reduce_trial_data(result)
    messages, trajectory_turns = _agent_messages(trial_dir, result, budget)
    turns = reduced["n_turns"] if reduced["n_turns"] is not None else trajectory_turns
    return {
        "reward": reduced["reward"],
        "exception_type": reduced["exception_type"],
        "n_output_tokens": _number(reduced["n_output_tokens"]),
        "n_input_tokens": _number(agent.get("n_input_tokens")),
        "n_turns": _number(turns),
        "started_at": result.get("started_at"),
        "finished_at": result.get("finished_at"),
        "agent_started_at": reduced["agent_started_at"],
        "agent_finished_at": reduced["agent_finished_at"],
        "messages": messages,
    }


_TRIAL_KEYS = ("trial_name", "task_name", "agent_result", "verifier_result", "exception_info")
"""Keys of a trial's ``result.json`` that a Harbor job's never has (as ``harbor_reduce``)."""


def _is_trial_dir(path: str, entries: list[Any], budget: _Budget) -> bool | None:
    """A dir holding a result.json: a trial dir (its subdirs ``agent/``, ``verifier/`` hold no
    result.json), not a Harbor job dir (its subdirs are trials holding one)? With no such
    subdir the result.json's content decides; ``None`` when it does not read."""
    for name, is_dir in entries:
        sub = list_dir(os.path.join(path, name), budget) if is_dir else None
        if sub is not None and any(n == "result.json" and not d for n, d in sub):
            return False
    data = read_document(os.path.join(path, "result.json"), budget)
    if not isinstance(data, dict):
        return None
    return any(key in data for key in _TRIAL_KEYS)


def _flat(root: str, entries: list[Any], budget: _Budget) -> bool:
    """Trial dirs directly below ``root`` (SkyRL's flat Harbor ``trials_dir``)? Decided by the
    first subdirectory that is a trial dir by its ``agent/`` (Harbor makes it when a trial
    starts; a job dir holds trial dirs, never one), else that has a result.json that reads."""
    for name, is_dir in entries:
        path = os.path.join(root, name)
        sub = list_dir(path, budget) if is_dir else None
        if sub is not None and ("agent", True) in sub:
            return True
        if sub is not None and any(n == "result.json" and not d for n, d in sub):
            trial = _is_trial_dir(path, sub, budget)
            if trial is not None:
                return trial
    return False


_JOB_FILES = ("result.json", "config.json")
"""A Harbor job dir's own files (either marks one)."""


def _job_dir(path: str, entries: list[Any], budget: _Budget) -> bool:
    """Does ``path`` hold a Harbor job's own files? Seen in its listing, else opened: a job
    dir of more trials than ``max_listing`` has a cut listing, and the cut falls wherever the
    directory order puts it (most likely past these two)."""
    if any(n in _JOB_FILES and not d for n, d in entries):
        return True
    if len(entries) < budget.max_listing:
        return False  # a whole listing without them: none there
    for name in _JOB_FILES:
        with contextlib.suppress(OSError, Refused, Hung):
            budget.guard.stat_file(os.path.join(path, name))
            return True
    return False


GROUP_DEPTH = 2
"""Plain directories looked through for job dirs below a ``jobs_dir``, as the counts do
(``probes.remote.job_dirs.GROUP_DEPTH``: ``harbor run -o jobs/<model>[/<bench>]``)."""
GROUP_LISTINGS = 64
"""Such plain directories listed at most per root (the counts' bound; here in name order)."""


def _trial_dirs(root: str, budget: _Budget) -> list[str]:
    """Every trial dir under a job dir, directly under a flat trials dir, or under each job dir
    of a ``jobs_dir``, up to ``GROUP_DEPTH`` plain levels below it (bounded)."""
    entries = list_dir(root, budget, root=True)
    if entries is None:
        return []
    if _job_dir(root, entries, budget) or _flat(root, entries, budget):
        return [os.path.join(root, n) for n, is_dir in entries if is_dir]
    found: list[str] = []
    _jobs_below(root, entries, budget, found, listings=[GROUP_LISTINGS])
    return found[:budget.max_listing]


def _jobs_below(path: str, entries: list[Any], budget: _Budget, found: list[str], *,
                listings: list[int], depth: int = 0) -> None:
    """The trial dirs of each job dir among ``entries`` into ``found``; each plain directory
    that is no flat trials dir looked through in turn, down to ``GROUP_DEPTH`` (``listings``:
    what is left of ``GROUP_LISTINGS``, shared by every level)."""
    for name, is_dir in entries:
        if not is_dir or len(found) >= budget.max_listing:
            continue
        job = os.path.join(path, name)
        sub = list_dir(job, budget) or []
        if _job_dir(job, sub, budget):
            found.extend(os.path.join(job, n) for n, d in sub if d)
        elif depth < GROUP_DEPTH and listings[0] > 0 and not _flat(job, sub, budget):
            listings[0] -= 1
            _jobs_below(job, sub, budget, found, listings=listings, depth=depth + 1)


def _unfinished_since(trial_dir: str, budget: _Budget) -> float | None:
    """When a trial with no result.json started (the mtime of its config.json, which Harbor
    writes first; its result.json is written when it ends); ``None`` when it has a result.json
    (unreadable: not unfinished) or no config.json either."""
    try:
        budget.guard.stat_file(os.path.join(trial_dir, "result.json"))
        return None
    except FileNotFoundError:
        pass
    except (OSError, Refused, Hung):
        return None
    try:
        return budget.guard.stat_file(os.path.join(trial_dir, "config.json")).st_mtime
    except (OSError, Refused, Hung):
        return None


def collect_trials(roots: list[str], budget: _Budget) -> Json:
    """A sample of trials across the roots: how many were listed, the sampled ones that
    ended, and how many sampled ones have not (with the oldest one's start)."""
    listed: list[str] = []
    for root in roots:
        listed.extend(_trial_dirs(root, budget))
    trials: Json = {}
    unfinished: list[float] = []
    for path in _sample(sorted(listed), budget.max_trials):
        if budget.expired():
            budget.skipped.append("trials: deadline reached")
            break
        reduced = _trial(path, budget)
        if reduced is not None:
            trials[os.path.basename(path)] = reduced
            continue
        since = _unfinished_since(path, budget)
        if since is not None:
            unfinished.append(since)
    return {"roots": roots, "listed": len(listed), "sampled": trials,
            "unfinished": len(unfinished),
            "oldest_unfinished": min(unfinished) if unfinished else None}
