"""The facts a probe gathers about clusters and jobs.

Policy: every model here is frozen and forbids unknown fields. Probes (SLURM, Kubernetes,
replay) produce them; parsers fill the log, checkpoint and trial parts; the report layer
judges them and never talks to a cluster. A fact we could not establish is ``None`` (never a
made-up zero), so "no metric yet" and "metric is 0" stay distinguishable all the way to the
table. The base model is :mod:`probes.fact_base`'s, what a log says :mod:`probes.log_facts`'s;
both are re-exported here (:data:`__all__`), where most importers look for them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import Field

from probes.fact_base import Frozen, LogTime
from probes.log_facts import (
    Fault,
    FaultKind,
    InfraSignals,
    LogContext,
    LogFetch,
    LogOutcome,
    LogStatus,
    LogSummary,
    MetricPoint,
    PlannedStop,
    ProgressBar,
    RunFingerprint,
    TerminalSignal,
)

__all__ = [
    "ACTIVE_STATES", "TERMINAL_STATES", "CheckpointListing", "ClusterFacts", "ClusterKind",
    "ClusterStatus", "CompletionCheck", "CompletionFile", "Fault", "FaultKind", "Frozen",
    "InfraSignals", "JobFacts", "JobState", "LogContext", "LogFetch", "LogOutcome", "LogStatus",
    "LogSummary", "LogTime", "MetricPoint", "PlannedStop", "ProgressBar", "RunFingerprint",
    "SchedulerRecord", "TerminalSignal", "TrialCounts", "TrialResult", "TrialTree",
]


class JobState(StrEnum):
    """The contract's job states; Kubernetes states are mapped onto these."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    UNKNOWN = "UNKNOWN"


ACTIVE_STATES = frozenset({JobState.PENDING, JobState.RUNNING, JobState.COMPLETING})
TERMINAL_STATES = frozenset(set(JobState) - ACTIVE_STATES - {JobState.UNKNOWN})

ClusterKind = Literal["slurm", "kubernetes", "replay"]


class SchedulerRecord(Frozen):
    """What the scheduler (or the Kubernetes API) says about one job."""

    cluster: str
    job_id: str
    name: str
    user: str | None = None
    state: JobState
    reason: str | None = None
    """Scheduler reason or Kubernetes condition/container reason (e.g. ``ImagePullBackOff``)."""
    submit_time: datetime | None = None
    eligible_time: datetime | None = None
    """When SLURM made the job eligible to start. Past its submit time, the job waited for
    something (a dependency, ``--begin``): a dependant is made eligible the moment its
    dependency is met, so this time says which job's end released it even after SLURM has
    cleared the fulfilled ``Dependency`` (``report.chain``)."""
    start_time: datetime | None = None
    end_time: datetime | None = None
    elapsed_s: int | None = None
    time_limit_s: int | None = None
    workdir: str | None = None
    stdout_path: str | None = None
    stderr_path: str | None = None
    """StdErr when the job gave it a file of its own (``sbatch -e``), filled; else None (it
    goes to StdOut). Its faults are the job's too (``probes.remote.job_files``)."""
    dependency: str | None = None
    """The raw dependency string, e.g. ``afterany:123(unfulfilled)``."""
    depends_on: tuple[str, ...] = ()
    """Job ids this job waits for (any dependency type), parsed from ``dependency``."""
    exit_code: int | None = None
    exit_signal: int | None = None
    command: str | None = None
    comment: str | None = None
    nodes: str | None = None
    restarts: int = 0
    array_job_id: str | None = None
    array_task_id: str | None = None
    pods_total: int | None = None
    """Kubernetes only: pods that exist for the job (``None`` on SLURM)."""
    pods_running: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form annotations (Kubernetes labels, SLURM comment keys): image, config hash."""


class CheckpointListing(Frozen):
    """Durable checkpoint evidence across every configured root."""

    roots: tuple[str, ...] = ()
    steps: tuple[int, ...] = ()
    """``global_step_N`` / ``checkpoint-N`` found under any root."""
    export_steps: tuple[int, ...] = ()
    """``exports/global_step_N`` (completion only for a finished run)."""
    unreadable: tuple[str, ...] = ()
    """``<directory>: <why>`` for each searched directory that exists but could not be read
    (permission denied to the login account, a symlink not followed, a hung listing): steps
    there are unknown, not absent."""
    dirs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The directories ``steps`` came from, each with its steps (``probes.slurm.shared_roots``
    keeps a run's own where runs share a workdir)."""
    logged: bool = False
    """``steps`` come only from save folders the run's log names: the run's own."""
    written: tuple[tuple[int, datetime], ...] = ()
    """Each step's (and export step's) newest directory mtime, where the collector sent one:
    a save written before the job started is an earlier run's (report.cleanup)."""

    @property
    def banked_step(self) -> int | None:
        return max(self.steps) if self.steps else None


class TrialResult(Frozen):
    """One Harbor trial's ``result.json``, reduced to what the rules read."""

    name: str
    reward: float | None = None
    exception_type: str | None = None
    n_turns: int | None = None
    """Turns over the whole trial (a multi-step trial's steps summed)."""
    agent_runs: int = 1
    """Agent runs the turns span: a multi-step trial runs the agent once a step."""
    n_output_tokens: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    agent_started_at: datetime | None = None
    """Harbor's ``agent_execution`` phase (after environment and agent setup)."""
    agent_finished_at: datetime | None = None
    auth_failure: bool = False
    """The exception is an auth failure (sandbox provider or endpoint refusing credentials)."""
    connection_failure: bool = False
    """The exception is the model endpoint unreachable (a connection error, raised or quoted)."""
    api_base: str | None = None
    """The inference endpoint the trial's agent was pointed at (its recorded ``TrialConfig``)."""


