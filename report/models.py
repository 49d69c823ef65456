"""The report as the contract (§3) defines it: what ``--format json`` prints, field for field.

Policy: these models are the only shape the outside world sees. Tables, Slack messages and
JSON are all rendered from a :class:`Report`; nothing renders from raw probe facts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from probes.models import ClusterKind, ClusterStatus, Frozen, JobState, MetricPoint, TerminalSignal

Bucket = Literal["rl", "sft", "datagen", "eval", "other"]
BUCKET_ORDER: tuple[Bucket, ...] = ("rl", "sft", "datagen", "eval", "other")

Verdict = Literal[
    "buffering", "healthy", "warning", "collapse", "failed", "restarting", "stalled", "done",
    "unknown",
]

Flag = Literal[
    # Every real terminal signal a log can show is a flag of the same name (CONTRACT §6):
    # built from the probes' own vocabulary, so a new fault kind cannot be dropped by a map.
    TerminalSignal,
    "collapse",
    "signal:grad_norm",
    "signal:entropy",
    "signal:log_ratio",
    "signal:pass_rate",
    "ablation-exempt",
    "no-kill",
    "buffer-filling",
    "deep-probe",
    "shaping-active",
    "chain-restart",
    "log-path-mismatch",
    "log-missing",
    "fetch-failed",
    "grad-explosion",
    "recurring-failure",
    "clip-ratio-high",
    "imp-ratio-out-of-range",
    "stall",
    "zombie",
    "dead-engine",
    "instant-fail",
    "stranded-traces",
    "silent-wedge",
    "engine-idle",
    "api-base-internal",
    "auth-failures",
    "cleanup-pending",
    "dead-rollouts",  # issue 11 (wt-e): CONTRACT §6
    "incomplete-run",
]

Action = Literal[
    "cancel_and_salvage", "cleanup", "diagnose", "deep_probe", "consolidate_manually", "none",
]

CleanupRoutine = Literal[
    "rl-agentic-job-cleanup",
    "rl-standard-job-cleanup",
    "sft-job-cleanup",
    "datagen-job-cleanup",
    "eval-agentic-cleanup",
]


class Recommendation(Frozen):
    action: Action
    why: str


class FailureSignature(Frozen):
    """How one failed attempt died: the one representation of a failure.

    The judge's ``recurring-failure`` flag, the sweep memory in Redis and the incident files
    all carry this model (the comparison lives in :mod:`report.memory`). ``text`` is the
    diagnosis with ids, numbers, hex and paths normalised away, so two attempts that died the
    same way have the same text; ``elapsed_s`` tells a SIGTERM at a fixed interval apart.
    """

    job_id: str
    kind: str
    """The first fault's kind (``sigterm``, ``oom``...), else ``exit<code>``."""
    text: str
    elapsed_s: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    """When the attempt ran (None: unknown, e.g. memory written before they were kept): tells
    an array's task that ran beside this one from the task before it in a throttled array."""
    array_throttle: int | None = None
    """An array task's array throttle (``%N``; 0: none; None: not a task, or unknown): only in
    an array that runs one task at a time (1) is an earlier task an earlier attempt."""


class SignalEvidence(Frozen):
    """One collapse signal as evaluated on one step (for DMs and ``/job``)."""

    signal: Literal["grad_norm", "entropy", "log_ratio", "pass_rate"]
    step: int
    value: float
    window_mean: float | None = None
    window: tuple[float, ...] = ()
    fired: bool
    why: str


class DeepProbe(Frozen):
    """A deep probe's result (CONTRACT §3 ``deep_probe``): verdict, quoted reasons, what it read."""

    verdict: Literal["KILL", "NO-KILL"]
    reasons: list[str]
    read: dict[str, Any]


class JobReport(Frozen):
    """One job object of the JSON contract (§3), plus non-contract detail under ``detail``."""

    cluster: str
    job_id: str
    name: str
    user: str | None
    bucket: Bucket
    state: JobState
    elapsed_s: int | None
    step: int | None
    total_steps: int | None
    banked_step: int | None
    metrics: dict[str, float | str]
    flags: list[Flag]
    verdict: Verdict
    trend: str
    successor: str | None
    log_path: str | None
    recommendation: Recommendation | None
    deep_probe: DeepProbe | None = None
    """Present once a deep probe has run (``jobtables probe``, the Slack button, auto-probe)."""


class JobDetail(Frozen):
    """What ``jobtables job`` adds to the row: history, evidence, where things are."""

    report: JobReport
    history: tuple[MetricPoint, ...] = ()
    evidence: tuple[SignalEvidence, ...] = ()
    collapse_step: int | None = None
    collapse_onset: int | None = None
    """The step the collapse began on (``report.signals.CollapseScan.collapse_onset``)."""
    salvage_step: int | None = None
    """The banked step the collapse's salvage takes, the last before ``collapse_onset``
    (``report.findings.salvage_step``); None when no save is before it. What the collapse
    alert and its Cancel & salvage name, as the recommendation does."""
    faults: tuple[str, ...] = ()
    log_excerpt: str = ""
    workdir: str | None = None
    note: str = ""
    infra: str | None = None
    """Eval launch checks as marks, e.g. ``tunnel✓ api✓ engine✗`` (the Infra column)."""
    type_label: str | None = None
    """Catch-all Type column, e.g. ``datagen-consolidate``, ``gpu-ci``, ``RL upload``."""
    display_name: str | None = None
    """The Job cell, e.g. ``<run> (shaped)``; defaults to the job name."""
    trial_root: str | None = None
    """The trial tree the row counted (its root), for grouping: an array's tasks (or a run's
    chunk jobs) with trees of their own add up to the run's, members that read one shared tree
    already count the run's."""
    steps_unanchored: bool = False
    """The history's steps are only its order (``LogSummary.steps_unanchored``): shown as
    unknown, never as the run's steps."""
    failure: FailureSignature | None = None
    """A failed attempt's signature (what the sweep memory and the incident file keep)."""
    repeats: FailureSignature | None = None
    """The earlier attempt this one failed exactly like (set with ``recurring-failure``)."""
    restart: str | None = None
    """The live restart the recommendation acts on instead of this ended job (its chain
    successor, or the afterany restart its cancel released), as the judge named it: what a
    collapse alert on this row names and is raised for. None otherwise; never read from the
    recommendation's words (a ``why`` may quote anything)."""
    instance: tuple[str | None, str | None] = Field(default=(None, None), exclude=True)
    """(Kubernetes uid, SLURM submit time) of the job read, where the reader gave them (the
    deep probe): what a button on this row is bound to. Never serialised."""


class ClusterReport(Frozen):
    name: str
    kind: ClusterKind
    status: ClusterStatus
    detail: str | None


class Report(Frozen):
    generated_at: datetime
    clusters: list[ClusterReport]
    jobs: list[JobReport]
    grid: list[GridRollup] = Field(default_factory=list, exclude=True)


class GridRollup(Frozen):
    """SFT grid rollup (seed §SFT): shown under the SFT table; the CLI's JSON adds it as
    ``grids`` (beside the contract's keys, as ``groups``)."""

    grid: str
    running: int
    pending_unique: int
    done: int
    cells: list[GridCell]
    short: tuple[str, ...] = ()
    """COMPLETED cells whose completion check fell short of the total (``incomplete-run``)."""
    long_pole: str | None


class GridCell(Frozen):
    cell: str
    job_id: str
    cluster: str | None = None
    """The cell's cluster (a grid's runs on two clusters share one rollup; ids overlap)."""
    progress_pct: float | None
    eta_s: float | None


Report.model_rebuild()
GridRollup.model_rebuild()
