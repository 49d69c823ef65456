"""Which jobs belong together: each array task's, SFT grid cell's and datagen chunk's group key.

Policy: pure, models in and keys out, for :mod:`report.grouping` (which builds the groups and
their rows from these keys). Each finder maps ``(cluster, job id)`` to ``(kind, group key)``:
an array task (``A_T``) and the pending record SLURM keeps under the array's own id ``A`` to the
array id; a pending or buffering SFT cell of a grid the judge rolled up to the grid's name; a
datagen run's chunks submitted as separate jobs to their name stem, only where one user owns
every chunk of that stem. A job another finder took (``taken``) is not keyed twice.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from probes.models import JobState
from report.judge_sft import grid_names
from report.layouts import is_buffering
from report.models import JobReport, Report

Key = tuple[str, str]
"""(cluster, job id)."""

_ARRAY_TASK = re.compile(r"^(?P<array>\d+)_(?P<task>\d+)$")


def _array_keys(jobs: Sequence[JobReport],
                unsplit: Mapping[Key, int]) -> dict[Key, tuple[str, str]]:
    """(cluster, job id) -> (kind, group key) for every array task and its pending record,
    which groups alone too (no task split off yet: squeue's ``335_[4-7]``), counted by
    ``unsplit`` (:func:`pending_task_counts`)."""
    arrays: dict[tuple[str, str], str] = {key: "" for key in unsplit}
    for job in jobs:
        match = _ARRAY_TASK.match(job.job_id)
        if match:
            arrays[(job.cluster, match["array"])] = job.name
    keys: dict[Key, tuple[str, str]] = {}
    for job in jobs:
        match = _ARRAY_TASK.match(job.job_id)
        if match:
            keys[(job.cluster, job.job_id)] = ("array", match["array"])
        elif arrays.get((job.cluster, job.job_id)) in (job.name, ""):
            keys[(job.cluster, job.job_id)] = ("array", job.job_id)  # the unsplit remainder
    return keys


def _grid_keys(report: Report, taken: Mapping[Key, Any]) -> dict[Key, tuple[str, str]]:
    """SFT grid cells that are pending or filling their buffer, for grids the judge rolled up."""
    grids = {g.grid for g in report.grid}
    keys: dict[Key, tuple[str, str]] = {}
    names = (grid_names([(job, {}) for job in report.jobs]) if grids
             else [None] * len(report.jobs))
    for job, grid in zip(report.jobs, names, strict=True):
        if (job.cluster, job.job_id) in taken or job.bucket != "sft":
            continue
        if (job.state is JobState.PENDING or is_buffering(job)) and grid in grids:
            keys[(job.cluster, job.job_id)] = ("grid", grid)
    return keys


_CHUNK_NAME = re.compile(r"^(?P<stem>.+?)[-_.](?:chunk|shard|part)[-_.]?\d+$", re.IGNORECASE)
"""A datagen run's chunk submitted as its own job: ``datagen-swe-v2-chunk-3``, ``…_shard07``."""


def _chunk_keys(jobs: Sequence[JobReport], taken: Mapping[Key, Any]) -> dict[Key, tuple[str, str]]:
    """Datagen chunks submitted as separate jobs (not an array): one run, one row (the seed's
    Datagen table counts a run's chunks in one cell). Grouped by name stem within a cluster,
    only where one user owns every chunk of that stem (two users' runs never merge)."""
    stems: dict[tuple[str, str], list[JobReport]] = defaultdict(list)
    for job in jobs:
        match = _CHUNK_NAME.match(job.name)
        if match and job.bucket == "datagen" and (job.cluster, job.job_id) not in taken:
            stems[(job.cluster, match["stem"])].append(job)
    keys: dict[Key, tuple[str, str]] = {}
    for (cluster, stem), members in stems.items():
        if len({j.user for j in members}) == 1:
            keys.update({(cluster, j.job_id): ("chunks", stem) for j in members})
    return keys
