"""SFT rules and the SFT grid rollup.

Policy (seed §SFT and CONTRACT §5/§6):

- Progress, stall, buffer-filling, ``nan-loss`` and ``grad-explosion`` are the training-loop
  rules SFT shares with RL (and Harbor's buffer rule): see :mod:`report.rules`.
- No gradient (grad_norm exactly 0 over the newest window, :func:`report.rules.no_gradient_rule`):
  ``warning`` and ``diagnose``, on a live or COMPLETED run alike (never routed to cleanup).
- OOM with no step (or step <= 1): "CUDA OOM at first forward/backward" (batch/sequence
  geometry, not a flaky node).
- Grid rollup (a campaign): >= 2 distinct SFT cells (name stems) of one naming family, the name
  up to its first scale token (``7b``, ``72B``, ``1.5b``; one ending the name after a cell's
  own token drops that token too, ``sft-grid-lr5e6-7b`` -> ``sft-grid``; a scale glued to the
  model name, ``qwen7b``, keeps the model: ``sft-grid-qwen``), so cells at different scales roll up
  together; without a scale token, the name minus its last ``-``/``_`` token; or jobs carrying
  the same ``grid`` label. Pending copies of a running cell (restart-chain resume backups,
  renamed ``-r2``/``_resume``) and repeated pending copies are counted once, across scales. A
  COMPLETED cell flagged ``incomplete-run``, or stopped at its time budget (a planned stop's
  restart, or ``diagnose`` with no successor), is not done: it is listed as stopped short. The
  long pole is the running cell with the longest ETA (remaining steps x its trailing-window
  rate), not the one with the most steps left; a pending cell at a larger scale than every
  running one (``72b`` waiting while ``7b`` cells run) is the long pole instead, ``(pending)``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from probes.models import JobState
from report.cells import format_duration
from report.chain import name_stem
from report.findings import (
    Findings,
    JudgeContext,
    Priority,
    series,
)
from report.grid_cells import Key, cell_stems
from report.models import GridCell, GridRollup, JobReport
from report.rules import (
    buffer_rule,
    divergence_rule,
    no_gradient_rule,
    sec_per_step,
    stall_rule,
    step_progress,
)
from report.trend import LOSS_FLOOR, describe_loss, with_sparkline


def oom_at_start(ctx: JudgeContext, f: Findings) -> None:
    """Name an OOM before the first real step as a geometry problem, not a flaky node."""
    faults = ctx.facts.summary.faults if ctx.facts.summary else ()
    if any(fault.kind == "oom" for fault in faults) and (f.step is None or f.step <= 1):
        f.trend(Priority.TERMINAL + 1, "CUDA OOM at first forward/backward")


def judge_sft(ctx: JudgeContext, f: Findings) -> None:
    """Apply the SFT rules to one job."""
    step_progress(ctx, f)
    buffer_rule(ctx, f)
    stall_rule(ctx, f)
    divergence_rule(ctx, f, "loss")
    no_gradient_rule(ctx, f)
    oom_at_start(ctx, f)
    if ctx.running and ctx.history and ctx.fetch_ok:
        f.verdict("healthy")
        losses = series(ctx.history, "loss")
        text = describe_loss(losses)
        rate = sec_per_step(ctx)
        if rate and f.step is not None and f.total_steps and f.total_steps > f.step:
            text += f", ETA {format_duration((f.total_steps - f.step) * rate)}"
        f.trend(Priority.BACKGROUND, with_sparkline(text, losses, floor=LOSS_FLOOR))


_TOKEN_SPLIT = re.compile(r"[-_]")
_SCALE = re.compile(r"^(?:\d+x)?\d+(?:\.\d+)?[bmkt]$", re.IGNORECASE)
"""A model-scale token: ``7b``, ``72B``, ``1.5b``, ``350m``, ``8x7b``."""
_GLUED_SCALE = re.compile(r"^([a-z]+)(?:\d+x)?\d+(?:\.\d+)?[bm]$", re.IGNORECASE)
"""A scale glued to a model name: ``qwen7b``, ``llama70B``, ``mixtral8x7b``, ``smollm135m``
(group 1 is the model). Only billions/millions: ``seq32k``, ``ctx8k`` are sequence lengths."""


def grid_name(report: JobReport, labels: dict[str, str]) -> str | None:
    """The grid (campaign) a cell belongs to: its ``grid`` label, else its naming family.

    The family is the cell's name stem (restart suffixes stripped) up to its first scale token
    (``sft-qwen3-8b-lr1e5`` -> ``sft-qwen3``), or up to the model name a scale is glued to
    (``sft-grid-qwen7b-lr1e5`` -> ``sft-grid-qwen``), so cells at different scales are one campaign;
    a scale that ends the name after the cell's own token drops that token too
    (``sft-grid-lr5e6-7b`` -> ``sft-grid``);
    a name with no scale token drops its last token (``sft-grid-lr1e5`` -> ``sft-grid``). A
    family of one token is none: ``sft-gradexp``, ``sft-nanloss`` or ``sft-8b-gradexp`` share
    no more than the bucket's word, which names no campaign (they were one grid, their rows
    folded into one).
    """
    if labels.get("grid"):
        return labels["grid"]
    return _family(report, cell_stems([report])[0])


def _family(report: JobReport, cell: str) -> str | None:
    """The naming family of a job whose cell name is ``cell``: its name's without every
    restart-like suffix (``sft-x-lr1-r2`` is of ``sft-x``'s), else its cell's (LoRA ranks
    ``sft-lora-r8``, ``-r16``: ``sft-lora``)."""
    return grid_family(name_stem(report.name)) or grid_family(cell)


def grid_family(stem: str) -> str | None:
    """:func:`grid_name`'s naming family of a cell name (``report.grid_cells``)."""
    tokens = _TOKEN_SPLIT.split(stem)
    for index, token in enumerate(tokens):
        if index > 0 and _SCALE.match(token):
            if index >= 3 and index == len(tokens) - 1:
                # A scale after the cell's own token (sft-grid-lr5e6-7b): that token varies
                # between cells, the family is what comes before it.
                return _join_prefix(stem, tokens[:index - 1])
            return _join_prefix(stem, tokens[:index]) if index > 1 else None
        glued = _GLUED_SCALE.match(token) if index > 0 else None
        if glued:  # the model name stays in the family: qwen and llama cells stay apart
            return _join_prefix(stem, [*tokens[:index], glued.group(1)])
    return _join_prefix(stem, tokens[:-1]) if len(tokens) > 2 else None


def _join_prefix(stem: str, tokens: list[str]) -> str:
    """The stem's first ``len(tokens)`` tokens with their original separators."""
    length = sum(len(t) for t in tokens) + len(tokens) - 1
    return stem[:length]


def grid_names(jobs: Sequence[tuple[JobReport, dict[str, str]]],
               waits_for: Mapping[Key, Sequence[str]] | None = None) -> list[str | None]:
    """:func:`grid_name` of each SFT job (``None`` for other buckets), with one more family
    for cells whose varying token is not the last: a grid named ``sft-grid-lr1e5-v2``,
    ``sft-grid-lr3e5-v2`` (a version, run tag or date after the hyper-parameter) has no scale
    token, and dropping its last token leaves each cell a family of its own. Such cells (no
    ``grid`` label, alone in their family) that differ from another in exactly one token after
    a two-token prefix, with the same tokens after it, are one grid, named with ``*`` in the
    varying place (``sft-grid-*-v2``). Cells are named as ``report.grid_cells`` tells them,
    with ``waits_for`` (the job ids each (cluster, job id) waits on)."""
    cells = _cells(jobs, waits_for)
    names = [(labels.get("grid") or _family(report, cell)) if cell is not None else None
             for (report, labels), cell in zip(jobs, cells, strict=True)]
    stems: dict[str, set[str]] = defaultdict(set)
    for cell, name in zip(cells, names, strict=True):
        if name is not None and cell is not None:
            stems[name].add(cell)
    wild: dict[int, list[tuple[str, str]]] = {}
    counts: dict[str, set[str]] = defaultdict(set)
    for index, ((_, labels), name) in enumerate(zip(jobs, names, strict=True)):
        stem = cells[index]
        if stem is None or labels.get("grid") or (name and len(stems[name]) > 1):
            continue
        parts = re.split(r"([-_])", stem)  # tokens at even places, separators between
        tokens = parts[::2]
        keys = []
        for i in range(2, len(tokens) - 1):
            if not tokens[i] or _SCALE.match(tokens[i]):
                continue
            key = "".join(("*" if j == 2 * i else part) for j, part in enumerate(parts))
            keys.append((key, stem))
            counts[key].add(stem)
        wild[index] = keys
    for index, keys in wild.items():
        found = [key for key, _ in keys if len(counts[key]) >= 2]
        if found:  # the family with most cells; a tie goes to the later varying token
            names[index] = max(reversed(found), key=lambda k: len(counts[k]))
    return names


def _cells(jobs: Sequence[tuple[JobReport, dict[str, str]]],
           waits_for: Mapping[Key, Sequence[str]] | None) -> list[str | None]:
    """Each SFT job's cell name (``report.grid_cells``), None for other buckets."""
    sft = [report for report, _ in jobs if report.bucket == "sft"]
    found = iter(cell_stems(sft, waits_for))
    return [next(found) if report.bucket == "sft" else None for report, _ in jobs]


def grid_rollups(
    jobs: Sequence[tuple[JobReport, dict[str, str], float | None]],
    waits_for: Mapping[Key, Sequence[str]] | None = None,
) -> list[GridRollup]:
    """Roll SFT jobs (report, labels, sec_per_step) up into grids with a running/pending cell;
    ``waits_for``: the job ids each (cluster, job id) waits on (its restart chain)."""
    groups: dict[str, list[tuple[JobReport, float | None, str]]] = defaultdict(list)
    pairs = [(report, labels) for report, labels, _ in jobs]
    names = grid_names(pairs, waits_for)
    cells = _cells(pairs, waits_for)
    for (report, labels, rate), name, cell in zip(jobs, names, cells, strict=True):
        if name is not None and cell is not None:
            groups[name].extend((report, rate, one) for one in _array_cells(cell, report, labels))
    rollups = []
    for name, members in sorted(groups.items()):
        if len({cell for _, _, cell in members}) >= 2:
            rollup = _rollup(name, members)
            if rollup.running or rollup.pending_unique:
                rollups.append(rollup)
    return rollups


_SPEC_PART = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+)(?::(?P<step>\d+))?)?$")
_SPEC_MAX = 100_000
"""More tasks than this in one pending spec are not spelled out (SLURM's MaxArraySize is far
below it by default)."""


