"""What the per-bucket judges accumulate about one job, and how it is settled into a row.

Policy: judges only *add* findings (flags, candidate verdicts, candidate trends and
recommendations, each with a priority); settling is done once, here, so the precedence rules
live in one place:

- Verdict precedence: ``failed > collapse > stalled > restarting > warning > buffering > done >
  healthy > unknown``. A terminal failure is the most conclusive fact about a job, so it wins
  even over collapse evidence from its last steps. Collapse comes next because it is the one
  verdict that asks a person to act within minutes (cancel + salvage). A stall is a job burning
  its allocation with no progress. ``restarting`` (a chain-restart TIMEOUT) is normal but is
  still news compared with the softer ``warning``. ``buffering`` beats ``done``/``healthy``
  because a job with no metric yet cannot be called healthy. ``unknown`` is only what is left
  when nothing could be established (e.g. a failed log fetch) and never hides a real finding.
- Recommendations: the highest :class:`Priority` wins; ties keep the first added.
- Trends: the highest-priority text wins; ties keep the first added.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from functools import cached_property
from typing import TypeVar

from probes.models import JobFacts, JobState, MetricPoint, SchedulerRecord
from report.chain import HELD_REASONS
from report.failure_text import failing_line, fault_words, first_fault
from report.fingerprint import Attempts
from report.models import Action, Flag, Recommendation, SignalEvidence, Verdict
from report.settings import ReportSettings

__all__ = [
    "NO_KILL_PREFIX", "VERDICT_PRECEDENCE", "Findings", "JudgeContext", "Priority", "fault_words",
    "is_finite", "latest_values", "minutes_since", "normalized_history", "pending_note", "series",
    "this_launch",
]
"""Its own names, and :func:`report.failure_text.fault_words` for bot.alert_messages."""

VERDICT_PRECEDENCE: tuple[Verdict, ...] = (
    "failed", "collapse", "stalled", "restarting", "warning", "buffering", "done", "healthy",
    "unknown",
)

_T = TypeVar("_T")

NO_KILL_PREFIX = "RECOMMENDATION ONLY (no-kill in force): "


class Priority(IntEnum):
    """Ranks for recommendations and trend texts (higher wins)."""

    BACKGROUND = 10
    DEEP_PROBE = 30
    CLEANUP = 40
    INFO = 50
    CONSOLIDATE = 60
    DIAGNOSE = 70
    TERMINAL = 80
    EXEMPT = 85
    CANCEL = 90


@dataclass(frozen=True)
class JudgeContext:
    """Everything a bucket judge reads: the facts plus the sweep's settings and clock."""

    facts: JobFacts
    history: tuple[MetricPoint, ...]
    settings: ReportSettings
    now: datetime
    successor: str | None = None
    stopped: tuple[str, str] | None = None
    """A restart that ran and failed (its id and end state): the chain stopped there
    (``report.chain.ChainLink.stopped``)."""
    seen_configs: frozenset[str] | None = None
    """Fingerprints of runs already seen healthy; ``None`` when there is no sweep memory."""
    earlier_attempts: int = 0
    """Other jobs of the same name and user in this sweep (restart copies, resumed chains)."""
    others_live: Callable[[], bool] = lambda: False
    """Whether another live job of the run (same user and workdir and of the job's bucket or
    a catch-all, or same name stem) is in this sweep: asked only by the rule that needs it
    (``ChainIndex.others_live``)."""
    attempts: Attempts = field(default_factory=lambda: Attempts(()))
    """The cluster's jobs in this sweep, indexed (issue 11: earlier attempts' fingerprints)."""
    resumes: str | None = None
    """The live attempt a pending job is queued to resume (``report.holds.resumed_attempt``)."""

    @property
    def state(self) -> JobState:
        return self.facts.record.state

    @property
    def running(self) -> bool:
        return self.facts.record.state in (JobState.RUNNING, JobState.COMPLETING)

    @cached_property
    def failed_on(self) -> str | None:
        """The line a FAILED job with no fault in its log failed on (:func:`failing_line`),
        else None. Searched once, and only when a rule asks: a FAILED job's diagnosis and
        failure signature; never for a live, finished, timed-out or faulted job."""
        if self.state is not JobState.FAILED or first_fault(self.facts) is not None:
            return None
        return failing_line(self.facts)

    @property
    def fetch_ok(self) -> bool:
        """The log was read (scheduler path or workdir), so its silence means something."""
        return self.facts.log is not None and self.facts.log.status in ("ok", "mismatch")