class TrialCounts(Frozen):
    """Whole-run trial statistics reduced on the login node (``probes.remote.trial_count``)."""

    trials: int = 0
    completed: int = 0
    scored: int = 0
    passed: int = 0
    reward_sum: float = 0.0
    turns_n: int = 0
    turns_sum: int = 0
    exceptions: dict[str, int] = Field(default_factory=dict)
    instant_fail: int = 0
    complete: bool = True
    """False when the time bound stopped the count: ``trials`` is then a lower bound."""
    seconds: float = 0.0
    unreadable: int = 0
    """Trials whose result.json is there but could not be read or parsed (its mode, cut off
    mid-write): ended (Harbor writes it as a trial ends), not in ``trials``, reward unknown."""


class TrialTree(Frozen):
    """A Harbor job directory (datagen chunk or eval run)."""

    root: str
    trials: tuple[TrialResult, ...] = ()
    """Trials with a result.json, oldest first: every one, or (with ``counts``) the most
    recent window the collector sent as records."""
    counts: TrialCounts | None = None
    """The whole run's counts when they were reduced where the files lie."""
    trials_total: int | None = None
    chunks_done: int | None = None
    chunks_total: int | None = None
    newest_result_at: datetime | None = None
    stalest_chunk: str | None = None
    """Of a run of several Harbor job dirs: the unfinished chunk whose newest result.json is
    the oldest (a hung chunk beside live ones), and that result's time."""
    stalest_chunk_at: datetime | None = None
    job_mean: float | None = None
    """Harbor's own ``Mean`` from its job ``result.json`` (``stats.evals[*].metrics[0]``,
    which Harbor rewrites as each trial ends), over every chunk weighted by its completed
    trials; ``None`` when a chunk with trials has none. Harbor versions count an unscored
    trial differently (0.26: left out; later: 0), so its number is taken over ours."""
    harbor_completed: int | None = None
    """Harbor's own count of the trials that ended (its job ``result.json``'s
    ``n_completed_trials``, rewritten as each trial ends), summed over the job dirs; ``None``
    unless every job dir holding trials wrote one. It stands for the result.json count when the
    collector's count was cut short by its time bound."""
    harbor_written_at: datetime | None = None
    """The newest write of a Harbor job ``result.json`` over the job dirs (Harbor rewrites it
    as each trial starts and ends): no trial started or ended since, whatever a count cut
    short by its time bound missed."""
    eval_keys: tuple[str, ...] = ()
    """Harbor's eval keys over the job dirs (``{agent}__{model}__{dataset}``, or
    ``{agent}__{dataset}``), as its job result.json keys ``stats.evals``: who ran what."""
    exists: bool = True
    error: str | None = None
    """Why no trial root could be read (permission denied, a hung file system, a refused
    path), with ``exists`` False: its trials are unknown, never none."""
    job_dirs: tuple[str, ...] = ()
    """The Harbor job dirs this tree holds when they are not the whole root's (``own_run``: a
    run's own dirs in a ``jobs/`` shared with other runs); empty when the root is all theirs."""
    own_run: TrialTree | None = None
    """The tree of the Harbor job dirs the job's own run can have written (since it started,
    by its end), when the root also holds other runs' (Harbor's default ``jobs/`` shared by
    runs launched one after another from one directory); ``None`` when they are all its."""


STALE_SKEW = timedelta(seconds=60)
"""How far a file's mtime (the file server's clock) may read before the job's start
(the scheduler's) and still be the job's own write: an older completion file or save is an
earlier run's (a rerun into the same output dir)."""


class CompletionFile(Frozen):
    """One completion file of a finished run, read where it lies (``probes.remote.completion``)."""

    path: str
    kind: Literal["trainer_log.jsonl", "trainer_state.json"]
    current_steps: int | None = None
    total_steps: int | None = None
    finished: bool = False
    early_stopped: bool = False
    """Finished short of its total because HF's ``EarlyStoppingCallback`` stopped it."""
    written_at: datetime | None = None
    """The file's mtime on the cluster (``None`` from a recording made before it was sent)."""


class CompletionCheck(Frozen):
    """The completion files found for a COMPLETED job (empty: none was found)."""

    files: tuple[CompletionFile, ...] = ()

    @property
    def reached(self) -> CompletionFile | None:
        """The file that best answers "did it reach its total?": a finished one, else the one
        that got furthest with a known total, else ``None``."""
        known = [f for f in self.files if f.current_steps is not None and f.total_steps]
        done = [f for f in known if f.finished]
        pool = done or known
        return max(pool, key=lambda f: f.current_steps or 0) if pool else None


class JobFacts(Frozen):
    """Everything a probe learned about one job in one sweep."""

    record: SchedulerRecord
    log: LogFetch | None = None
    summary: LogSummary | None = None
    checkpoints: CheckpointListing | None = None
    trials: TrialTree | None = None
    completion: CompletionCheck | None = None
    """COMPLETED jobs only: trainer_log.jsonl / trainer_state.json (the SFT completion check)."""


ClusterStatus = Literal["ok", "unreachable", "inactive"]


class ClusterFacts(Frozen):
    """One cluster's sweep result. ``unreachable`` carries its reason in ``detail``."""

    name: str
    kind: ClusterKind
    status: ClusterStatus
    detail: str | None = None
    collected_at: datetime
    jobs: tuple[JobFacts, ...] = ()
    round_trips: int = 0
    """Remote round trips this sweep used (SSH commands or API calls)."""
