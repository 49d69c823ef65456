"""A SLURM sweep cut short by its deadline: read in part, never the whole cluster unreachable.

Policy: the collector streams one line per job and each job's log is parsed as its line
arrives (``probes.slurm.early``), so when the sweep's ``timeout_s`` passes (one user's
pathological logs taking the CPU, a slow file system) most of the cluster has been read. A
cluster that answered is not unreachable: its jobs already parsed are reported as read,
squeue's document (when it arrived) still lists every job, and each job whose log was not
parsed in time is ``fetch-failed`` with the reason naming the deadline (state unknown, never
"dead"). The cluster is ``ok`` with a detail saying what it could not read, as any cluster
read in part (``report.render.read_in_part``). With no squeue document yet there is nothing
to list: the cluster is unreachable, as before. Jobs known only to sacct, or whose log path
needed scontrol, are those a whole sweep adds after the document: a cut sweep lists squeue's.

No log is parsed here: a job gets the fold its line already had, or a ``failed`` log entry
(cheap to assemble), or, pending, no log at all, as in a whole sweep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.slurm.early import EarlyFolds, Fold

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState

Folded = dict[str, tuple[JobFacts, "LogState | None"]]


def deadline_reason(timeout_s: float) -> str:
    """Why a job's log was not read: the sweep's deadline (the cluster's ``timeout_s``)."""
    return f"not read within the {timeout_s:g}s sweep deadline (timeout_s)"


def unread_entry(record: SchedulerRecord, reason: str) -> dict[str, Any]:
    """The collector's entry for a job whose log was not read: ``failed``, with the reason."""
    return {"log": {"requested": record.stdout_path, "path": None, "status": "failed",
                    "error": reason, "attempts": 1}}


def read_in_part(records: Sequence[SchedulerRecord], *, early: EarlyFolds | None,
                 done: Mapping[str, tuple[JobFacts, LogState | None]],
                 collected: Mapping[str, Any] | None, fold: Fold, stateful: bool,
                 timeout_s: float,
                 ) -> tuple[tuple[JobFacts, ...], dict[str, LogState], int]:
    """Every record's facts as far as the sweep got: folded after the answer (``done``),
    else folded on arrival (``early``, for this record and its entry), else pending (no log)
    or unread (``fetch-failed``, the deadline named); the states of the folded jobs when
    ``stateful``; and how many started jobs went unread."""
    jobs: list[JobFacts] = []
    states: dict[str, LogState] = {}
    unread = 0
    reason = deadline_reason(timeout_s)
    for r in records:
        got = done.get(r.job_id)
        if got is None and early is not None:
            entry = collected.get(r.job_id) if collected is not None else None
            got = early.take(r, entry) if entry is not None else early.folded_as(r)
        read = got is not None
        if got is None:
            if r.state is not JobState.PENDING:
                unread += 1
            got = fold(r, None if r.state is JobState.PENDING else unread_entry(r, reason))
        facts, state = got
        jobs.append(facts)
        if stateful and read and state is not None:  # an unread job keeps its stored state
            states[r.job_id] = state
    return tuple(jobs), states, unread


def part_detail(unread: int, started: int, timeout_s: float) -> str:
    """The cluster's detail: what the sweep could not read before its deadline."""
    return (f"read in part: {unread} of {started} jobs' logs not read within the "
            f"{timeout_s:g}s sweep deadline (timeout_s)")


async def facts_in_part(records: Sequence[SchedulerRecord], *, early: EarlyFolds | None,
                        done: Folded, collected: Mapping[str, Any] | None, fold: Fold,
                        stateful: bool, timeout_s: float,
                        ) -> tuple[tuple[JobFacts, ...], dict[str, LogState], str]:
    """:func:`read_in_part` in a worker thread (the unread jobs' facts are assembled there,
    beside the fold still under way), with the cluster's detail."""
    jobs, states, unread = await asyncio.to_thread(
        read_in_part, records, early=early, done=dict(done), collected=collected, fold=fold,
        stateful=stateful, timeout_s=timeout_s)
    started = sum(1 for r in records if r.state is not JobState.PENDING)
    return jobs, states, part_detail(unread, started, timeout_s)
