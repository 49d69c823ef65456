"""The deep probe's reader: a bounded SAMPLE of one run's literal rollouts, read on the login node.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible, because
``probes.remote.script.build_rollouts_script`` ships this source to the login node as
``python3 -`` over the sweep's one SSH connection (the request rides inside the script as a
string literal; nothing reaches a shell). What it reads, and the bounds that make its cost
independent of the run's size:

* Harbor trial trees (``trial_roots``: a job dir, SkyRL's flat trials dir, or a dir of job
  dirs): one bounded listing per directory (``max_listing`` names), then an evenly spaced
  sample of ``max_trials`` trial dirs; per trial ``result.json`` (reward, exception type, token
  counts, agent-execution timing) and ``agent/trajectory.json`` (the agent's last messages);
  a sampled trial with no result.json yet is counted unfinished, with its config.json's time
  (written when it starts) against the node's clock (``read_at``),
  each read whole up to ``max_result_bytes`` (a JSON document cut short reads as nothing, and
  terminus-2's rollout details make a result.json megabytes), one at a time, a result.json's
  token ids cut from the text before it is parsed (``harbor_reduce.slim_result``).
* Rollout dumps (``dump_dirs``): verl's ``trainer.rollout_data_dir`` / ``validation_data_dir``
  (``<step>.jsonl``, one ``{"input","output","score","step",...}`` line per sample), SkyRL's
  ``dumped_evals/global_step_N_evals/<source>.jsonl`` (``input_prompt``, ``output_response``,
  ``score``, ``stop_reason``; its agent loop's ``score`` is a per-token list, summed) and its
  ``dumped_data/global_step_N_training_input.pkl`` (listed for its steps, NEVER unpickled: a
  pickle runs code). Only the first step file (the run's own baseline) and the latest
  ``max_files`` are opened, each to ``max_file_bytes`` and ``max_lines`` lines; every text
  field is cut to ``max_text`` characters.

Every open, read and listing goes through ``probes.remote.guard``, the collector's own rules
(one implementation, shipped in front of this source): only the job's user's regular files
(``owner``; a caller in process with no owner reads its own), ``O_NOFOLLOW`` and ``fstat`` on
the opened descriptor (a symlink, FIFO or device is skipped, never followed or waited on; only
a dump dir or trial root that is itself a link is followed, as the collector follows a root:
``Guard.open_root``),
nothing on /proc, /sys or /dev, and a deadline per operation. An ``owner`` unknown on this
node reads nothing. Past ``deadline_s`` the reader stops sampling and says so. Nothing here
raises on bad input: what could not be read is reported in ``skipped``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

# In-process the guard and the trial reducer are imported; shipped, their sources are
# prepended and these lines are ``pass`` (probes.remote.script.rollouts_source).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, Hung, Refused, resolve_uid
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import reduce_trial_data, slim_result

PROTOCOL = 1
Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9

_VERL_FILE = re.compile(r"^(\d{1,12})\.jsonl$")
_SKYRL_EVAL_DIR = re.compile(r"^global_step_(\d{1,12})_evals$")
_SKYRL_BATCH = re.compile(r"^global_step_(\d{1,12})_training_input\.pkl$")
DEFAULTS = {"max_trials": 64, "max_listing": 20000, "max_files": 3, "max_lines": 64,
            "max_file_bytes": 1 << 20, "max_text": 2000, "deadline_s": 20.0,
            "read_timeout_s": 5.0, "max_result_bytes": 64 << 20}


class _Budget:
    """The request's bounds and the wall-clock deadline, shared by every reader below."""

    def __init__(self, request: Json) -> None:
        limits = dict(DEFAULTS)
        limits.update({k: v for k, v in request.items() if k in DEFAULTS})
        self.max_trials = int(limits["max_trials"])
        self.max_listing = int(limits["max_listing"])
        self.max_files = int(limits["max_files"])
        self.max_lines = int(limits["max_lines"])
        self.max_file_bytes = int(limits["max_file_bytes"])
        self.max_result_bytes = int(limits["max_result_bytes"])
        self.max_text = int(limits["max_text"])
        self.deadline = time.monotonic() + float(limits["deadline_s"])
        owner = request.get("owner")
        uid = resolve_uid(owner) if owner else os.geteuid()
        self.guard = Guard(uid, float(limits["read_timeout_s"]), self.deadline,
                           user=str(owner or "(caller)"))
        self.bytes_read = 0
        self.files_opened = 0
        self.skipped: list[str] = []

    def expired(self) -> bool:
        return time.monotonic() > self.deadline


def read_regular(path: str, limit: int, budget: _Budget) -> bytes | None:
    """At most ``limit`` bytes of the job's regular file (guard's rules); ``None`` otherwise."""
    try:
        fd = budget.guard.open(path)
    except FileNotFoundError:
        return None
    except (Refused, Hung) as exc:
        budget.skipped.append(str(exc))
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    try:
        budget.files_opened += 1
        data = budget.guard.read(fd, 0, limit, path)
    except Hung as exc:
        budget.skipped.append(str(exc))
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    finally:
        os.close(fd)
    budget.bytes_read += len(data)
    return data


