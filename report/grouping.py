"""Array jobs and grid cells grouped into one table row each (issue 13: "arrays and grids").

Policy: pure, models in and models out. An array job's tasks (``A_T`` ids, plus the pending
record SLURM keeps under the array's own id ``A`` until it splits tasks off) are one *group*;
so are the pending / buffering cells of an SFT grid (the judge's :func:`grid_names`, for grids
the judge rolled up), and a datagen run's chunks submitted as separate jobs
(``datagen-swe-v2-chunk-0`` ... ``-chunk-3``, one user's). Grouping happens per table: members
in the Filling-buffer table group apart from members in their bucket's table, so each table
shows at most one row per group.

A group's row is its *worst* member's row (verdict order below): the member's judgement and
trend, with that member's id leading the trend, and the Job cell ``name [480 running · 20
pending]`` counting every member by state. Members a human must look at (collapsed, failed,
stalled, and warning: a grad-norm spike or a fault in a live log is the seed's "reads healthy
while it is not", and a second one would hide behind the group row) keep their own rows as
well, named with their task (``name [task 3]``); a summary counts each of them once
(``for_counts``: no group row when every member has its own). A group of one is no group, and a
grid folds only from :data:`GRID_MIN` cells. ``--format json`` keeps every job listed and adds
the groups under a top-level ``groups`` key (:func:`groups_json`).

Pending array tasks SLURM has not split off yet are one record; how many tasks it stands for
comes from ``pending_tasks`` (the probe's ``array_tasks`` label, see
:func:`pending_task_counts`). Without it (a cached sweep) that record counts as one task and
the count is written ``≥N``.

An eval array whose tasks ran different evals (a benchmark per task: the judge's model ×
benchmark names differ) is no group: the Eval table's rows are model × benchmark, and one row
carrying the worst task would hide the others' pass rates. Tasks without such a name (pending,
no tree read yet) still group; shards of one eval (one name) group as any array.

Which group each job belongs to (its ``(kind, key)``) is :mod:`report.group_keys`; this module
builds the groups from those keys and the rows and JSON that show them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probes.models import ClusterFacts, JobState
from report.grid_cells import cell_stems
from report.group_keys import _ARRAY_TASK, Key, _array_keys, _chunk_keys, _grid_keys
from report.layouts import is_buffering
from report.models import JobDetail, JobReport, Report

GRID_MIN = 3
"""Grid cells fold from three up: two named cells read better than one row counting two."""

ATTENTION = frozenset({"collapse", "failed", "stalled", "warning"})
"""Verdicts whose members keep their own row inside a group."""

# Worst first: the group row shows the first member found in this order.
_SEVERITY = ("collapse", "failed", "stalled", "warning", "unknown", "restarting", "healthy",
             "buffering", "done")
_STATE_ORDER = (JobState.RUNNING, JobState.PENDING, JobState.COMPLETING,
                *(s for s in JobState if s not in {JobState.RUNNING, JobState.PENDING,
                                                   JobState.COMPLETING}))
_RANGE = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+)(?::(?P<step>\d+))?)?$")


@dataclass(frozen=True)
class Group:
    """Members of one array (or grid) within one table."""

    kind: str
    """``array``, ``grid``, or ``chunks`` (a datagen run's chunks submitted as separate jobs)."""
    cluster: str
    key: str
    """The array id, the grid name, or the chunks' name stem."""
    name: str
    table: str
    """The layout the members sit in (``rl`` ... ``other``, or ``buffer``)."""
    members: tuple[JobReport, ...]
    counts: tuple[tuple[str, int], ...]
    """(state, number of tasks) in the contract's state order."""
    exact: bool
    """False when an unsplit pending record's task count was unknown."""
    pending_cells: int | None = None
    """A grid's pending jobs as distinct cells (``report.grid_cells``), its running cells'
    resume backups left out; None for arrays and chunks."""

    @property
    def worst(self) -> JobReport:
        return min(self.members, key=lambda j: (_severity(j), j.job_id))

    @property
    def worst_of_rest(self) -> JobReport:
        """The worst member that has no row of its own (for counts that must not double)."""
        rest = [j for j in self.members if j.verdict not in ATTENTION] or list(self.members)
        return min(rest, key=lambda j: (_severity(j), j.job_id))

    @property
    def attention(self) -> tuple[JobReport, ...]:
        return tuple(j for j in self.members if j.verdict in ATTENTION)

    def tally(self) -> str:
        """``480 running · 20 pending`` (``≥20 pending`` when a count is a lower bound); a
        grid's pending jobs that are fewer cells say so: ``6 pending (1 cell)``."""
        bound = "" if self.exact else "≥"
        parts = []
        for state, n in self.counts:
            pending = state == JobState.PENDING.value
            part = f"{bound if pending else ''}{n} {state.lower()}"
            cells = self.pending_cells
            if pending and cells is not None and cells != n:
                part += f" ({cells} cell{'' if cells == 1 else 's'})"
            parts.append(part)
        return " · ".join(parts)


def _severity(job: JobReport) -> int:
    return verdict_rank(job.verdict)


def verdict_rank(verdict: str) -> int:
    """``verdict``'s place in the worst-first order a group row picks its member by."""
    return _SEVERITY.index(verdict) if verdict in _SEVERITY else len(_SEVERITY)


def task_count(spec: str) -> int | None:
    """Tasks in a SLURM array spec such as ``0-499``, ``1,3,5-9:2%4``; None if unreadable."""
    total = 0
    for part in spec.split("%", 1)[0].split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            return None
        lo = int(match["lo"])
        hi = int(match["hi"]) if match["hi"] else lo
        step = int(match["step"]) if match["step"] else 1
        if hi < lo or step < 1:
            return None
        total += (hi - lo) // step + 1
    return total


def pending_task_counts(facts: Iterable[ClusterFacts]) -> dict[Key, int]:
    """Unsplit pending array records -> how many tasks each stands for (probe label)."""
    counts: dict[Key, int] = {}
    for cluster in facts:
        for job in cluster.jobs:
            spec = job.record.labels.get("array_tasks")
            n = task_count(spec) if spec else None
            if n is not None:
                counts[(cluster.name, job.record.job_id)] = n
    return counts


def _table(job: JobReport) -> str:
    return "buffer" if is_buffering(job) else job.bucket


def eval_labels(details: Mapping[Key, JobDetail]) -> dict[Key, str]:
    """Each eval whose judge named its model × benchmark (``report.eval_label``): its name."""
    return {key: d.display_name for key, d in details.items()
            if d.report.bucket == "eval" and d.display_name
            and not d.display_name.endswith(d.report.name)}


def _distinct_evals(members: list[JobReport], evals: Mapping[Key, str]) -> list[JobReport]:
    """An eval array's members left to group: the unnamed ones when its tasks name more than
    one model × benchmark (each named task is its own eval, its own row), else all."""
    named = {evals[(j.cluster, j.job_id)] for j in members if (j.cluster, j.job_id) in evals}
    if len(named) < 2:
        return members
    return [j for j in members if (j.cluster, j.job_id) not in evals]


def find_groups(report: Report, *, pending_tasks: Mapping[Key, int] | None = None,
                evals: Mapping[Key, str] | None = None) -> list[Group]:
    """Every group of two or more members, per table, in first-seen order (``evals``: the
    judge's model × benchmark names, :func:`eval_labels`)."""
    keys = _array_keys(report.jobs, pending_tasks or {})
    keys.update(_grid_keys(report, keys))
    keys.update(_chunk_keys(report.jobs, keys))
    buckets: dict[tuple[str, str, str, str], list[JobReport]] = defaultdict(list)
    for job in report.jobs:
        found = keys.get((job.cluster, job.job_id))
        if found is not None:
            buckets[(found[0], job.cluster, found[1], _table(job))].append(job)
    groups = []
    for (kind, cluster, key, table), listed in buckets.items():
        members = _distinct_evals(listed, evals or {}) if (kind, table) == ("array", "eval") \
            else listed
        if not members:
            continue
        unsplit = key if kind == "array" else None
        counted, exact = _counts(members, pending_tasks or {}, unsplit)
        if sum(n for _, n in counted) < 2 and len(members) < 2:
            continue
        if kind == "grid" and len(members) < GRID_MIN:
            continue
        name = members[0].name if kind == "array" else key
        cells = _pending_cells(report, cluster, members) if kind == "grid" else None
        groups.append(Group(kind, cluster, key, name, table, tuple(members), counted, exact,
                            cells))
    return groups


def _pending_cells(report: Report, cluster: str, members: Sequence[JobReport]) -> int:
    """Distinct cells among a grid group's pending members, less the cells running on their
    cluster (a running cell's pending copy is its resume backup: seed §SFT)."""
    sft = [job for job in report.jobs if job.bucket == "sft"]
    cell = {(job.cluster, job.job_id): stem for job, stem in zip(sft, cell_stems(sft),
                                                                  strict=True)}
    running = {cell[(j.cluster, j.job_id)] for j in sft
               if j.cluster == cluster and j.state is JobState.RUNNING}
    pending = {cell[(j.cluster, j.job_id)] for j in members
               if j.state is JobState.PENDING and (j.cluster, j.job_id) in cell}
    return len(pending - running)


def _counts(members: Sequence[JobReport], pending_tasks: Mapping[Key, int],
            unsplit: str | None) -> tuple[tuple[tuple[str, int], ...], bool]:
    tally: Counter[str] = Counter()
    exact = True
    for job in members:
        remainder = job.job_id == unsplit and job.state is JobState.PENDING
        n = pending_tasks.get((job.cluster, job.job_id)) if remainder else 1
        if n is None:
            n, exact = 1, False
        tally[job.state.value] += n
    ordered = tuple((s.value, tally[s.value]) for s in _STATE_ORDER if tally[s.value])
    return ordered, exact


def _group_row(group: Group, detail: JobDetail | None, multi_cluster: bool,
               worst: JobReport,
               details: Mapping[Key, JobDetail]) -> tuple[JobReport, JobDetail]:
    # A grid is named by the grid, never by one cell; an array task by the judge's name.
    own = detail.display_name if detail and group.kind == "array" else None
    base = own or (f"{group.cluster}/{group.name}" if multi_cluster else group.name)
    trend = f"{worst.job_id}: {worst.trend or (detail.note if detail else '') or '—'}"
    # The row's id is the group's own (``A_*<table>``), so its detail never shadows the worst
    # member's own row (the renderer finds details by cluster and id); the worst member's
    # real id leads the trend.
    update: dict[str, Any] = {"trend": trend, "job_id": f"{group.key}_*{group.table}"}
    cells = _own_dir_chunks(group, details)
    if cells is not None:
        update["metrics"] = {**worst.metrics, **cells}
    row = worst.model_copy(update=update)
    shown = detail or JobDetail(report=row)
    return row, shown.model_copy(update={"report": row,
                                         "display_name": f"{base} [{group.tally()}]"})


def _own_dir_chunks(group: Group,
                    details: Mapping[Key, JobDetail]) -> dict[str, float] | None:
    """A datagen run whose members (chunks submitted as separate jobs, or an array's tasks)
    each wrote Harbor job dirs of their own: the run's Chunks are all of the members' (a
    member with no tree yet, such as an unsplit pending remainder, counts its tasks as one
    chunk each), done as each one's dirs are, and its Trials every member's (rulebook: the
    run's result.json count; per-trial shares weighted by trials). ``None`` for other groups,
    or members reading one shared tree (each already counts the run's). Whose tree is whose
    comes from the members' trial roots; without them (an older cached detail) only members
    of one chunk each are taken as their own."""
    if group.kind not in ("chunks", "array") or group.table != "datagen":
        return None
    totals = [m.metrics.get("chunks_total") for m in group.members]
    if all(t is None for t in totals):
        return None
    roots = [details[(m.cluster, m.job_id)].trial_root if (m.cluster, m.job_id) in details
             else None for m in group.members]
    counted = [r for r, t in zip(roots, totals, strict=True) if t is not None]
    if None in counted:
        if any(t is not None and t != 1.0 for t in totals):
            return None  # roots unknown: only a chunk a member is taken as its own
    elif len(set(counted)) < len(counted):
        return None  # members reading one shared tree: each counts the run's already
    trees = [m for m in group.members if isinstance(m.metrics.get("chunks_total"), float)]
    # Each member with a tree is one task; the group's other tasks have written none yet.
    untold = sum(n for _, n in group.counts) - len(trees)
    done = sum(float(m.metrics.get("chunks_done") or 0.0) for m in trees)
    total = sum(float(m.metrics["chunks_total"]) for m in trees) + max(0, untold)
    return {"chunks_done": done, "chunks_total": total, **_run_trials(group.members)}


def _run_trials(members: Sequence[JobReport]) -> dict[str, float]:
    """The members' trials summed, and avg_turns, exc% and Mean over them weighted by each
    member's trials; a metric no member has stays out (never invented)."""
    counted = [(m.metrics, n) for m in members
               if isinstance(n := m.metrics.get("trials"), float | int) and n > 0]
    if not counted:
        return {}
    out = {"trials": float(sum(n for _, n in counted))}
    for name in ("avg_turns", "exc_pct", "mean_reward"):
        pairs = [(value, n) for metrics, n in counted
                 if isinstance(value := metrics.get(name), float | int)]
        weight = sum(n for _, n in pairs)
        if weight:
            out[name] = sum(value * n for value, n in pairs) / weight
    return out


def _task_detail(job: JobReport, detail: JobDetail | None, multi_cluster: bool) -> JobDetail:
    """An array task kept in its own row beside its group's: named with its task
    (``rl-sweep [task 3]``), or two collapsing tasks read as the same row twice."""
    match = _ARRAY_TASK.match(job.job_id)
    base = (detail.display_name if detail and detail.display_name else
            f"{job.cluster}/{job.name}" if multi_cluster else job.name)
    name = f"{base} [task {match['task']}]" if match else base
    return (detail or JobDetail(report=job)).model_copy(update={"display_name": name})


def group_report(
    report: Report, details: Mapping[Key, JobDetail], *,
    pending_tasks: Mapping[Key, int] | None = None, for_counts: bool = False,
) -> tuple[Report, dict[Key, JobDetail]]:
    """The report as tables show it: one row per group (at its first member's place), plus
    the group's attention members; every other job unchanged. ``for_counts``: the group row
    takes the worst member *without* a row of its own, so a summary counts each job once."""
    groups = find_groups(report, pending_tasks=pending_tasks, evals=eval_labels(details))
    if not groups:
        return report, dict(details)
    multi_cluster = len({j.cluster for j in report.jobs}) > 1
    member_of = {(j.cluster, j.job_id): g for g in groups for j in g.members}
    placed: set[int] = set()
    jobs: list[JobReport] = []
    shown: dict[Key, JobDetail] = {}
    for job in report.jobs:
        key = (job.cluster, job.job_id)
        group = member_of.get(key)
        if group is None or job.verdict in ATTENTION:
            jobs.append(job)
            if group is not None and len(group.members) == 1:
                # An unsplit array alone: its own row, named with the tasks it stands for
                # (a group row beside it would repeat it).
                placed.add(id(group))
                row, detail = _group_row(group, details.get(key), multi_cluster, job, details)
                shown[key] = detail.model_copy(update={"report": job})
            elif group is not None and group.kind == "array":
                shown[key] = _task_detail(job, details.get(key), multi_cluster)
            elif key in details:
                shown[key] = details[key]
        if group is not None and id(group) not in placed:
            placed.add(id(group))
            if for_counts and len(group.attention) == len(group.members):
                continue  # every member has its own row: the group row would count one twice
            worst = group.worst_of_rest if for_counts else group.worst
            row, detail = _group_row(group, details.get((worst.cluster, worst.job_id)),
                                     multi_cluster, worst, details)
            jobs.append(row)
            shown[(row.cluster, row.job_id)] = detail
    return report.model_copy(update={"jobs": jobs}), shown


def groups_json(report: Report, *, pending_tasks: Mapping[Key, int] | None = None,
                details: Mapping[Key, JobDetail] | None = None) -> list[dict[str, Any]]:
    """The ``groups`` key of ``--format json``: each group, its tally, worst member, members
    (``details``: the judge's, for the eval names that keep an eval array's tasks apart)."""
    return [{
        "kind": g.kind, "cluster": g.cluster, "key": g.key, "name": g.name, "table": g.table,
        "label": f"{g.name} [{g.tally()}]",
        "counts": {state: n for state, n in g.counts}, "counts_exact": g.exact,
        **({"pending_cells": g.pending_cells} if g.kind == "grid" else {}),
        "worst": {"job_id": g.worst.job_id, "verdict": g.worst.verdict},
        "attention": [j.job_id for j in g.attention],
        "members": [j.job_id for j in g.members],
    } for g in find_groups(report, pending_tasks=pending_tasks,
                           evals=eval_labels(details or {}))]
