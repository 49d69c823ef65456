"""Find the real terminal signals in a log tail, and tell them apart from benign noise.

Policy (the seed's "benign log-noise" and "NOT a failure cause" sections): a line is a fault
only when it is one of the known terminal signals (a Python traceback, CUDA/host OOM, an NCCL
watchdog timeout, SIGTERM/SIGKILL, a Ray actor/raylet death, torchelastic ``ChildFailedError``,
an RPC/sampling timeout, a SLURM time limit). Signals are matched on their *positive* wording,
never on a bare keyword, so a line that merely mentions ``SIGTERM`` or ``CUDA out of memory``
(a handler being installed, a config hint) is not a fault. Harbor passthrough exceptions
(``AgentTimeoutError``, ``ContextLengthExceededError``, ...), context-overflow messages, the vLLM
shared-memory heartbeat, a huge ``rollout_train_prob_diff_mean``, bring-up chatter and each
cluster's own ``benign_patterns`` are counted in ``benign_counts`` and never become a fault,
except that the shm heartbeat co-firing with an NCCL hang (WorkNCCL timeout, debug-dump, or
SIGABRT) is reported as that hang. Lines are matched on at most ``_SCAN_CAP`` characters, so a
1 MB line costs no more than a long one. What the signals look like is
``probes.logs.fault_patterns``; how tracebacks are assembled from interleaved streams is
``probes.logs.tracebacks`` (this module decides what a finished one means); eval launch checks
(tunnel, api_base, engine 200s, auth failures) are read in the same pass by
``probes.logs.launch_checks``.

Prefilter (``probes.logs.prefilter``): the per-line rules run only on the lines that hold a needle
of some rule (signal, noise, launch check, traceback or summary start) or that a cluster
pattern may match, plus every line while a traceback is open (tracebacks consume plain
indented lines). Any other line provably changes nothing, so the result is the per-line
reference's (``prefilter=False``), which the tests compare it against.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from probes.logs.bar_lines import after_bar
from probes.logs.fault_patterns import (
    BRING_UP,
    CHATTER,
    PASSTHROUGH,
    SAMPLING_CONTEXT,
    SIGABRT,
    SIGNAL_NEEDLES,
    TIMEOUT_TYPES,
    benign_key,
    classify_line,
    may_signal,
)
from probes.logs.launch_checks import NEEDLES as LAUNCH_NEEDLES
from probes.logs.launch_checks import LaunchChecks
from probes.logs.prefilter import NeedleFilter, pattern_lines
from probes.logs.tracebacks import (
    GROUP_START,
    RAY_TASK_ERROR,
    RULE,
    TB_START,
    Traceback,
    Tracebacks,
    clip,
    exception_type,
    summary_root_cause,
)
from probes.models import Fault, FaultKind, Frozen, InfraSignals

__all__ = ["FaultScan", "scan_faults", "summary_root_cause"]

_SCAN_CAP = 32_768
_MAX_FAULTS = 100

# Ray prefixes every line of an actor's output with "(Name pid=N[, ip=X]) "; torch >= 2.4 adds
# "[rankN]: " to each child line, torchrun --tee "[default1]:", and srun --label each task's
# "1: " (right-aligned to the widest task id). All are stripped, and used to keep interleaved
# tracebacks from different processes apart.
_PREFIX = re.compile(
    r"^(?:\((?:[^()\s]+ )?pid=\d+(?:, ip=[^)\s]+)?\) ?"
    r"|\((?:raylet|gcs_server|autoscaler[^)]*|monitor)(?:, ip=[^)\s]+)?\) ?"
    r"|\[(?:rank|default)\d+\]: ?"
    r"| {0,6}\d{1,6}: )+"
)
_REPEATED = re.compile(r" \[repeated \d+x across cluster\]\s*$")

_LINE_NEEDLES = NeedleFilter(
    (
        *SIGNAL_NEEDLES,
        *LAUNCH_NEEDLES,
        *("Traceback (most recent call last):", "ray.exceptions.RayTaskError"),
        *("Exception Group Traceback (most recent call last):", "Failures:", "Root Cause"),
        "=" * 10,
    )
)
"""A line holding none of these can start nothing and match no rule (see the module policy)."""


class FaultScan(Frozen):
    """What ``scan_faults`` found in one tail."""

    faults: tuple[Fault, ...]
    benign_counts: dict[str, int]
    infra: InfraSignals
    last_engine_ok_line: int | None = None
    """The line of the engine's last 200 (``probes.logs.parse`` reads the log clock there)."""
    marks: tuple[tuple[int, datetime], ...] = ()
    """Stamped engine lines, spaced (``LaunchChecks.mark``): they time an unstamped step."""
    bring_up: bool


