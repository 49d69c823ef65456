"""The Eval row's ``model × benchmark`` (rulebook: the Eval table's first column), from Harbor.

Policy: Harbor keys each eval of a job ``{agent}__{model}__{dataset}`` (``{agent}__{dataset}``
when the agent has no model: the oracle), ``JobStats.format_agent_evals_key``, in the job
result.json's ``stats.evals``. The row keeps the job's name (two evals of one model and
benchmark must stay apart, and ``/job`` takes the name's id) and adds `` (<model> ×
<benchmark>)`` when the job ran exactly one such eval and its name does not already say both;
``adhoc`` (local tasks with no dataset) names no benchmark.
"""

from __future__ import annotations

import re

_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


def _plain(text: str) -> str:
    return _NOT_ALNUM.sub("", text.lower())


def _model_benchmark(key: str) -> tuple[str, str | None] | None:
    """(model, benchmark) of one Harbor eval key, the oracle's agent standing for its model."""
    parts = key.split("__")
    if len(parts) < 2 or not all(parts):
        return None
    model = "__".join(parts[1:-1]) if len(parts) > 2 else parts[0]
    return model, parts[-1] if parts[-1] != "adhoc" else None


def benchmarks(eval_keys: tuple[str, ...]) -> list[str]:
    """The distinct benchmarks of ``eval_keys``, in order (``adhoc`` names none)."""
    read = (_model_benchmark(k) for k in eval_keys)
    return list(dict.fromkeys(mb[1] for mb in read if mb is not None and mb[1] is not None))


def eval_suffix(eval_keys: tuple[str, ...], job_name: str) -> str:
    """`` (<model> × <benchmark>)`` for the row of ``job_name``, or ``""``; a tree holding
    several benchmarks of one model (one job run on several datasets, or an array's tasks
    writing into one ``jobs/``) is `` (<model> × N benchmarks)``: its counts are theirs
    together, never one benchmark's."""
    if len(eval_keys) != 1:
        read = [_model_benchmark(k) for k in eval_keys]
        models = {mb[0] for mb in read if mb is not None}
        several = benchmarks(eval_keys)
        if len(models) == 1 and len(several) > 1:
            return f" ({models.pop()} × {len(several)} benchmarks)"
        return ""
    found = _model_benchmark(eval_keys[0])
    if found is None:
        return ""
    model, benchmark = found
    said = [w for w in (model, benchmark) if w is not None]
    name = _plain(job_name)
    if all(_plain(w) and _plain(w) in name for w in said):
        return ""
    return f" ({' × '.join(said)})"