def list_dir(path: str, budget: _Budget, root: bool = False) -> list[Any] | None:
    """``(name, is_dir)`` pairs, sorted, at most ``max_listing``; links are never followed,
    but for a ``root`` (a dump dir, a trial root) that is itself one, to a directory the job's
    user could list (``Guard.open_root``). An absent dir is ``None`` unsaid (most configured
    ones are); one that is there but not listed (no permission, not a directory) is said: its
    rollouts are unread, not absent."""
    try:
        out, cut = budget.guard.list_entries(path, budget.max_listing, root)
    except (Refused, Hung) as exc:
        budget.skipped.append(str(exc))
        return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        budget.skipped.append(f"{path}: {type(exc).__name__}")
        return None
    if cut:
        budget.skipped.append(f"{path}: listing cut at {budget.max_listing}")
    return out


def read_document(path: str, budget: _Budget) -> Any:
    """A Harbor JSON file (trial result, trajectory) read whole up to ``max_result_bytes``
    (past it: skipped, said), rollout details cut before parsing; ``None`` otherwise."""
    raw = read_regular(path, budget.max_result_bytes, budget)
    if raw is not None and len(raw) >= budget.max_result_bytes:
        budget.skipped.append(f"{path}: past {budget.max_result_bytes} bytes: not parsed")
        return None
    return _json(slim_result(raw) if raw is not None else None)


def _json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None


