"""What each terminal signal and each kind of benign noise looks like in a log line.

Policy: signals are matched on their positive wording from the tools that print them
(PyTorch, vLLM, Ray, slurmstepd, torchelastic; see ``research/formats.md`` §5-§6), never on a
bare keyword, so "SIGTERM handler is not set", "closing signal SIGTERM" (the elastic agent
stopping siblings) or a config hint that mentions OOM are not faults. Benign lines (the
seed's noise list and Harbor's passthrough exceptions) are checked before faults and win.
The scanning itself (tracebacks, co-firing, child-failed diagnosis) is ``probes.logs.faults``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probes.logs.prefilter import needle_pattern
from probes.models import FaultKind


@dataclass(frozen=True)
class Signal:
    """A regex gated by literal needles: the regex runs only when a needle is in the line.

    Every match of ``pattern`` contains at least one needle (lower-case), so the gate never
    changes a result; it keeps a 1 MiB tail of metric lines from paying for ~20 regexes.
    """

    needles: tuple[str, ...]
    pattern: re.Pattern[str]

    def search(self, text: str, low: str) -> re.Match[str] | None:
        """``pattern.search(text)`` when ``low`` (``text.lower()``) holds a needle."""
        if not any(needle in low for needle in self.needles):
            return None
        return self.pattern.search(text)


def _signal(needles: tuple[str, ...], pattern: str) -> Signal:
    return Signal(needles, re.compile(pattern))


PASSTHROUGH = {
    "AgentTimeoutError": "agent-timeout",
    "ContextLengthExceededError": "context-overflow",
    "ContextWindowExceededError": "context-overflow",
    "OutputLengthExceededError": "output-length",
}
"""Harbor passthrough exceptions: the trial is still scored; never a failure cause."""

TIMEOUT_TYPES = frozenset(
    {"TimeoutError", "asyncio.TimeoutError", "asyncio.exceptions.TimeoutError"}
)
SAMPLING_CONTEXT = re.compile(
    r"(?i)sampl|engine|generat|vllm|sglang|inference|rollout|\b(?:g?rpc)\b"
)
"""A bare TimeoutError is an RPC/sampling timeout only when raised around sampling code."""

_BENIGN: tuple[tuple[str, Signal], ...] = (
    # vLLM's ring-buffer heartbeat, all three historical wordings.
    (
        "shm-broadcast",
        _signal(
            ("no available",),
            r"No available (?:shared memory broadcast )?block found in \d+ second",
        ),
    ),
    (
        "agent-timeout",
        _signal(
            ("agenttimeouterror", "agent execution timed out"),
            r"\bAgentTimeoutError\b|Agent execution timed out after",
        ),
    ),
    (
        "output-length",
        _signal(("outputlengthexceedederror",), r"\bOutputLengthExceededError\b"),
    ),
    (
        "context-overflow",
        _signal(
            (
                "input tokens",
                "maximum context length",
                "contextlengthexceedederror",
                "contextwindowexceedederror",
                "prompt is too long",
                "maximum model length",
                "model context limit",
            ),
            r"\d+ input tokens > \d+ max|maximum context length is|\bContextLengthExceededError\b"
            r"|\bContextWindowExceededError\b|prompt is too long"
            r"|is longer than the maximum model length|exceeds model context limit",
        ),
    ),
)
_PROB_DIFF = _signal(
    ("rollout_train_prob_diff_mean",),
    r"rollout_train_prob_diff_mean['\"]?\s*[:=]\s*(?:np\.\w+\()?\s*"
    r"([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|inf))",
)
_PROB_DIFF_HUGE = 1e6
"""Millions and billions are normal on healthy arms (seed, RL section)."""

_SRUN_TASKS = r"tasks? \[?\d+(?:[-,]\d+)*\]?"
"""srun's task list in its task-end lines: ``task 3``, ``tasks 0-7``, ``tasks 0,2-7``."""

