"""One judged job's table row and detail, assembled from its settled findings.

Policy: pure, the last step of :func:`report.judge.judge_job`, once every rule has run and
:mod:`report.findings` has settled the verdict, trend and recommendation. The Trend keeps its
ends whole (``Findings.trend_ends``, and :data:`report.job_rules.UNREADABLE_CHECKPOINTS` where
that is why no banked step is known), shortening the text before them to ``TREND_MAX``; the
paths are as shown (``\\xNN`` for bytes that are not UTF-8); a successor is named only when the
job is a chain restart.
"""

from __future__ import annotations

from probes.models import JobFacts
from report.cells import shown_path
from report.failure_text import log_excerpt
from report.findings import Findings, JudgeContext, salvage_step
from report.job_rules import UNREADABLE_CHECKPOINTS
from report.models import Bucket, FailureSignature, JobDetail, JobReport
from report.trend import TREND_MAX, shorten


def _trend_text(f: Findings, facts: JobFacts) -> str:
    """The settled Trend, ending with ``Findings.trend_ends`` and :data:`UNREADABLE_CHECKPOINTS`
    where that is why no banked step is known (kept whole: the text before them is shortened
    instead)."""
    listing = facts.checkpoints
    ends = list(f.trend_ends)
    if listing is not None and listing.unreadable and listing.banked_step is None:
        ends.append(UNREADABLE_CHECKPOINTS)
    end = "".join(ends)
    text = f.settled_trend()
    if not end:
        return shorten(text)
    if not text:
        end = end.removeprefix("; ")
        return end[:1].upper() + end[1:]
    return shorten(text, max(TREND_MAX - len(end), 12)) + end


def _assemble(
    ctx: JudgeContext, f: Findings, bucket: Bucket, shown: bool,
    failures: tuple[FailureSignature | None, FailureSignature | None],
) -> JobDetail:
    record, facts = ctx.facts.record, ctx.facts
    report = JobReport(
        cluster=record.cluster, job_id=record.job_id, name=record.name, user=record.user,
        bucket=bucket, state=record.state, elapsed_s=record.elapsed_s, step=f.step,
        total_steps=f.total_steps,
        banked_step=facts.checkpoints.banked_step if facts.checkpoints else None,
        metrics=f.metrics, flags=f.flags, verdict=f.settled_verdict(),
        trend=_trend_text(f, facts),
        # A planned stop's link is looked for before its total is known: named if it held.
        successor=ctx.successor if "chain-restart" in f.flags else None,
        # The paths as shown (``\\xNN`` for bytes that are not UTF-8): the report only shows.
        log_path=shown_path(facts.log.path) if facts.log and facts.log.path else None,
        recommendation=f.settled_recommendation(),
    )
    faults = facts.summary.faults if facts.summary else ()
    return JobDetail(
        report=report, history=ctx.history, evidence=f.evidence, collapse_step=f.collapse_step,
        collapse_onset=f.collapse_onset, salvage_step=salvage_step(facts, f.collapse_onset),
        faults=tuple(f"{x.kind}: {x.detail or x.excerpt}" for x in faults),
        log_excerpt=log_excerpt(facts),
        workdir=shown_path(record.workdir) if record.workdir else record.workdir,
        note="; ".join(f.notes),
        infra=f.infra, type_label=f.type_label,
        display_name=(f"{record.cluster}/" if shown else "") + record.name + f.name_suffix,
        failure=failures[0], repeats=failures[1], restart=f.settled_restart(),
        steps_unanchored=bool(facts.summary and facts.summary.steps_unanchored),
        trial_root=facts.trials.root if facts.trials and facts.trials.exists else None,
    )