@dataclass
class Findings:
    """The mutable accumulator a judge fills for one job (never leaves ``report``)."""

    flags: list[Flag] = field(default_factory=list)
    verdicts: set[Verdict] = field(default_factory=set)
    trends: list[tuple[int, str]] = field(default_factory=list)
    recommendations: list[tuple[int, Recommendation]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, float | str] = field(default_factory=dict)
    step: int | None = None
    total_steps: int | None = None
    evidence: tuple[SignalEvidence, ...] = ()
    collapse_step: int | None = None
    collapse_onset: int | None = None
    """The step the collapse began on (``report.signals.CollapseScan.collapse_onset``)."""
    infra: str | None = None
    type_label: str | None = None
    name_suffix: str = ""
    trend_ends: list[str] = field(default_factory=list)
    """Kept whole at the Trend's end, whatever it says (the text before is shortened)."""
    restarts: list[tuple[Recommendation, str]] = field(default_factory=list)
    """Recommendations that act on the run's live restart, not on this ended job (the chain
    rules), each with that restart's id: :meth:`settled_restart`."""

    def flag(self, *flags: Flag) -> None:
        for f in flags:
            if f not in self.flags:
                self.flags.append(f)

    def verdict(self, verdict: Verdict) -> None:
        self.verdicts.add(verdict)

    def trend(self, priority: int, text: str) -> None:
        self.trends.append((priority, text))

    def recommend(self, priority: int, action: Action, why: str, *,
                  restart: str | None = None) -> None:
        """``restart``: the live restart (its id) this recommendation acts on, handed on as
        an id (``JobDetail.restart``), never to be read back from ``why``."""
        rec = Recommendation(action=action, why=why)
        self.recommendations.append((priority, rec))
        if restart is not None:
            self.restarts.append((rec, restart))

    def settled_restart(self) -> str | None:
        """The restart the settled recommendation acts on, when a chain rule's settled."""
        chosen = self.settled_recommendation()
        return next((job for rec, job in self.restarts if rec is chosen), None)

    def settled_verdict(self) -> Verdict:
        for verdict in VERDICT_PRECEDENCE:
            if verdict in self.verdicts:
                return verdict
        return "unknown"

    def settled_trend(self) -> str:
        return _best(self.trends) or ""

    def settled_recommendation(self) -> Recommendation | None:
        return _best(self.recommendations)


def _best(ranked: Sequence[tuple[int, _T]]) -> _T | None:
    best: tuple[int, _T] | None = None
    for item in ranked:
        if best is None or item[0] > best[0]:
            best = item
    return best[1] if best else None


def series(history: Sequence[MetricPoint], metric: str) -> list[float]:
    """Return every logged value of ``metric`` in step order (non-finite kept)."""
    return [p.values[metric] for p in history if metric in p.values]


def latest_values(history: Sequence[MetricPoint]) -> dict[str, float]:
    """Return canonical metric -> its latest logged value (absent metrics left out)."""
    latest: dict[str, float] = {}
    for point in history:
        latest.update(point.values)
    return latest


