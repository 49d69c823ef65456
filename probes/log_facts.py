"""What a probe learns from a job's log: metric points, the progress bar, faults and infra
signals, the run's fingerprint and outcome, a planned stop, the log's summary, how it was
fetched.

Policy: as :mod:`probes.models` (which re-exports every name here): frozen, no unknown fields,
a fact we could not establish is ``None``, never a made-up zero. The log parsers
(:mod:`probes.logs`) fill these; the report layer judges them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from probes.fact_base import Frozen, LogTime


class MetricPoint(Frozen):
    """One logged training step: canonical metric name -> value (NaN/inf kept as floats)."""

    step: int
    values: dict[str, float]
    line_no: int | None = None
    wall_time: LogTime | None = None


class ProgressBar(Frozen):
    """The training progress bar (never a tokenizer/packing bar)."""

    current: int
    total: int
    elapsed_s: float | None = None
    sec_per_it: float | None = None


TerminalSignal = Literal[
    "traceback",
    "oom",
    "nccl-timeout",
    "sigterm",
    "sigkill",
    "raylet-died",
    "child-failed",
    "rpc-timeout",
    "nan-loss",
]
"""Fault kinds that are a job's real terminal signal; each is also a report flag."""
FaultKind = Literal[TerminalSignal, "time-limit", "task-exit"]
"""``time-limit`` is the walltime TIMEOUT itself: the scheduler's state already says it.
``task-exit`` is srun's line for tasks that ended badly (``task 3: Exited with exit code 1``):
no flag of its own (the job's state says it failed), but the line a diagnosis quotes when the
log shows nothing earlier."""


class Fault(Frozen):
    """A real terminal signal found in a log (benign lines never become a Fault)."""

    kind: FaultKind
    line_no: int
    excerpt: str
    """The line that matters, e.g. ``RuntimeError: CUDA error: out of memory``."""
    detail: str | None = None
    """For child-failed/traceback: the first real traceback's last line (the diagnosis)."""


class InfraSignals(Frozen):
    """Eval/datagen launch checks read from a log; ``None`` means the log says nothing."""

    tunnel_ok: bool | None = None
    api_base: str | None = None
    api_base_internal: bool | None = None
    engine_ok_requests: int | None = None
    """Count of engine requests answered 200 in the tail."""
    last_engine_ok_at: LogTime | None = None
    auth_failures: int = 0
    tunnel_auth_failures: int = 0
    """Of ``auth_failures``, those the tunnel logged (its credentials refused)."""
    engine_auth_failures: int = 0
    """Of ``auth_failures``, the engine's own 401/403 answers (the agents' key refused)."""
    engine_running_requests: int | None = None
    """The latest ``Running: N reqs`` (vLLM) / ``#running-req: N`` (SGLang) snapshot."""
    engine_zero_since: LogTime | None = None
    """When the current run of zero-running snapshots began (``None``: the latest is not 0)."""
    engine_stuck_since: LogTime | None = None
    """When the current run of snapshots with requests running at 0 tokens/s began (``None``:
    the latest snapshot generated, had none running, or gave no rate)."""
    engine_busy_at: LogTime | None = None
    """The latest engine line showing work (an SGLang batch, a vLLM stats line with requests
    running or tokens generated): an engine logs its stats only while it has work, so its
    silence since is an engine that stopped (``None``: no such line, or vLLM's idle line after
    it)."""
    engine_log_newest: LogTime | None = None
    """When the engine fields above come from the engine's own log (``vllm_<jobid>.log``):
    that log's newest stamp, its clock (the job log's says nothing of the engine's times)."""
    engine_log_mtime: datetime | None = None
    """That engine log's mtime (zone-aware), with ``engine_log_newest`` its clock."""
    engine_log_path: str | None = None
    """That engine log's path (the log the engine checks read)."""
    engine_5xx_recent: int = 0
    """5xx answers among the engine's last ``RECENT_RESPONSES`` (launch checks) answers."""
    engine_recent_responses: int = 0
    """How many answers that window holds (it is shorter early in a log)."""


class RunFingerprint(Frozen):
    """What a run runs, as its launcher/trainer printed it (config dump, args, banner).

    Filled by ``probes.logs.fingerprint``; ``None`` fields were not printed. ``config`` is the
    flattened dump (dotted keys -> printed value), bounded; judging it is ``report``'s job.
    """

    trainer: str | None = None
    """Which trainer's dump was read: ``verl``, ``skyrl``, ``hf``, ``deepspeed``, ``megatron``."""
    model: str | None = None
    image: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    world_size: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    prompts_per_step: int | None = None
    samples_per_prompt: int | None = None
    rollouts_per_step: int | None = None
    """prompts x samples per prompt (or the trainer's completions per optimizer step)."""
    pass_at_k: int | None = None
    """The N of the ``reward/avg_pass_at_N`` the trainer logs."""
    config: dict[str, str] = Field(default_factory=dict)


class LogOutcome(Frozen):
    """The one line a catch-all job's log ends on (``probes.logs.outcome``)."""

    pytest_summary: str | None = None
    """pytest's closing tally, e.g. ``2 passed, 1 warning``."""
    pushed: str | None = None
    """What an upload pushed, e.g. ``6,977 rows -> org/dataset`` or ``s3://bucket/key``."""


class PlannedStop(Frozen):
    """A trainer's own line that it stopped ahead of its time budget
    (``probes.logs.planned_stop``)."""

    line_no: int
    """Its line in the log (numbered as ``MetricPoint.line_no``)."""
    text: str
    """The trainer's words, e.g. ``exiting program after 239 minutes``."""