def _array_cells(cell: str, report: JobReport, labels: Mapping[str, str]) -> tuple[str, ...]:
    """The grid cells one SFT job stands for. A task of an array run in waves (any throttle
    but 1: a cell per ``SLURM_ARRAY_TASK_ID``) is its own cell, ``cell [task N]``, and the
    array's pending remainder every task its spec names; in an array that runs one task at a
    time (``%1``, a restart chain by array: ``report.chain``) every task is the one cell."""
    if labels.get("array_throttle") == "1":
        return (cell,)
    _, sep, task = report.job_id.partition("_")
    if sep and task.isdigit():
        return (f"{cell} [task {task}]",)
    spec = labels.get("array_tasks")
    tasks = _spec_tasks(spec) if spec and not sep else None
    return tuple(f"{cell} [task {t}]" for t in tasks) if tasks else (cell,)


def _spec_tasks(spec: str) -> list[int] | None:
    """The task ids of a SLURM array spec (``2-5%2``, ``1,3,5-9:2``); None if unreadable."""
    tasks: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        found = _SPEC_PART.match(part.strip())
        if found is None:
            return None
        lo = int(found["lo"])
        hi = int(found["hi"]) if found["hi"] else lo
        step = int(found["step"]) if found["step"] else 1
        if hi < lo or step < 1 or len(tasks) + (hi - lo) // step >= _SPEC_MAX:
            return None
        tasks.extend(range(lo, hi + 1, step))
    return tasks