def normalized_history(points: Sequence[MetricPoint]) -> tuple[MetricPoint, ...]:
    """Sort by step; a repeated step (resume) keeps its last occurrence."""
    steps = [p.step for p in points]
    if all(map(operator.lt, steps, steps[1:])):
        return tuple(points)  # already strictly increasing (a parsed log's usual history)
    by_step: dict[int, MetricPoint] = {}
    for point in points:
        by_step[point.step] = point
    return tuple(by_step[s] for s in sorted(by_step))


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def minutes_since(now: datetime, then: datetime | None) -> float | None:
    """Minutes from ``then`` to ``now`` (None when unknown; naive times are taken as UTC)."""
    if then is None:
        return None
    return (_as_utc(now) - _as_utc(then)).total_seconds() / 60.0


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def this_launch(facts: JobFacts) -> JobFacts:
    """A live job's facts without the faults its log holds above the trainer's last start
    line read again (``LogSummary.relaunch_line``): a restart appended to its old log (an
    attempt that ended on a traceback leaves no SLURM marker to end its part,
    ``probes.logs.attempts``), or a retry in the job's script, is a new launch, and the old
    launch's traceback is not the running one's. An ended job keeps them (its part may hold
    its own failure above a later attempt's launch)."""
    summary = facts.summary
    if (summary is None or summary.relaunch_line is None or not summary.faults
            or facts.record.state not in (JobState.RUNNING, JobState.COMPLETING)):
        return facts
    since = summary.relaunch_line
    kept = tuple(fault for fault in summary.faults if fault.line_no >= since)
    if len(kept) == len(summary.faults):
        return facts
    return facts.model_copy(update={"summary": summary.model_copy(update={"faults": kept})})


def pending_note(record: SchedulerRecord, now: datetime) -> str:
    """A pending job's Trend: its wait reason and, where SLURM projects one (a start still
    ahead), its expected start; a held job has none (SLURM's projection ignores the hold),
    and a requeued one (``scontrol requeue``, a node failure) says it ran before."""
    reason = record.reason
    if reason in HELD_REASONS:
        requeued = ", requeued" if record.restarts and record.pods_total is None else ""
        return f"Held ({reason}){requeued}: will not start until released"
    note = f"Pending ({reason})" if reason else "Pending"
    if record.restarts and record.pods_total is None:  # SLURM's restart_cnt, not pods'
        note = f"Requeued ({record.restarts}x); {note[0].lower()}{note[1:]}"
    start = _as_utc(record.start_time) if record.start_time is not None else None
    if start is not None and start > _as_utc(now):  # naive times are taken as UTC
        note += f", expected start {start:%m-%d %H:%M}Z"
    return note


def salvage_target(facts: JobFacts, onset: int | None) -> str:
    """What a collapse's salvage takes: the last banked checkpoint before the collapse began on
    step ``onset`` (a save at or after it holds collapsed weights) and the rollouts, or, when
    every banked save is at or after it, the rollouts and that no checkpoint is safe (seed:
    "cancel + salvage")."""
    steps = facts.checkpoints.steps if facts.checkpoints else ()
    if onset is None:
        banked = f"banked step {max(steps)}" if steps else "the last banked checkpoint"
        return f"{banked} and the rollouts"
    safe = salvage_step(facts, onset)
    if safe is not None:
        return (f"banked step {safe} (the last before the collapse began at step "
                f"{onset}) and the rollouts")
    if steps:
        saves = ", ".join(str(s) for s in sorted(steps)[:5])
        return (f"the rollouts (no banked checkpoint is safe: saves at step {saves}, none "
                f"before the collapse began at step {onset})")
    return f"the last checkpoint before step {onset} and the rollouts"


def salvage_step(facts: JobFacts, onset: int | None) -> int | None:
    """The banked step a collapse's salvage takes (:func:`salvage_target`): the last before
    ``onset``, the step the collapse began on; None when no save is before it (or no onset)."""
    steps = facts.checkpoints.steps if facts.checkpoints else ()
    before = [s for s in steps if onset is not None and s < onset]
    return max(before) if before else None