class LogSummary(Frozen):
    """Everything a bounded log tail says, independent of which trainer wrote it."""

    line_count: int
    points: tuple[MetricPoint, ...] = ()
    """Metric history in step order; a repeated step (resume) keeps its last value."""
    formats: tuple[str, ...] = ()
    """Formats recognised, e.g. ``skyrl``, ``verl``, ``hf``, ``harbor``."""
    total_steps: int | None = None
    progress: ProgressBar | None = None
    sec_per_step: float | None = None
    """Trailing-window rate (Δwall/Δstep over several steps), robust to one save spike."""
    faults: tuple[Fault, ...] = ()
    benign_counts: dict[str, int] = Field(default_factory=dict)
    checkpoint_steps: tuple[int, ...] = ()
    """Steps the log says were saved (corroboration only; banked steps come from disk)."""
    rollouts_per_step: int | None = None
    harbor_done: int | None = None
    harbor_total: int | None = None
    harbor_mean: float | None = None
    harbor_metric: str | None = None
    """The metric Harbor's row names: ``Mean``, or a reward key's own name (``Accuracy``) when the
    reward files carry several keys."""
    infra: InfraSignals = Field(default_factory=InfraSignals)
    last_timestamp: LogTime | None = None
    step_quiet_since: LogTime | None = None
    """When the last logged step's line has no stamp: the first stamp read after it (a vLLM
    stats or heartbeat line, ``probes.logs.launch_checks.quiet_since``), so the step is at least
    that old. Ray-forwarded trainers (verl) print unstamped steps; a hung run's engine goes on
    printing stamped heartbeats, which keep the file fresh."""
    finished: bool = False
    """The trainer said it finished (``Training done!``, ``train_runtime`` dict, ...)."""
    steps_unanchored: bool = False
    """The points' steps are only their order: bar-less HF dicts of a tail cut from a longer
    log, with no banner, epoch or checkpoint save to place them (``probes.logs.history``).
    Their metrics stand; no step is claimed from them."""
    relaunch_line: int | None = None
    """The line where the trainer started again in the same log: its start line (verl's
    ``Total training steps``, HF's ``Total optimization steps``, prime-rl's ``Starting training
    loop``) printed a second time, as a restart appended to its old log (``--open-mode=append``,
    a requeue) or a retry in the job's script prints it. What the log holds above it is an
    earlier launch's (a live job's faults there are not its own: ``report.judge``)."""
    planned_stop: PlannedStop | None = None
    """The last line saying the trainer stopped ahead of its time budget for a successor to
    resume (NeMo-RL's ``checkpoint_must_save_by``, Megatron's ``--exit-duration-in-mins`` /
    ``--exit-interval``): its exit 0 is no finish."""
    bring_up: bool = False
    """Only bring-up lines so far (mesh load, image pull, admission): buffer-filling."""
    # issue 11 (wt-e): run fingerprint and catch-all outcome, from probes.logs.{fingerprint,outcome}
    fingerprint: RunFingerprint | None = None
    outcome: LogOutcome | None = None


LogStatus = Literal["ok", "mismatch", "missing", "failed"]


# issue 12 (wt-d): what a job keeps of its tail once parsed (``probes.logs.excerpt``)
class LogContext(Frozen):
    """Lines of a tail around one fault, kept once the tail is parsed."""

    line_no: int
    """The fault's line in the tail (1-based, as ``Fault.line_no``)."""
    text: str
    """``CONTEXT_LINES`` (20) lines, the fault's the tenth, each cut at ``LINE_CHARS`` (500)."""


class LogFetch(Frozen):
    """How a job's log was located and read, and what a job keeps of it.

    ``text`` is the whole tail only between its read and its parse: assembly
    (``probes.logs.excerpt.retain``) keeps its last lines and the bounded excerpts below, so a
    job's retained log is ~57 K characters at most whatever ``tail_bytes`` is.
    """

    requested_path: str | None = None
    """The scheduler's StdOut (SLURM) or ``pod/<name>`` (Kubernetes)."""
    path: str | None = None
    """The log actually read."""
    status: LogStatus
    error: str | None = None
    size: int | None = None
    mtime: datetime | None = None
    text: str = ""
    """The tail as read, decoded with replacement characters; once assembled, its last
    ``TAIL_LINES`` (400) lines within ``TAIL_CHARS`` (16 KiB), a suffix of the tail."""
    offset: int = 0
    """Byte offset in the file where the tail read starts."""
    attempts: int = 1
    # issue 12 (wt-d): bounded excerpts of the whole tail, filled by probes.logs.excerpt.retain
    text_line: int = 1
    """The tail's line number (1-based, ``str.splitlines``) of ``text``'s first line."""
    contexts: tuple[LogContext, ...] = ()
    """Around the first ``MAX_CONTEXTS`` (3) faults by line (``jobtables job``'s excerpt)."""
    last_context: str | None = None
    """The tail's last ``CONTEXT_LINES`` lines cut at ``LINE_CHARS``, when ``text`` holds fewer."""
    tally_line: str | None = None
    """The tail's last line with a count of tests/rows/files/... when it lies above ``text``."""
    agent_marked: bool = False
    """The tail names agent configuration or agentic trial lines (``AGENT_MARKERS``)."""
    trials_in_object_store: bool = False
    """The tail names an object-store URI for its trials (``object_store_trials``)."""