def _rollup(name: str, members: Sequence[tuple[JobReport, float | None, str]]) -> GridRollup:
    """Tally distinct cells (``report.grid_cells``): resume/chain copies of one cell count
    once, and a pending copy of a running cell is its resume backup, not a pending cell.

    A grid spanning clusters keys its cells ``cluster/cell``, as its table rows name them:
    same-named cells on two clusters are two runs (a restart chain is afterany on one cluster
    and cannot cross to another), so the tally counts the rows it lists and a name in the
    title says which cluster's cell."""
    spread = len({r.cluster for r, _, _ in members}) > 1
    members = [(r, rate, f"{r.cluster}/{cell}" if spread else cell) for r, rate, cell in members]
    running = [(r, rate, cell) for r, rate, cell in members if r.state is JobState.RUNNING]
    running_cells = {cell for r, _, cell in members if r.state is JobState.RUNNING}
    pending = {cell for r, _, cell in members if r.state is JobState.PENDING}
    pending -= running_cells
    completed = [(r, cell) for r, _, cell in members if r.state is JobState.COMPLETED]
    # A COMPLETED cell whose completion check stops short of its total (incomplete-run), or
    # that stopped itself at its time budget (report.planned_stop: a chain restart, or
    # diagnose with no successor), did not finish: it is named apart, never tallied as done,
    # unless another copy finished it.
    done = {cell for r, cell in completed if not _stopped_short(r)}
    done -= running_cells | pending
    short = {cell for r, cell in completed if _stopped_short(r)}
    short -= running_cells | pending | done
    cells = [_cell(r, rate, _shown(r, cell, spread))
             for r, rate, cell in sorted(running, key=lambda m: (m[0].name, m[0].cluster))]
    timed = [c for c in cells if c.eta_s is not None]
    # The long pole is the cell that finishes last (remaining steps x its own trailing rate),
    # not the one with the most steps left: a big cell at 30 s/step outlasts a small one at 2.
    slowest = max(timed, key=lambda c: c.eta_s or 0.0) if timed else None
    pole = (f"{slowest.cluster}/{slowest.cell}" if spread else slowest.cell) if slowest else None
    # ... but a pending cell at a larger scale than every running one has not started: it
    # finishes after them all (seed: "the largest cells gate completion").
    def scale(key: str) -> float:  # a key's cluster prefix is no part of the cell's name
        return model_scale(key.split("/", 1)[1] if spread else key) or 0.0

    waiting = sorted(pending, key=lambda n: (-scale(n), n))
    running_scale = max((model_scale(c.cell) or 0.0 for c in cells), default=0.0)
    if waiting and scale(waiting[0]) > running_scale:
        pole = f"{waiting[0]} (pending)"
    return GridRollup(
        grid=name, running=len(running_cells), pending_unique=len(pending), done=len(done),
        short=tuple(sorted(short)), cells=cells, long_pole=pole,
    )