_RULES: tuple[tuple[FaultKind, Signal], ...] = (
    (
        "oom",
        _signal(
            ("out of memory", "oom_kill", "oom-kill", "outofmemoryerror", "memory pressure"),
            r"OutOfMemoryError: CUDA out of memory|CUDA out of memory\. Tried to allocate"
            r"|CUDA error: out of memory|Detected \d+ oom[-_]kill events?(?:\(s\))?"
            r"|ray\.exceptions\.OutOfMemoryError|\b" + _SRUN_TASKS + r": Out Of Memory\b"
            r"|(?:^|\D)(?!0 )\d+ Workers \(tasks / actors\) killed due to memory pressure",
        ),
    ),
    (
        "nccl-timeout",
        _signal(
            ("worknccl", "watchdog", "dump"),
            r"Watchdog caught collective operation timeout: WorkNCCL\("
            r"|watchdog got stuck for \d+ seconds"
            r"|Received a dump signal due to a collective timeout|preparing to dump debug info",
        ),
    ),
    ("child-failed", _signal(("childfailederror",), r"\bChildFailedError\b")),
    (
        "raylet-died",
        _signal(
            (
                "actordiederror",
                "rayactorerror",
                "raylet died",
                "too many heartbeats",
                "a worker died",
            ),
            r"\bActorDiedError\b|\bRayActorError\b|The Raylet died"
            r"|marked dead because the detector has missed too many heartbeats"
            r"|A worker died or was killed while executing a task",
        ),
    ),
    (
        "rpc-timeout",
        _signal(
            ("deadline_exceeded", "timed out", "rpc timeout"),
            r"StatusCode\.DEADLINE_EXCEEDED|RpcError\b.*DEADLINE_EXCEEDED"
            r"|(?i:\bgrpc\b.*\btimed out\b)|(?i:\bsampling (?:\w+ )?timed out\b)"
            r"|(?i:\btimed out (?:while |during )?sampling\b)|(?i:\bRPC (?:call )?timed out\b)"
            r"|(?i:\bRPC timeout\b)(?!\s*(?:=|:|to\b|of\b|is\b|set\b))",
        ),
    ),
    ("time-limit", _signal(("time limit",), r"CANCELLED AT \S+ DUE TO TIME LIMIT")),
    (
        "sigkill",
        _signal(
            ("sigkill", "exitcode", "killed", "got signal"),
            r"Signal 9 \(SIGKILL\)|exitcode\s*:\s*-9\b|^\s*Killed\s*$|\bline \d+:\s+\d+ Killed\b"
            r"|\bSignalException: Process \d+ got signal: 9\b"  # torchrun's agent, killed
            r"|\b" + _SRUN_TASKS + r": Killed\b"
            r"|(?i:\b(?:received|got|caught) (?:signal )?)(?:Signals\.)?SIGKILL\b",
        ),
    ),
    (
        "sigterm",
        _signal(
            # " terminated", not TRL's "mean_terminated_length"; "got signal": torchrun's
            # agent, "SignalException: Process N got signal: 15"
            ("sigterm", "exitcode", " terminated", "got signal"),
            r"Signal 15 \(SIGTERM\)|exitcode\s*:\s*-15\b|(?i:DUE TO SIGNAL) Terminated"
            r"|\bSignalException: Process \d+ got signal: 15\b"
            r"|(?i:\b(?:received|receiving|got|caught) (?:signal )?)(?:Signals\.)?SIGTERM\b"
            r"|\bSIGTERM (?:received|caught)\b|\b" + _SRUN_TASKS + r": Terminated\b",
        ),
    ),
    # srun's own line for tasks that ended badly (``srun: error: HOSTS: task(s) N: ...``): an
    # exit code, or a signal none of the rules above names (a segfault, an abort). Last, so
    # Killed / Terminated / Out Of Memory keep their kinds.
    (
        "task-exit",
        _signal(
            ("srun: error:",),
            r"\bsrun: error: \S+: " + _SRUN_TASKS
            + r": (?:Exited with exit code [1-9]\d*|(?!Completed\b)[A-Z][a-z]+(?: [a-z]+)*"
            r"(?: \(core dumped\))?)\s*$",
        ),
    ),
)
_ASYNC_TIMEOUT = _signal(("timeouterror",), r"\basyncio\.(?:exceptions\.)?TimeoutError\b")

SIGABRT = _signal(
    ("sigabrt", "exitcode", "error: aborted"),  # not "aborted": metric names hold it
    r"Signal 6 \(SIGABRT\)|\bSIGABRT\b|exitcode\s*:\s*-6\b|Fatal Python error: Aborted",
)
"""Not a fault alone; with the shm heartbeat it is NCCL-hang evidence (seed)."""

CHATTER = _signal(("opcount", "debug"), r"\bopCount\b|(?i:\bdebug[ _-]?tokens?\b)")
BRING_UP = _signal(
    (
        "loading",
        "mesh",
        "pulling image",
        "pulled image",
        "gang",
        "admi",
        "waiting for",
        "nccl",
        "init_process_group",
        "ray instance",
        "ray cluster",
        "capturing cuda graph",
        "memory profiling",
        "vllm api server",
        "uvicorn",
        "placement group",
        "queue",
    ),
    r"Loading checkpoint shards|(?i:loading (?:the )?(?:model )?weights)|Loading safetensors"
    r"|Model loading took|\bmesh\b|(?i:pulling image)|Successfully pulled image|\bgang\b"
    r"|(?i:\badmi(?:ssion|tted)\b)|Waiting for|NCCL INFO|NCCL version|init_process_group"
    r"|Started a local Ray instance|Connecting to existing Ray cluster|Capturing CUDA graph"
    r"|Memory profiling|Starting vLLM API server|Uvicorn running on|placement group"
    r"|(?i:\bqueued\b|queue position)",
)


_ALL_SIGNALS = (
    *(signal for _, signal in _BENIGN),
    *(signal for _, signal in _RULES),
    _PROB_DIFF,
    _ASYNC_TIMEOUT,
    SIGABRT,
    CHATTER,
    BRING_UP,
)
SIGNAL_NEEDLES = frozenset(n for signal in _ALL_SIGNALS for n in signal.needles)
"""Every needle of every signal and noise pattern: a line holding none of them matches none."""
_ANY_NEEDLE = needle_pattern(SIGNAL_NEEDLES)


def may_signal(low: str) -> bool:
    """False when no signal or noise pattern can match (the common metric line): one search."""
    return _ANY_NEEDLE.search(low) is not None


def benign_key(text: str, low: str | None = None) -> str | None:
    """The benign-noise key of a line (``shm-broadcast``, ``context-overflow``, ...), if any."""
    low = text.lower() if low is None else low
    for key, signal in _BENIGN:
        if signal.search(text, low):
            return key
    match = _PROB_DIFF.search(text, low)
    if match:
        try:
            if abs(float(match.group(1))) >= _PROB_DIFF_HUGE:
                return "prob-diff"
        except ValueError:
            return None
    return None


def classify_line(text: str, low: str | None = None) -> FaultKind | None:
    """The fault kind a single (prefix-stripped) line announces, if any."""
    low = text.lower() if low is None else low
    for kind, signal in _RULES:
        if signal.search(text, low):
            return kind
    if _ASYNC_TIMEOUT.search(text, low) and SAMPLING_CONTEXT.search(text):
        return "rpc-timeout"
    return None
