"""What each terminal signal and each kind of benign noise looks like in a log line.

Policy: signals are matched on their positive wording from the tools that print them
(PyTorch, vLLM, Ray, slurmstepd, torchelastic; see ``research/formats.md`` §5-§6), never on a
bare keyword, so "SIGTERM handler is not set", "closing signal SIGTERM" (the elastic agent
stopping siblings) or a config hint that mentions OOM are not faults. Benign lines (the
seed's noise list and Harbor's passthrough exceptions) are checked before faults and win.
The scanning itself (tracebacks, co-firing, child-failed diagnosis) is ``probes.faults``.
"""

from __future__ import annotations

import re

from probes.models import FaultKind

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

_BENIGN: tuple[tuple[str, re.Pattern[str]], ...] = (
    # vLLM's ring-buffer heartbeat, all three historical wordings.
    (
        "shm-broadcast",
        re.compile(r"No available (?:shared memory broadcast )?block found in \d+ second"),
    ),
    ("agent-timeout", re.compile(r"\bAgentTimeoutError\b|Agent execution timed out after")),
    ("output-length", re.compile(r"\bOutputLengthExceededError\b")),
    (
        "context-overflow",
        re.compile(
            r"\d+ input tokens > \d+ max|maximum context length is|\bContextLengthExceededError\b"
            r"|\bContextWindowExceededError\b|prompt is too long"
            r"|is longer than the maximum model length|exceeds model context limit"
        ),
    ),
)
_PROB_DIFF = re.compile(
    r"rollout_train_prob_diff_mean['\"]?\s*[:=]\s*(?:np\.\w+\()?\s*"
    r"([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|inf))"
)
_PROB_DIFF_HUGE = 1e6
"""Millions and billions are normal on healthy arms (seed, RL section)."""

_RULES: tuple[tuple[FaultKind, re.Pattern[str]], ...] = (
    (
        "oom",
        re.compile(
            r"OutOfMemoryError: CUDA out of memory|CUDA out of memory\. Tried to allocate"
            r"|CUDA error: out of memory|Detected \d+ oom_kill events?\b"
            r"|ray\.exceptions\.OutOfMemoryError|\btask \d+: Out Of Memory\b"
            r"|(?:^|\D)(?!0 )\d+ Workers \(tasks / actors\) killed due to memory pressure"
        ),
    ),
    (
        "nccl-timeout",
        re.compile(
            r"Watchdog caught collective operation timeout: WorkNCCL\("
            r"|watchdog got stuck for \d+ seconds"
            r"|Received a dump signal due to a collective timeout|preparing to dump debug info"
        ),
    ),
    ("child-failed", re.compile(r"\bChildFailedError\b")),
    (
        "raylet-died",
        re.compile(
            r"\bActorDiedError\b|\bRayActorError\b|The Raylet died"
            r"|marked dead because the detector has missed too many heartbeats"
            r"|A worker died or was killed while executing a task"
        ),
    ),
    (
        "rpc-timeout",
        re.compile(
            r"StatusCode\.DEADLINE_EXCEEDED|RpcError\b.*DEADLINE_EXCEEDED"
            r"|(?i:\bgrpc\b.*\btimed out\b)|(?i:\bsampling (?:\w+ )?timed out\b)"
            r"|(?i:\btimed out (?:while |during )?sampling\b)|(?i:\bRPC (?:call )?timed out\b)"
            r"|(?i:\bRPC timeout\b)(?!\s*(?:=|:|to\b|of\b|is\b|set\b))"
        ),
    ),
    ("time-limit", re.compile(r"CANCELLED AT \S+ DUE TO TIME LIMIT")),
    (
        "sigkill",
        re.compile(
            r"Signal 9 \(SIGKILL\)|exitcode\s*:\s*-9\b|^\s*Killed\s*$|\bline \d+:\s+\d+ Killed\b"
            r"|\btask \d+: Killed\b"
            r"|(?i:\b(?:received|got|caught) (?:signal )?)(?:Signals\.)?SIGKILL\b"
        ),
    ),
    (
        "sigterm",
        re.compile(
            r"Signal 15 \(SIGTERM\)|exitcode\s*:\s*-15\b|(?i:DUE TO SIGNAL) Terminated"
            r"|(?i:\b(?:received|receiving|got|caught) (?:signal )?)(?:Signals\.)?SIGTERM\b"
            r"|\bSIGTERM (?:received|caught)\b|\btask \d+: Terminated\b"
        ),
    ),
)
_ASYNC_TIMEOUT = re.compile(r"\basyncio\.(?:exceptions\.)?TimeoutError\b")

SIGABRT = re.compile(
    r"Signal 6 \(SIGABRT\)|\bSIGABRT\b|exitcode\s*:\s*-6\b|Fatal Python error: Aborted"
)
"""Not a fault alone; with the shm heartbeat it is NCCL-hang evidence (seed)."""

CHATTER = re.compile(r"\bopCount\b|(?i:\bdebug[ _-]?tokens?\b)")
BRING_UP = re.compile(
    r"Loading checkpoint shards|(?i:loading (?:the )?(?:model )?weights)|Loading safetensors"
    r"|Model loading took|\bmesh\b|(?i:pulling image)|Successfully pulled image|\bgang\b"
    r"|(?i:\badmi(?:ssion|tted)\b)|Waiting for|NCCL INFO|NCCL version|init_process_group"
    r"|Started a local Ray instance|Connecting to existing Ray cluster|Capturing CUDA graph"
    r"|Memory profiling|Starting vLLM API server|Uvicorn running on|placement group"
    r"|(?i:\bqueued\b|queue position)"
)


def benign_key(text: str) -> str | None:
    """The benign-noise key of a line (``shm-broadcast``, ``context-overflow``, ...), if any."""
    for key, pattern in _BENIGN:
        if pattern.search(text):
            return key
    match = _PROB_DIFF.search(text)
    if match:
        try:
            if abs(float(match.group(1))) >= _PROB_DIFF_HUGE:
                return "prob-diff"
        except ValueError:
            return None
    return None


def classify_line(text: str) -> FaultKind | None:
    """The fault kind a single (prefix-stripped) line announces, if any."""
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    if _ASYNC_TIMEOUT.search(text) and SAMPLING_CONTEXT.search(text):
        return "rpc-timeout"
    return None
