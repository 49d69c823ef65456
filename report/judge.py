"""Judging one job, and a whole sweep, into the contract's report.

Policy: pure functions of (facts, settings, clock, sweep memory). The cross-cutting rules are
stated here (seed "Cross-cutting") and live in :mod:`report.job_rules`; bucket rules live in
``judge_rl``/``judge_sft``/``judge_datagen``/``judge_eval``; precedence between findings is
settled once in :mod:`report.findings`; the judged row and detail are assembled from them
in :mod:`report.job_detail`.

- Log status: ``mismatch`` -> ``log-path-mismatch`` (the real log was read); ``missing`` ->
  ``log-missing`` (not for PENDING jobs, which have no log yet); ``failed`` -> ``fetch-failed``
  and verdict ``unknown``: a failed fetch is indistinguishable from an idle job, so it never
  makes a job dead, stalled or buffering.
- Faults become flags (``time-limit`` is the TIMEOUT itself and adds none). On a terminal job the
  earliest fault is the diagnosis the trend quotes (for ``child-failed``, the first real
  traceback, ``Fault.detail``); on a live job a fault is a ``warning``, and a live job with no
  step yet whose log holds one is no bring-up: out of the buffer table, ``diagnose``.
- TIMEOUT with an ``afterany`` successor (:mod:`report.chain`): ``chain-restart``, verdict
  ``restarting``; an RL run that collapsed on its last steps goes on in that restart, which
  is the one its ``cancel_and_salvage`` names (:func:`report.judge_rl.chain_collapse_rule`).
  TIMEOUT without one (including one whose only dependant waits ``afterok`` or
  is ``DependencyNeverSatisfied``: the trend and recommendation say so): verdict ``failed`` and
  ``diagnose`` (datagen: ``stranded-traces`` -> consolidate instead).
  FAILED / OUT_OF_MEMORY / NODE_FAIL / PREEMPTED: ``failed`` + ``diagnose`` with a dated
  ``agent_logs/`` entry. CANCELLED: ``done`` (someone stopped it on purpose), a collapse on its
  last steps said as why, with its salvage to make sure of (``cancelled_rule``). COMPLETED:
  ``done`` and, in the four major buckets, a ``cleanup`` naming the matching routine, after
  the SFT completion check (:mod:`report.cleanup`: agentic RL by the run, not the disk); but a
  COMPLETED run whose trainer stopped itself ahead of its walltime (:mod:`report.planned_stop`)
  is a chain restart with its successor, else ``diagnose`` (resubmit), never cleanup.
- Kubernetes RUNNING with zero pods, a started job with 0 active pods and no pods, or a record
  that vanished (the probe's ``vanished`` reason and ``jobtables/silent-wedge`` label), is a
  silent wedge: terminal, verdict ``failed`` (judged after the bucket rules, so it also takes
  the job out of the buffer table). So is an empty log past the bucket's bring-up window no
  buffer filling (``report.rules.empty_log_rule``: ``stall``, or ``fetch-failed``).
- A container waiting on a real fault (``CrashLoopBackOff``, ``CreateContainerConfigError``,
  ...) never heals on its own: verdict ``failed`` + ``diagnose``, never ``buffer-filling``.
- Recurring failure: the same failure signature as the previous failed attempt of the same
  run in sweep memory, or earlier in the same sweep (the CLI sweep has no memory, yet shows
  every attempt that ended within ``recent_hours``); :mod:`report.memory` decides it, and the
  detail carries both signatures for the incident file.
- no-kill: a ``cancel_and_salvage`` recommendation stays, prefixed "RECOMMENDATION ONLY".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from probes.models import ClusterFacts, JobFacts, JobState, MetricPoint, SchedulerRecord
from report.buckets import bucket_for
from report.chain import HELD_REASONS, ChainIndex, ChainLink, chain_link, dependencies
from report.cleanup import cleanup_rule
from report.findings import Findings, JudgeContext, normalized_history, this_launch
from report.fingerprint import Attempts
from report.holds import as_ended, held_rule, queued_resume_rule, resumed_attempt, suspended_rule
from report.job_detail import _assemble
from report.job_rules import (
    bring_up_fault_rule,
    cancelled_rule,
    fault_rules,
    log_rules,
    never_starts_rule,
    no_kill_rule,
    recurring_rule,
    state_rules,
    unreadable_checkpoints_note,
)
from report.judge_datagen import fresh_run_trials, judge_datagen
from report.judge_eval import judge_eval, own_run_trials
from report.judge_other import judge_other
from report.judge_rl import chain_collapse_rule, judge_rl
from report.judge_sft import grid_rollups, judge_sft
from report.memory import SweepMemory, earlier_attempts, with_earlier
from report.models import (
    BUCKET_ORDER,
    Bucket,
    ClusterReport,
    FailureSignature,
    GridRollup,
    JobDetail,
    JobReport,
    Report,
)
from report.planned_stop import planned_stop, planned_stop_rule
from report.pods import (
    failed_rank_rule,
    image_pull_rule,
    live_oom_rule,
    recurring_pod_failure_rule,
    restarted_rule,
    restarting_rule,
    same_name_rule,
    sidecar_held_rule,
    silent_wedge_rule,
    waiting_fault_rule,
)
from report.rules import empty_log_rule
from report.settings import ReportSettings

TRAINING_BUCKETS: frozenset[Bucket] = frozenset(("rl", "sft"))
"""The buckets whose jobs bank steps (durable checkpoints): a banked step is reported for these."""
_JUDGES: dict[Bucket, Callable[[JudgeContext, Findings], None]] = {
    "rl": judge_rl, "sft": judge_sft, "datagen": judge_datagen, "eval": judge_eval,
    "other": judge_other,
}


def judge_job(
    facts: JobFacts,
    *,
    cluster_records: Sequence[SchedulerRecord],
    settings: ReportSettings,
    now: datetime,
    history: Sequence[MetricPoint] | None = None,
    memory: SweepMemory | None = None,
    cluster_name_shown: bool = False,
    sweep_jobs: Sequence[JobFacts] | Attempts = (),
    index: ChainIndex | None = None,
) -> JobDetail:
    """Judge one job: bucket, flags, verdict, trend, successor, recommendation, evidence.

    ``index``: ``cluster_records`` indexed once for the whole sweep (built here if not given);
    ``sweep_jobs``: the cluster's jobs whose earlier attempts' fingerprints are compared
    (issue 11), best indexed once per sweep as :class:`report.fingerprint.Attempts`."""
    record = facts.record
    index = index if index is not None else ChainIndex(cluster_records)
    bucket = bucket_for(record.name, settings.buckets)
    facts = _judged_facts(facts, bucket)
    points = history if history is not None else (facts.summary.points if facts.summary else ())
    edges = memory.known_edges.get(record.cluster, {}) if memory else {}
    link = chain_link(as_ended(record), cluster_records, edges, index=index,
                      planned_stop=planned_stop(facts) is not None,
                      success_edges=memory.known_ok_edges.get(record.cluster) if memory else None,
                      continues=lambda r: bucket_for(r.name, settings.buckets) in (bucket, "other"),
                      co_waits=lambda r: bucket_for(r.name, settings.buckets) == bucket)
    ctx = JudgeContext(
        facts=facts,
        history=normalized_history(points),
        settings=settings,
        now=now,
        successor=link.successor,
        stopped=(link.stopped, link.ended or "FAILED") if link.stopped is not None else None,
        seen_configs=frozenset(memory.seen_configs.get(record.cluster, ())) if memory else None,
        earlier_attempts=index.earlier_attempts(record),
        others_live=functools.partial(
            index.others_live, record,
            lambda r: bucket_for(r.name, settings.buckets) in (bucket, "other")),
        attempts=sweep_jobs if isinstance(sweep_jobs, Attempts) else Attempts(sweep_jobs),
        resumes=resumed_attempt(record, index.live),
    )
    f = Findings()
    restart = _restart_after_cancel(record, cluster_records, index) if bucket == "rl" else None
    failures = _apply_rules(ctx, f, bucket, link, memory, restart=restart)
    return _assemble(ctx, f, bucket, cluster_name_shown, failures)


def _restart_after_cancel(record: SchedulerRecord, records: Sequence[SchedulerRecord],
                          index: ChainIndex) -> str | None:
    """A CANCELLED run's restart that its cancel released: found as a TIMEOUT's would be
    (``afterany`` is satisfied by any end, a cancel's too), but only one queued before the
    cancel; a job of the run submitted after it is someone's relaunch, not the chain's."""
    if record.state is not JobState.CANCELLED or record.end_time is None:
        return None
    found = chain_link(record.model_copy(update={"state": JobState.TIMEOUT}), records, {},
                       index=index).successor
    restart = index.live.get(found) if found is not None else None
    if restart is None or restart.submit_time is None or restart.reason in HELD_REASONS:
        return None
    return found if restart.submit_time < record.end_time else None


def _judged_facts(facts: JobFacts, bucket: Bucket) -> JobFacts:
    """``facts`` as its bucket judges them: this launch's, with only what the bucket owns."""
    if bucket not in TRAINING_BUCKETS and facts.checkpoints is not None:
        # A banked step is a training run's: a datagen, eval or catch-all job sharing a
        # workdir with one (an upload of its checkpoints, a GPU-CI run beside it) banks none.
        facts = facts.model_copy(update={"checkpoints": None})
    if bucket == "eval":
        facts = own_run_trials(facts)
    if bucket == "datagen":
        facts = fresh_run_trials(facts)
    return this_launch(facts)


def _apply_rules(
    ctx: JudgeContext, f: Findings, bucket: Bucket, link: ChainLink, memory: SweepMemory | None,
    *, restart: str | None = None,
) -> tuple[FailureSignature | None, FailureSignature | None]:
    """Every rule onto ``f``, in precedence order (the cross-cutting ones around the bucket's
    judge); the job's failure signature and the one it repeats, if any."""
    log_rules(ctx, f)
    fault_rules(ctx, f)
    state_rules(ctx, f, link)
    _JUDGES[bucket](ctx, f)
    bring_up_fault_rule(ctx, f)
    waiting_fault_rule(ctx, f)
    never_starts_rule(ctx, f)
    held_rule(ctx, f)
    queued_resume_rule(ctx, f)
    live_oom_rule(ctx, f)
    image_pull_rule(ctx, f)
    silent_wedge_rule(ctx, f)
    failed_rank_rule(ctx, f)
    sidecar_held_rule(ctx, f)
    restarting_rule(ctx, f)
    same_name_rule(ctx, f)
    recurring_pod_failure_rule(ctx, f)
    restarted_rule(ctx, f)
    empty_log_rule(ctx, f, bucket)
    if not planned_stop_rule(ctx, f):  # a planned stop is no finished run: no cleanup
        cleanup_rule(ctx, f, bucket)
    if bucket == "rl":
        chain_collapse_rule(ctx, f, link)
    cancelled_rule(ctx, f, restart)
    failure, repeats = recurring_rule(ctx, f, memory)
    suspended_rule(ctx, f)
    no_kill_rule(ctx, f)
    unreadable_checkpoints_note(ctx, f)
    return failure, repeats


def _natural(job_id: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", job_id) if p)


def build_report(
    clusters: Sequence[ClusterFacts],
    *,
    settings: ReportSettings,
    now: datetime,
    histories: Mapping[tuple[str, str], Sequence[MetricPoint]] | None = None,
    memory: SweepMemory | None = None,
    kept_history: int | None = None,
) -> tuple[Report, dict[tuple[str, str], JobDetail]]:
    """Judge every job of a sweep; jobs ordered by bucket, then cluster, then job id.

    ``kept_history``: an unflagged job's detail keeps only its last that many points once
    judged (the bot's stored windows are 200 points, most of a kept job's memory; ``/job``
    reads the whole window again). A collapse or a failure keeps its whole window: the
    collapse alert and the incident file quote it."""
    shown = sum(1 for c in clusters if c.jobs) > 1
    judged = _judge_clusters(clusters, settings=settings, now=now, histories=histories,
                             memory=memory, shown=shown)
    judged = _sweep_recurrences(judged, clusters, settings=settings, now=now,
                                histories=histories, memory=memory, shown=shown)
    judged.sort(key=lambda d: (BUCKET_ORDER.index(d.report.bucket), d.report.cluster,
                               _natural(d.report.job_id)))
    report = Report(
        generated_at=now,
        clusters=[ClusterReport(name=c.name, kind=c.kind, status=c.status, detail=c.detail)
                  for c in clusters],
        jobs=[d.report for d in judged],
        grid=_roll_up_grid(judged, clusters),
    )
    if kept_history is not None:
        judged = [_trimmed(d, kept_history) for d in judged]
    return report, {(d.report.cluster, d.report.job_id): d for d in judged}


def _judge_clusters(
    clusters: Sequence[ClusterFacts],
    *,
    settings: ReportSettings,
    now: datetime,
    histories: Mapping[tuple[str, str], Sequence[MetricPoint]] | None,
    memory: SweepMemory | None,
    shown: bool,
) -> list[JobDetail]:
    """:func:`judge_job` for every job, each cluster's records indexed once."""
    judged: list[JobDetail] = []
    for cluster in clusters:
        records = [j.record for j in cluster.jobs]
        index, attempts = ChainIndex(records), Attempts(cluster.jobs)
        # A recording is judged at the time it was recorded, beside live clusters too: at
        # the live clock its running jobs would read days without a step (stalled).
        at = cluster.collected_at if cluster.kind == "replay" else now
        for facts in cluster.jobs:
            key = (cluster.name, facts.record.job_id)
            judged.append(judge_job(
                facts, cluster_records=records, settings=settings, now=at,
                history=histories.get(key) if histories else None, memory=memory,
                cluster_name_shown=shown, sweep_jobs=attempts, index=index,
            ))
    return judged


def _roll_up_grid(
    judged: Sequence[JobDetail], clusters: Sequence[ClusterFacts],
) -> list[GridRollup]:
    """The SFT grid rollups of the judged jobs (by their labels and dependencies)."""
    labels = {(j.record.cluster, j.record.job_id): j.record.labels
              for c in clusters for j in c.jobs}
    waits_for = {(j.record.cluster, j.record.job_id): [d.job_id for d in dependencies(j.record)]
                 for c in clusters for j in c.jobs}
    return grid_rollups([
        (d.report, labels.get((d.report.cluster, d.report.job_id), {}), _rate(d.report))
        for d in judged
    ], waits_for)


def _trimmed(detail: JobDetail, keep: int) -> JobDetail:
    quoted = "collapse" in detail.report.flags or detail.report.verdict == "failed"
    if quoted or len(detail.history) <= keep:
        return detail
    return detail.model_copy(update={"history": detail.history[-keep:] if keep else ()})


def _sweep_recurrences(
    judged: list[JobDetail],
    clusters: Sequence[ClusterFacts],
    *,
    settings: ReportSettings,
    now: datetime,
    histories: Mapping[tuple[str, str], Sequence[MetricPoint]] | None,
    memory: SweepMemory | None,
    shown: bool,
) -> list[JobDetail]:
    """Re-judge a failed attempt whose earlier attempt failed in this same sweep, with that
    signature remembered: ``jobtables sweep`` has no memory of earlier sweeps, and a chain of
    identical failures within ``recent_hours`` is exactly what it shows."""
    found = {(c.name, j.record.job_id): (c, j) for c in clusters for j in c.jobs}
    earlier = earlier_attempts([
        (found[(d.report.cluster, d.report.job_id)][1].record, d.failure)
        for d in judged if d.failure is not None
    ])
    if not earlier:
        return judged
    records = {c.name: [j.record for j in c.jobs] for c in clusters}
    indexes = {c.name: (ChainIndex(records[c.name]), Attempts(c.jobs)) for c in clusters}
    out = []
    for detail in judged:
        key = (detail.report.cluster, detail.report.job_id)
        before = earlier.get(key)
        if before is None or "recurring-failure" in detail.report.flags:
            out.append(detail)
            continue
        cluster, facts = found[key]
        index, attempts = indexes[cluster.name]
        out.append(judge_job(
            facts, cluster_records=records[cluster.name], settings=settings,
            now=cluster.collected_at if cluster.kind == "replay" else now,  # as build_report
            history=histories.get(key) if histories else None,
            memory=with_earlier(memory, facts.record, before), cluster_name_shown=shown,
            sweep_jobs=attempts, index=index,
        ))
    return out


def _rate(report: JobReport) -> float | None:
    rate = report.metrics.get("sec_per_step")
    return rate if isinstance(rate, float) else None