def _stopped_short(report: JobReport) -> bool:
    """A COMPLETED cell that did not finish: ``incomplete-run``, a planned stop's restart, or
    one sent to ``diagnose`` instead of its cleanup."""
    chosen = report.recommendation
    return ("incomplete-run" in report.flags or "chain-restart" in report.flags
            or (chosen is not None and chosen.action == "diagnose"))


_SCALE_UNITS = {"m": 1e-3, "b": 1.0, "t": 1e3}
_SCALE_VALUE = re.compile(r"(?:[a-z]+)?(?:(\d+)x)?(\d+(?:\.\d+)?)([bmt])")
"""A scale token, alone or glued to a model name, with its value: ``72b``, ``8x7b``, ``qwen7b``
(no ``k``: ``8k``, ``32k`` are sequence lengths)."""


def model_scale(name: str) -> float | None:
    """The model scale a cell's name gives, in billions (``72b`` 72, ``350m`` 0.35, ``8x7b``
    56, ``qwen7b`` 7), the first scale token after the first; None without one:
    ``sft-8k-q72b`` is 72."""
    for token in re.split(r"[-_]", name.lower())[1:]:
        found = _SCALE_VALUE.fullmatch(token)
        if found:
            experts = int(found.group(1)) if found.group(1) else 1
            return experts * float(found.group(2)) * _SCALE_UNITS[found.group(3)]
    return None


def _shown(report: JobReport, key: str, spread: bool) -> str:
    """The cell a running job stands for, as its row names it: its tally key (lower case; a
    restart copy's suffix stripped, ``report.grid_cells``) without the cluster prefix a
    spread grid adds, in the case the job's name has it (``sft-g9-1B-lr3e5`` for the running
    ``sft-g9-1B-lr3e5-resume``)."""
    cell = key.split("/", 1)[1] if spread else key
    name = report.name.strip()
    stem, _, task = cell.partition(" [task ")
    if name.lower().startswith(stem):
        stem = name[: len(stem)]
    return f"{stem} [task {task}" if task else stem


def _cell(report: JobReport, rate: float | None, cell: str) -> GridCell:
    pct = eta = None
    if report.step is not None and report.total_steps:
        pct = round(100.0 * report.step / report.total_steps, 1)
        if rate:
            eta = max(0, report.total_steps - report.step) * rate
    return GridCell(cell=cell, job_id=report.job_id, cluster=report.cluster,
                    progress_pct=pct, eta_s=eta)
