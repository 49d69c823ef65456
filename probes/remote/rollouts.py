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

The budget and its guarded reads are ``probes.remote.rollout_budget``, the trial sample
``probes.remote.rollout_trials`` (both shipped in front of this source); this module reads
the dumps and serves the request.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from typing import Any

# In-process the shipped modules it builds on are imported; shipped, their sources are
# prepended and these lines are ``pass`` (probes.remote.script.rollouts_source).
with contextlib.suppress(ImportError):
    from probes.remote.rollout_budget import (
        Json,
        _Budget,
        _json,
        list_dir,
        read_regular,
    )
with contextlib.suppress(ImportError):
    from probes.remote.harbor_reduce import _number  # the one in the shipped namespace
with contextlib.suppress(ImportError):
    from probes.remote.rollout_trials import collect_trials
with contextlib.suppress(ImportError):
    from probes.remote.guard import Hung, leave_if_stuck, supervised
with contextlib.suppress(ImportError):
    from probes.remote.hung_marks import mark_hung

PROTOCOL = 1

_VERL_FILE = re.compile(r"^(\d{1,12})\.jsonl$")
_SKYRL_EVAL_DIR = re.compile(r"^global_step_(\d{1,12})_evals$")
_SKYRL_BATCH = re.compile(r"^global_step_(\d{1,12})_training_input\.pkl$")


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


def _left_stuck(budget: _Budget) -> None:
    """A read given up: what it was reading is not touched again while it waits there
    (``probes.remote.hung_marks``), by this reader or any collector."""
    if budget.guard.base:
        mark_hung(budget.guard.base)


def collect_rollouts(request: Json) -> Json:
    """Serve one deep-probe request (see the module docstring); returns a JSON-able dict."""
    budget = _Budget(request)
    started = time.monotonic()
    roots = [str(r) for r in request.get("trial_roots", [])]
    # Each read in a thread of its own (guard.supervised): one stuck on a hung mount is
    # given up and said, the others still read.
    try:
        trials = supervised(collect_trials, (roots, budget), budget.deadline)
    except Hung as exc:
        _left_stuck(budget)
        budget.skipped.append(f"trials: {exc}")
        trials = {"roots": roots, "listed": 0, "sampled": {}, "unfinished": 0,
                  "oldest_unfinished": None}
    dumps = []
    for path in request.get("dump_dirs", []):
        try:
            found = supervised(collect_dump, (str(path), budget), budget.deadline)
        except Hung as exc:
            _left_stuck(budget)
            budget.skipped.append(f"{path}: {exc}")
            continue
        if found is not None:
            dumps.append(found)
    return {"protocol": PROTOCOL, "read_at": time.time(), "trials": trials, "dumps": dumps,
            "files_opened": budget.files_opened, "bytes_read": budget.bytes_read,
            "skipped": budget.skipped[:50], "elapsed_s": time.monotonic() - started}


def main(request_json: str) -> None:
    """Entry point of the shipped script: request JSON in, answer JSON on stdout."""
    sys.stdout.write(json.dumps(collect_rollouts(json.loads(request_json))) + "\n")
    leave_if_stuck()