def _dict(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _score(value: Any) -> float | None:
    """A sample's reward: a number, or SkyRL's per-token rewards (a list of numbers: the agent
    loop's ``_build_per_token_rewards`` puts the verifier's reward on the last token), summed
    as SkyRL's own metrics sum them (``get_metrics_from_generator_output``)."""
    if not isinstance(value, list):
        return _number(value)
    numbers = [_number(v) for v in value]
    if not numbers or any(n is None for n in numbers):
        return None
    total = math.fsum(n for n in numbers if n is not None)
    return total if math.isfinite(total) else None


def _cut(value: Any, budget: _Budget) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text[:budget.max_text]


def _sample(names: list[str], k: int) -> list[str]:
    """``k`` names spread evenly over the sorted list (always the first and the last)."""
    if len(names) <= k:
        return list(names)
    if k <= 1:
        return names[-1:]
    step = (len(names) - 1) / float(k - 1)
    return [names[round(i * step)] for i in range(k)]


# -- Harbor trials --------------------------------------------------------------------------


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "".join(str(_dict(p).get("text") or "") for p in message)
    return ""


def _agent_messages(trial_dir: str, result: Json, budget: _Budget) -> list[str]:
    """The agent's last messages: ``agent/trajectory.json`` (ATIF), else ``all_messages``."""
    texts: list[str] = []
    trajectory = read_document(os.path.join(trial_dir, "agent", "trajectory.json"), budget)
    steps = _dict(trajectory).get("steps")
    for step in steps if isinstance(steps, list) else []:
        if _dict(step).get("source") == "agent":
            texts.append(_message_text(step.get("message")))
    if not texts:
        messages = _dict(_dict(result.get("agent_result")).get("metadata")).get("all_messages")
        for msg in messages if isinstance(messages, list) else []:
            if _dict(msg).get("role") == "assistant":
                texts.append(_message_text(msg.get("content")))
    return [t[:budget.max_text] for t in texts[-3:]]


def _trial(trial_dir: str, budget: _Budget) -> Json | None:
    result = read_document(os.path.join(trial_dir, "result.json"), budget)
    if not isinstance(result, dict):
        return None
    agent = _dict(result.get("agent_result"))
    # Reward, exception, turns, output tokens and the agent phase as the counts read them
    # (``harbor_reduce``, shipped in front): a multi-step trial's from its steps.
    reduced = reduce_trial_data(result)
    return {
        "reward": reduced["reward"],
        "exception_type": reduced["exception_type"],
        "n_output_tokens": _number(reduced["n_output_tokens"]),
        "n_input_tokens": _number(agent.get("n_input_tokens")),
        "n_turns": _number(reduced["n_turns"]),
        "started_at": result.get("started_at"),
        "finished_at": result.get("finished_at"),
        "agent_started_at": reduced["agent_started_at"],
        "agent_finished_at": reduced["agent_finished_at"],
        "messages": _agent_messages(trial_dir, result, budget),
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


def _trial_dirs(root: str, budget: _Budget) -> list[str]:
    """Every trial dir under a job dir, directly under a flat trials dir, or under each job dir
    of a ``jobs_dir`` (bounded)."""
    entries = list_dir(root, budget, root=True)
    if entries is None:
        return []
    if _job_dir(root, entries, budget) or _flat(root, entries, budget):
        return [os.path.join(root, n) for n, is_dir in entries if is_dir]
    found: list[str] = []
    for name, is_dir in entries:
        if not is_dir or len(found) >= budget.max_listing:
            continue
        job = os.path.join(root, name)
        sub = list_dir(job, budget) or []
        if _job_dir(job, sub, budget):
            found.extend(os.path.join(job, n) for n, d in sub if d)
    return found[:budget.max_listing]


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


# -- rollout dumps --------------------------------------------------------------------------


def _line_sample(raw: bytes, kind: str, budget: _Budget) -> list[Json]:
    lines = raw.split(b"\n")
    if len(raw) >= budget.max_file_bytes:
        lines = lines[:-1]  # the cut last line is not JSON
    out: list[Json] = []
    for line in lines:
        if len(out) >= budget.max_lines:
            break
        row = _json(line) if line.strip() else None
        if not isinstance(row, dict):
            continue
        if kind == "skyrl":
            text_in, text_out = row.get("input_prompt"), row.get("output_response")
        else:
            text_in, text_out = row.get("input"), row.get("output")
        output = text_out if isinstance(text_out, str) else ""
        out.append({"input": _cut(text_in, budget), "output": output[:budget.max_text],
                    "output_chars": len(output), "score": _score(row.get("score")),
                    "stop_reason": _cut(row.get("stop_reason"), budget)})
    return out


def _chosen(steps: list[Any], budget: _Budget) -> list[Any]:
    """The first step (baseline) and the latest ``max_files``."""
    steps = sorted(steps)
    latest = steps[-budget.max_files:] if budget.max_files > 0 else []
    return ([steps[0]] if steps and steps[0] not in latest else []) + latest


def _numbered(entries: list[Any], pattern: Any, dirs: bool) -> list[Any]:
    """``(step, name)`` for the entries whose name matches ``pattern`` (no walrus: 3.7)."""
    out = []
    for name, is_dir in entries:
        match = pattern.match(name) if is_dir == dirs else None
        if match:
            out.append((int(match.group(1)), name))
    return out


def _verl_dir(path: str, entries: list[Any], budget: _Budget) -> Json:
    files = _numbered(entries, _VERL_FILE, False)
    steps = []
    for step, name in _chosen(files, budget):
        if budget.expired():
            budget.skipped.append(f"{path}: deadline reached")
            break
        raw = read_regular(os.path.join(path, name), budget.max_file_bytes, budget)
        if raw is not None:
            steps.append({"step": step, "file": name, "samples": _line_sample(raw, "verl", budget)})
    return {"path": path, "kind": "verl", "steps_listed": sorted(s for s, _ in files),
            "steps": steps}


def _skyrl_evals(path: str, entries: list[Any], budget: _Budget) -> Json:
    dirs = _numbered(entries, _SKYRL_EVAL_DIR, True)
    steps = []
    for step, name in _chosen(dirs, budget):
        sub = os.path.join(path, name)
        for fname, is_dir in list_dir(sub, budget) or []:
            if is_dir or not fname.endswith(".jsonl") or fname == "aggregated_results.jsonl":
                continue
            raw = read_regular(os.path.join(sub, fname), budget.max_file_bytes, budget)
            if raw is not None:
                steps.append({"step": step, "file": name + "/" + fname,
                              "samples": _line_sample(raw, "skyrl", budget)})
            break  # one data source per step is a sample
    return {"path": path, "kind": "skyrl-evals", "steps_listed": sorted(s for s, _ in dirs),
            "steps": steps}


def collect_dump(path: str, budget: _Budget) -> Json | None:
    """One dump directory, recognised by its layout; ``None`` when it is none of ours."""
    entries = list_dir(path, budget, root=True)
    if entries is None:
        return None
    names = dict(entries)
    if names.get("dumped_evals") or names.get("dumped_data"):
        out = _skyrl_evals(os.path.join(path, "dumped_evals"),
                           list_dir(os.path.join(path, "dumped_evals"), budget) or [], budget)
        batches = list_dir(os.path.join(path, "dumped_data"), budget) or []
        out["batch_steps"] = sorted(s for s, _ in _numbered(batches, _SKYRL_BATCH, False))
        return out
    if any(_SKYRL_EVAL_DIR.match(n) for n, d in entries if d):
        return _skyrl_evals(path, entries, budget)
    if any(_VERL_FILE.match(n) for n, d in entries if not d):
        return _verl_dir(path, entries, budget)
    return {"path": path, "kind": "empty", "steps_listed": [], "steps": []}


def collect_rollouts(request: Json) -> Json:
    """Serve one deep-probe request (see the module docstring); returns a JSON-able dict."""
    budget = _Budget(request)
    started = time.monotonic()
    trials = collect_trials([str(r) for r in request.get("trial_roots", [])], budget)
    dumps = []
    for path in request.get("dump_dirs", []):
        found = collect_dump(str(path), budget)
        if found is not None:
            dumps.append(found)
    return {"protocol": PROTOCOL, "read_at": time.time(), "trials": trials, "dumps": dumps,
            "files_opened": budget.files_opened, "bytes_read": budget.bytes_read,
            "skipped": budget.skipped[:50], "elapsed_s": time.monotonic() - started}


def main(request_json: str) -> None:
    """Entry point of the shipped script: request JSON in, answer JSON on stdout."""
    sys.stdout.write(json.dumps(collect_rollouts(json.loads(request_json))) + "\n")
