"""Sweep memory: what one sweep leaves for the next, and when a failure is recurring.

Policy (seed: "Recurring identical failures are not transient"; "a recurring death at a fixed
interval is NOT transient"):

- Attempts of one run share a *memory key* ``cluster:name stem`` (restart suffixes stripped,
  :func:`report.chain.name_stem`).
- A failed attempt (verdict ``failed`` in a failed scheduler state, TIMEOUT included) leaves a
  :class:`~report.models.FailureSignature`: the first fault's kind (else ``exit<code>``), its
  text with ids, numbers, hex and paths normalised away, and the elapsed time.
- Two signatures are the same failure when kind and text agree; for SIGTERM the elapsed times
  must also agree within :data:`SAME_INTERVAL` (a fixed-interval death, not a one-off kill).
- An attempt is *recurring* when it fails the same way as the run's latest earlier attempt
  (:func:`repeated_failure`). The judge's ``recurring-failure`` flag and the bot's incident
  files both follow this one decision; nothing else compares failures.
- Memory keeps chain edges (SLURM forgets fulfilled dependencies), the last
  :data:`MEMORY_SIGNATURES_KEPT` signatures per run and the RL run fingerprints seen healthy.
  An unreachable cluster's edges are kept as they were: its chains are unknown, not gone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from probes.models import ClusterFacts, JobFacts, JobState, SchedulerRecord
from report.chain import array_throttle, dependency_edges, name_stem, submit_order, success_edges
from report.failure_text import failing_line, first_fault
from report.judge_rl import run_fingerprint
from report.models import FailureSignature, JobDetail, Report

SAME_INTERVAL = 0.10
"""Two SIGTERM deaths whose elapsed times differ by at most this fraction: a fixed interval."""
MEMORY_SIGNATURES_KEPT = 20
MEMORY_CONFIGS_KEPT = 2000

_FAILED_ATTEMPT = frozenset({
    JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.PREEMPTED,
    JobState.TIMEOUT,
})
_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+|/\S+", re.IGNORECASE)
_TEXT_MAX = 80


class SweepMemory(BaseModel):
    """What the bot keeps in Redis between sweeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    known_edges: dict[str, dict[str, str]] = {}
    """cluster -> {predecessor id: successor id} (SLURM forgets fulfilled dependencies)."""
    known_ok_edges: dict[str, dict[str, str]] = {}
    """cluster -> the same for ``afterok``/``aftercorr`` dependants: a planned stop's restart
    (its exit 0 satisfies them), never a TIMEOUT's (``report.chain.success_edges``)."""
    failure_signatures: dict[str, list[FailureSignature]] = {}
    """``cluster:name stem`` -> signatures of earlier failed attempts, oldest first."""
    seen_configs: dict[str, list[str]] = {}
    """cluster -> run fingerprints already seen healthy (no deep-probe needed), and those the
    bot found running when it first read the cluster (its baseline: ``next_memory``)."""

    @field_validator("failure_signatures", mode="before")
    @classmethod
    def _read_legacy(cls, value: Any) -> Any:
        # Memory written before signatures were a model held ``job|kind|text|elapsed`` strings;
        # read them so an upgrade keeps recognising the failures it had already seen.
        if not isinstance(value, Mapping):
            return value
        return {run: [_legacy(s) if isinstance(s, str) else s for s in signatures]
                for run, signatures in value.items()}


def _legacy(text: str) -> FailureSignature | str:
    parts = text.split("|", 3)
    if len(parts) != 4:
        return text  # not a signature: let validation say so
    job_id, kind, norm, elapsed = parts
    return FailureSignature(job_id=job_id, kind=kind, text=norm,
                            elapsed_s=int(elapsed) if elapsed.isdigit() else None)


def memory_key(record: SchedulerRecord) -> str:
    """``cluster:name stem``: attempts of one run share it across restarts."""
    return f"{record.cluster}:{name_stem(record.name)}"