@dataclass
class _Hit:
    kind: FaultKind
    line_no: int
    excerpt: str
    from_traceback: bool = False
    detail: str | None = None


def _split_prefix(line: str) -> tuple[str, str]:
    """(stream key, text): the Ray/rank prefix names the stream, the rest is the message."""
    line = line[:_SCAN_CAP]
    if "%|" in line:  # a traceback or signal written right after a bar's redraw, on its line
        line = after_bar(line) or line
    match = _PREFIX.match(line)
    key = match.group(0).strip() if match else ""
    text = line[match.end() :] if match else line
    return key, _REPEATED.sub("", text)


@lru_cache(maxsize=64)
def _compile_patterns(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """Compile a cluster's benign patterns; one that is not a valid regex is taken literally."""
    out = []
    for pattern in patterns:
        try:
            out.append(re.compile(pattern))
        except re.error:
            out.append(re.compile(re.escape(pattern)))
    return tuple(out)


class _Scanner:
    """One pass over the tail; tracebacks are tracked per output stream (Ray actor / rank)."""

    def __init__(
        self,
        lines: Sequence[str],
        benign: tuple[re.Pattern[str], ...],
        first: int,
        mtime: datetime | None = None,
    ):
        self.lines = lines
        self.first = first
        self.benign = benign
        self.hits: list[_Hit | None] = []
        self.counts: Counter[str] = Counter()
        self.tracebacks = Tracebacks(self._finish, self._retract)
        self.shm: list[tuple[int, str]] = []
        self.aborts: list[tuple[int, str]] = []
        self.launch = LaunchChecks(mtime)
        self.siblings = False

    def run(self, candidates: Iterable[int] | None = None) -> None:
        """Step through ``candidates`` (default: every line), and every line while a traceback
        is open; the lines skipped hold no needle and so change nothing."""
        self.advance(candidates)
        self.tracebacks.close_all()

    def advance(self, candidates: Iterable[int] | None = None) -> None:
        """``run`` without closing the tracebacks still open at the end of ``lines``: the
        incremental read (``probes.logs.incremental``) feeds the next lines of the log later."""
        following = 0
        open_ = self.tracebacks.open
        for index in range(len(self.lines)) if candidates is None else candidates:
            while open_ and following < index:
                self._step(following)
                following += 1
            self._step(index)
            following = index + 1
        while open_ and following < len(self.lines):
            self._step(following)
            following += 1

    def _step(self, index: int) -> None:
        key, text = _split_prefix(self.lines[index])
        line_no = self.first + index
        if not self.tracebacks.feed(key, line_no, text):
            self._line(key, line_no, text)

    def _is_cluster_benign(self, text: str) -> bool:
        return any(p.search(text) for p in self.benign)

    def _line(self, key: str, line_no: int, text: str) -> None:
        low = text.lower()
        self.launch.feed(text, low, line_no)
        self._track_summary(text)
        if self._is_cluster_benign(text):
            self.counts["cluster-pattern"] += 1
        elif (header := TB_START.match(text)) is not None:
            self.tracebacks.start(key, line_no, indent=header.group("indent"))
        elif RAY_TASK_ERROR.match(text):
            self.tracebacks.start(key, line_no)
        elif GROUP_START.match(text):
            self.tracebacks.start(key, line_no, group=True)
        elif not may_signal(low):
            return
        elif (benign := benign_key(text, low)) is not None:
            if benign == "shm-broadcast":
                self.shm.append((line_no, clip(text)))
                # Stamped once a minute while the engine waits: it times an unstamped step.
                self.launch.mark(line_no, self.launch.clock.read(text))
            else:
                self.counts[benign] += 1
        elif (kind := classify_line(text, low)) is not None:
            self._hit(kind, line_no, text)
        elif SIGABRT.search(text, low):
            self.aborts.append((line_no, clip(text)))
        elif CHATTER.search(text, low):
            self.counts["debug-chatter"] += 1
        elif BRING_UP.search(text, low):
            self.counts["bring-up"] += 1

    def _hit(self, kind: FaultKind, line_no: int, text: str) -> None:
        if self.siblings and kind in {"sigterm", "sigkill"}:
            # Ranks the elastic agent stopped after the root cause failed: a consequence.
            self.counts["elastic-sibling"] += 1
        else:
            self.hits.append(_Hit(kind, line_no, clip(text)))

    def _track_summary(self, text: str) -> None:
        """Follow torchelastic's summary: its ``Failures:`` block lists stopped sibling ranks."""
        if text.startswith("Failures:"):
            self.siblings = True
        elif text.startswith("Root Cause") or (text.startswith("=") and RULE.match(text)):
            self.siblings = False

    def _finish(self, tb: Traceback) -> int:
        """A closed traceback becomes a hit (its index is returned), or -1 when benign."""
        if tb.exc is None:
            last = tb.frames[-1] if tb.frames else ""
            excerpt = clip(f"Traceback (cut off) {last}")
            self.hits.append(_Hit("traceback", tb.line_no, excerpt, from_traceback=True))
            return len(self.hits) - 1
        kind = self._traceback_kind(tb)
        if kind is None:
            return -1
        self.hits.append(_Hit(kind, tb.exc_no, clip(tb.exc), from_traceback=True))
        return len(self.hits) - 1

    def _retract(self, index: int) -> None:
        self.hits[index] = None

    def _traceback_kind(self, tb: Traceback) -> FaultKind | None:
        assert tb.exc is not None
        if self._is_cluster_benign(tb.exc):
            self.counts["cluster-pattern"] += 1
            return None
        type_name = exception_type(tb.exc)
        short = type_name.rsplit(".", 1)[-1]
        text = " ".join([tb.exc, *tb.cont])
        benign = PASSTHROUGH.get(short) or benign_key(text)
        if benign is not None and benign != "shm-broadcast":
            self.counts[benign] += 1
            return None
        kind = classify_line(text)
        if kind is None and type_name in TIMEOUT_TYPES:
            context = " ".join([*tb.frames, text])
            kind = "rpc-timeout" if SAMPLING_CONTEXT.search(context) else None
        return kind or "traceback"

    def faults(self) -> tuple[Fault, ...]:
        hits = [h for h in self.hits if h is not None]
        hang = any(h.kind == "nccl-timeout" for h in hits) or bool(self.aborts)
        if self.shm and hang:
            # The heartbeat is evidence of the hang here, not noise (seed, benign-noise list).
            if not any(h.kind == "nccl-timeout" for h in hits):
                line_no, excerpt = self.aborts[0]
                hits.append(_Hit("nccl-timeout", line_no, excerpt))
            for hit in hits:
                if hit.kind == "nccl-timeout" and hit.detail is None:
                    # The hang's own line first (a cut Trend keeps it), the heartbeat after:
                    # quoted alone it pointed the reader at the ring buffer.
                    hit.detail = (f"{hit.excerpt} (co-fires with the shm broadcast heartbeat: "
                                  f"{self.shm[0][1]})")
        elif self.shm:
            self.counts["shm-broadcast"] += len(self.shm)
        self._child_details(hits)
        hits.sort(key=lambda h: h.line_no)
        return tuple(
            Fault(kind=h.kind, line_no=h.line_no, excerpt=h.excerpt, detail=h.detail)
            for h in hits[-_MAX_FAULTS:]
        )

    def _child_details(self, hits: list[_Hit]) -> None:
        """Point each ChildFailedError at the first real traceback of its attempt."""
        ordered = sorted(hits, key=lambda h: h.line_no)
        floor = -1
        for hit in ordered:
            if hit.kind != "child-failed":
                continue
            real = (
                h
                for h in ordered
                if h.from_traceback and h.kind != "child-failed" and floor < h.line_no < hit.line_no
            )
            first = next(real, None)
            hit.detail = first.excerpt if first else self._summary_detail(hit.line_no)
            floor = hit.line_no

    def _summary_detail(self, line_no: int) -> str | None:
        start = line_no - self.first + 1
        texts = [_split_prefix(raw)[1].strip() for raw in self.lines[start : start + 120]]
        return summary_root_cause(texts)


def scan_faults(
    lines: Sequence[str],
    *,
    benign_patterns: Sequence[str] = (),
    first_line_no: int = 1,
    mtime: datetime | None = None,
    prefilter: bool = True,
) -> FaultScan:
    """Scan ANSI-stripped, ``\\r``-split log lines for faults, benign noise and launch checks.

    ``mtime`` (the file's) places the year-less stamps of engine lines (``probes.logs.clock``).
    ``prefilter=False`` puts every line through the rules: the reference the tests compare with.
    """
    benign = _compile_patterns(tuple(benign_patterns))
    scanner = _Scanner(lines, benign, first_line_no, mtime)
    needled = _LINE_NEEDLES.lines(lines) if prefilter else None
    if needled is None:  # a line holding "\n" cannot be mapped back: read every line
        scanner.run()
    else:
        extra = pattern_lines(lines, benign, lambda line: _split_prefix(line)[1])
        scanner.run(sorted(extra.union(needled)) if extra else needled)
    return _frozen(scanner)


def _frozen(scanner: _Scanner) -> FaultScan:
    faults = scanner.faults()
    return FaultScan(
        faults=faults,
        benign_counts=dict(scanner.counts),
        infra=scanner.launch.signals(),
        last_engine_ok_line=scanner.launch.last_ok_line,
        marks=tuple(scanner.launch.marks),
        bring_up=scanner.counts["bring-up"] > 0 and not faults,
    )