def failure_signature(
    facts: JobFacts, verdict: str, *, failed_on: Callable[[], str | None] | None = None,
) -> FailureSignature | None:
    """The signature of a failed attempt, else None (running, done, restarting jobs).

    ``failed_on``: the job's failing line as the judge already holds it
    (``JudgeContext.failed_on``), else it is searched here."""
    record = facts.record
    if verdict != "failed" or record.state not in _FAILED_ATTEMPT:
        return None
    fault = first_fault(facts)
    kind = fault.kind if fault else f"exit{record.exit_code}"
    # With no fault, a FAILED job's failing line tells two exits with one code apart (a
    # missing module, then a failing test): only identical failures recur. Only FAILED: a
    # TIMEOUT, OOM, node failure or preemption is its state, whatever error line its log
    # ends on (searching them cost every such job a scan of its tail's end, and made two
    # identical walltime deaths differ by a stray line).
    line = None
    if fault is None and record.state is JobState.FAILED:
        line = failed_on() if failed_on is not None else failing_line(facts)
    text = (fault.detail or fault.excerpt) if fault else (line or record.state.value)
    return FailureSignature(
        job_id=record.job_id, kind=kind,
        text=_VOLATILE.sub("#", text.lower()).replace("|", "/")[:_TEXT_MAX],
        elapsed_s=record.elapsed_s or None,
        start_time=record.start_time, end_time=record.end_time,
        array_throttle=array_throttle(record) if record.array_task_id is not None else None,
    )


def same_failure(current: FailureSignature, previous: FailureSignature) -> bool:
    """Two attempts died the same way (SIGTERM: also after the same elapsed time)."""
    if (current.kind, current.text) != (previous.kind, previous.text):
        return False
    if current.kind != "sigterm":
        return True
    a, b = current.elapsed_s, previous.elapsed_s
    if not a or not b:
        return False
    return abs(a - b) <= SAME_INTERVAL * max(a, b)


def repeated_failure(
    current: FailureSignature, earlier: Sequence[FailureSignature],
) -> FailureSignature | None:
    """The latest earlier attempt (not this job, nor a task of its own array or a component
    of its own hetjob that ran beside it, no attempt before it) if ``current`` failed exactly
    like it. A task of its own array that ended before it started is one in an array that
    runs one task at a time (``--array=0-9%1``, each resuming the last); in one run in waves
    (``%10``, or unthrottled) the next task is a cell of its own, no attempt."""
    own = _parent_id(current.job_id)
    chained = current.array_throttle == 1
    others = [s for s in earlier
              if s.job_id != current.job_id
              and (own is None or _parent_id(s.job_id) != own
                   or (chained and _ran_before(s, current)))]
    if others and same_failure(current, others[-1]):
        return others[-1]
    return None


def _ran_before(previous: FailureSignature, current: FailureSignature) -> bool:
    """``previous`` ended before ``current`` started (False when either time is unknown)."""
    return (previous.end_time is not None and current.start_time is not None
            and previous.end_time <= current.start_time)


def _parent_id(job_id: str) -> str | None:
    """The array's or hetjob's own id of a task ``123_4`` / component ``123+1``, else None."""
    base, sep, _ = job_id.replace("+", "_").partition("_")
    return base if sep else None


def earlier_attempts(
    failed: Sequence[tuple[SchedulerRecord, FailureSignature]],
) -> dict[tuple[str, str], list[FailureSignature]]:
    """(cluster, job id) -> signatures of the same run's attempts submitted before it, oldest
    first, among ``failed`` (one sweep's failed attempts with their signatures): the sweep
    itself shows consecutive attempts when no memory of earlier sweeps exists."""
    runs: dict[str, list[tuple[SchedulerRecord, FailureSignature]]] = defaultdict(list)
    for record, signature in failed:
        runs[memory_key(record)].append((record, signature))
    earlier: dict[tuple[str, str], list[FailureSignature]] = {}
    for attempts in runs.values():
        attempts.sort(key=lambda attempt: submit_order(attempt[0]))
        for index, (record, _) in enumerate(attempts[1:], start=1):
            earlier[(record.cluster, record.job_id)] = [s for _, s in attempts[:index]]
    return earlier


def with_earlier(
    memory: SweepMemory | None, record: SchedulerRecord, before: Sequence[FailureSignature],
) -> SweepMemory:
    """``memory`` with this sweep's earlier attempts ``before`` appended to the run's list."""
    base = memory or SweepMemory()
    run = memory_key(record)
    seen = {s.job_id for s in before} | {record.job_id}
    signatures = [s for s in base.failure_signatures.get(run, []) if s.job_id not in seen]
    return base.model_copy(
        update={"failure_signatures": {**base.failure_signatures, run: [*signatures, *before]}})


def next_memory(
    report: Report,
    details: Mapping[tuple[str, str], JobDetail],
    clusters: Sequence[ClusterFacts],
    previous: SweepMemory | None,
) -> SweepMemory:
    """What to remember for the next sweep: chain edges, failure signatures, healthy configs.

    A job's signature is the one its :class:`JobDetail` carries (the one its incident file
    gets), so memory and incidents never disagree about a failure.
    """
    prev = previous or SweepMemory()
    signatures = {key: list(v) for key, v in prev.failure_signatures.items()}
    seen = {name: list(v) for name, v in prev.seen_configs.items()}
    # A cluster with no setting remembered yet (a fresh store, a cluster just added) was judged
    # without memory (report.judge_rl), as `jobtables sweep` judges it: its RL runs that read
    # no new run then are the baseline, remembered as seen, so the next sweep does not call
    # each of them new (a run seen flagged is left to be seen healthy, as before).
    unremembered = {job.cluster for job in report.jobs} - set(prev.seen_configs)
    facts_by_key = {(c.name, j.record.job_id): j for c in clusters for j in c.jobs}
    for job in report.jobs:
        facts = facts_by_key.get((job.cluster, job.job_id))
        if facts is None:
            continue
        detail = details.get((job.cluster, job.job_id))
        signature = detail.failure if detail is not None else failure_signature(facts, job.verdict)
        if signature is not None:
            known = signatures.setdefault(memory_key(facts.record), [])
            if not any(s.job_id == job.job_id for s in known):
                known.append(signature)
                del known[:-MEMORY_SIGNATURES_KEPT]
        baseline = job.cluster in unremembered and "deep-probe" not in job.flags
        if job.bucket == "rl" and (baseline or (
                job.verdict in ("healthy", "done") and job.step is not None)):
            fingerprint = run_fingerprint(facts)  # what it runs, not its name
            configs = seen.setdefault(job.cluster, [])
            if fingerprint not in configs:
                configs.append(fingerprint)
                del configs[:-MEMORY_CONFIGS_KEPT]
    edges = _next_edges(prev.known_edges, clusters, dependency_edges)
    ok_edges = _next_edges(prev.known_ok_edges, clusters, success_edges)
    return SweepMemory(known_edges={k: v for k, v in edges.items() if v},
                       known_ok_edges={k: v for k, v in ok_edges.items() if v},
                       failure_signatures=signatures, seen_configs=seen)


def _next_edges(
    previous: Mapping[str, Mapping[str, str]],
    clusters: Sequence[ClusterFacts],
    visible: Callable[[Sequence[SchedulerRecord]], dict[str, str]],
) -> dict[str, dict[str, str]]:
    edges = {name: dict(e) for name, e in previous.items()}
    for cluster in clusters:
        if cluster.status != "ok":
            continue  # an unreachable cluster's chains are unknown this sweep, not gone
        records = [j.record for j in cluster.jobs]
        ids = {r.job_id for r in records}
        kept = {p: s for p, s in edges.get(cluster.name, {}).items() if p in ids or s in ids}
        kept.update(visible(records))
        edges[cluster.name] = kept
    return edges
