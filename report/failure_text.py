"""What a failed job's log and record say, in words a row quotes: the first fault, its text,
the diagnosis, the failing line and the log excerpt.

Policy: the earliest real fault is the diagnosis (later ones are usually its consequences),
quoted in its own words (a c10/glog line head left out; srun's task-end line with its tasks
and end first, hosts last); with no fault, the exit, the scheduler's reason where it says
more, or the eviction the kubelet names; a FAILED job whose log has no fault gets its failing
line (a pytest summary, an exception line, an error word). Pure: facts in, text out.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from probes.logs.excerpt import CONTEXT_LINES, cut_line
from probes.logs.fault_patterns import benign_key
from probes.logs.lines import strip_ansi
from probes.models import Fault, JobFacts, JobState

if TYPE_CHECKING:  # annotation only: report.findings imports this module
    from report.findings import JudgeContext


EXCERPT_LINES = CONTEXT_LINES

AGENT_LOGS_NOTE = "record it in a dated incident note"
"""The rulebook's 'Genuine FAILED -> diagnose + dated agent_logs/ entry', as the last step of a
failure's recommendation, which first says what happened in the job's own words. In a user's
words: ``agent_logs/`` is the rulebook's agent's own directory, no place of the job owner's; the
bot's dated record of a failure is its incident file (``slack.incident_dir``), named in the
thread's failure line."""
FAILED_NEXT = f"; find the cause before resubmitting, and {AGENT_LOGS_NOTE}"
"""What to do about a genuine failure, after what happened (a ``diagnose``'s why)."""


def first_fault(facts: JobFacts) -> Fault | None:
    """The earliest real terminal signal in the log (later ones are usually consequences)."""
    faults = [x for x in (facts.summary.faults if facts.summary else ()) if x.kind != "time-limit"]
    return min(faults, key=lambda x: x.line_no) if faults else None


_EXIT_REASONS = frozenset({"NonZeroExitCode", "None", "EndJob"})
"""Scheduler reasons that only restate the exit a diagnosis already quotes."""
_ENDED_FROM_OUTSIDE = {
    JobState.NODE_FAIL: "its node failed, not the job; resubmit",
    JobState.PREEMPTED: "preempted, not the job's fault; resubmit",
}
"""States in which the scheduler ended the job, not its own exit (SLURM records 0:0)."""
_OWN_USAGE = re.compile(
    r"Container \S+ was using \S+, request is \S+, has larger consumption of"
    r"|Pod ephemeral local storage usage exceeds the total limit"
    r"|Usage of EmptyDir volume \S+ exceeds the limit")
"""The kubelet's eviction messages (``pkg/kubelet/eviction/helpers.go``) that name the pod's
own usage: its node did not fail it, what it used did (a resubmit is evicted again)."""
OWN_USAGE_ADVICE = ("evicted for its own usage, not a node failure: raise its request (or "
                    "limit) to what it uses, or use less, before resubmitting")
_SRUN_TASK_LINE = re.compile(
    r"\bsrun: error: (?P<hosts>\S+): (?P<tasks>tasks? \S+): (?P<end>.*\S)\s*$")


_C10_PREFIX = re.compile(
    r"^(?:\[rank\d+\]:)?\[?[IWEF](?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)?)? +[^\]\s]+:\d+\] "
    r"(?:\[(?:PG ID \d+ PG GUID \S+ )?Rank \d+\] +)?")
"""c10/glog's line head: severity, time, thread, source and rank, which would fill a Trend cell
before the fault. glog's ``[E1203 10:16:10.512345 2211 ProcessGroupNCCL.cpp:632] [Rank 3] ``;
torch's own c10 logger's ``[rank1]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 1] ``
(month unpadded, no thread; torch 2.4-2.6) and ``[E ProcessGroupNCCL.cpp:577] `` (about 2.2)."""


def fault_text(fault: Fault) -> str:
    """What a fault says, as a Trend quotes it: its ``detail`` (``child-failed``: the first
    real traceback), else its line. srun's task-end line (``srun: error: node12: task 3:
    Exited with exit code 1``) is put tasks and end first, hosts last, so a cut Trend loses
    the hosts, never the task or its exit code. A c10/glog line head (torch's NCCL watchdog)
    is left out: the words of the fault come first."""
    if fault.detail:
        return _C10_PREFIX.sub("", fault.detail, count=1)
    return fault_words(fault.excerpt)


def fault_words(line: str) -> str:
    """A fault's line as a Trend quotes it (:func:`fault_text`): srun's task-end line
    reordered, a c10/glog line head left out; what quotes the whole line (a job-end DM) tells
    by it whether the Trend says anything more."""
    match = _SRUN_TASK_LINE.search(line)
    if match is None:
        return _C10_PREFIX.sub("", line, count=1)
    return f"srun {match['tasks']}: {match['end']} ({match['hosts']})"


def diagnosis(facts: JobFacts) -> str:
    """One line saying why the job died: the first fault's detail/excerpt, else the exit.

    The first fault is the earliest real signal, so a traceback above a masking summary
    (torchelastic's, or srun's task-end line) is quoted, not the summary; srun's line is the
    diagnosis only when nothing above it says more."""
    fault = first_fault(facts)
    if fault is not None:
        return f"{fault.kind}: {fault_text(fault)}"
    record = facts.record
    outside = _ENDED_FROM_OUTSIDE.get(record.state)
    if outside is not None:  # SLURM ended it (exit 0:0): no exit of its own to quote
        reason = record.reason if record.reason not in (None, *_EXIT_REASONS) else None
        if reason and _OWN_USAGE.search(reason):  # a Kubernetes node-pressure eviction
            outside = OWN_USAGE_ADVICE
        return f"{record.state.value}{f' ({reason})' if reason else ''}: {outside}"
    if record.exit_signal:
        why = f"{record.state.value} by signal {record.exit_signal}"
    elif record.exit_code is not None:
        why = f"{record.state.value} exit {record.exit_code}"
    else:
        return record.state.value + (f" ({record.reason})" if record.reason else "")
    # SLURM's reason says what the exit cannot: a batch script that never started (its StdOut
    # unwritable) ends 'FAILED by signal 53', which is no signal the job got; where the
    # collector found why (its StdOut dir absent), that is said instead of the signal.
    reason = record.reason
    if reason and reason not in _EXIT_REASONS and not reason.startswith("RaisedSignal"):
        log = facts.log
        if reason == "JobLaunchFailure" and log is not None and log.status == "missing" \
                and log.error:  # why SLURM could not start it, as the collector found
            return f"{record.state.value} at launch ({reason}): {log.error}"
        return f"{why} ({reason})"
    return why


def log_excerpt(facts: JobFacts) -> str:
    """The fault's context in the log tail, else its last lines (for ``jobtables job``), each
    line cut at ``LINE_CHARS``.

    A job keeps the context of its first faults and its tail's last lines, not the tail
    (``probes.logs.excerpt``); ``text_line`` numbers the kept lines in the tail."""
    log = facts.log
    fault = first_fault(facts)
    if log is not None and fault is not None:
        kept = next((c.text for c in log.contexts if c.line_no == fault.line_no), None)
        if kept is not None:
            return kept
    if fault is None:
        if log is not None and log.last_context is not None:
            return log.last_context
        # Only the last lines are split (and cut): splitting the whole 16 KiB tail of every
        # job for its last 20 lines was most of this function's cost in a sweep.
        return "\n".join(map(cut_line, last_lines(log.text, EXCERPT_LINES) if log else []))
    # Only the excerpt's own lines are cut: cutting all 400 kept lines of every job's tail
    # was a third of a warm sweep's judging.
    lines = log.text.splitlines() if log else []
    first = log.text_line if log else 1
    if first <= fault.line_no < first + len(lines):
        start = max(0, fault.line_no - first + 1 - EXCERPT_LINES // 2)
        return "\n".join(map(cut_line, lines[start : start + EXCERPT_LINES]))
    if not lines:
        return "\n".join(x for x in (fault.excerpt, fault.detail) if x)
    if log is not None and log.last_context is not None:
        return log.last_context
    return "\n".join(map(cut_line, lines[-EXCERPT_LINES:]))


def last_lines(text: str, count: int) -> list[str]:
    """``text.splitlines()[-count:]``, splitting only the text after its ``count + 1``-th last
    ``\\n``: a ``\\n`` ends a line whatever precedes it (``\\r\\n`` is one break), so that
    suffix starts a line and holds at least ``count`` lines, the text's last ones."""
    if count <= 0:
        return text.splitlines()[-count:]
    cut = len(text)
    for _ in range(count + 1):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            break
    return text[cut + 1 :].splitlines()[-count:]


_PYTEST_FAILED_LINE = re.compile(r"(?m)^[ \t]*(?:FAILED|ERROR) \S+::\S+")
_ERROR_WORDS = ("error", "fatal", "failed")
_EXCEPTION_LINE = re.compile(r"(?m)^[ \t]*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception):")
"""A Python exception's last line (``RuntimeError: boom``, ``torch.cuda.OutOfMemoryError:``)."""
FAILURE_LINES = 400
"""The log's last lines a faultless failure's failing line is looked for in."""


def failing_line(facts: JobFacts) -> str | None:
    """The line a log with no fault (no traceback, OOM or signal) failed on: the first failing
    pytest test (``FAILED path::test``), else the last line naming an error (BuildKit's
    ``ERROR: failed to solve: ...``, ``python: No module named pytest``); None if neither.

    Only the log's end is searched (pytest's short summary, the build's last error): a cost
    bounded by ``FAILURE_LINES``, not the tail's length, one search each, not one a line.
    pytest's line is looked for only where its node ids' ``::`` and a ``FAILED``/``ERROR``
    word are in the text: the anchored search tries every position of the tail."""
    text = facts.log.text if facts.log else ""
    # A coloured level (logging/loguru with colours forced, Ray's prefixes) glues its escape
    # to the word ('\x1b[31mERROR'): searched and quoted without the escapes.
    tail = strip_ansi("\n".join(last_lines(text or "", FAILURE_LINES)))
    pytest_like = "::" in tail and ("FAILED" in tail or "ERROR" in tail)
    failed = _PYTEST_FAILED_LINE.search(tail) if pytest_like else None
    at = failed.start() if failed is not None else _last_error_line(tail)
    line = _line_at(tail, at).strip() if at is not None else ""
    return line or None


def failure_why(ctx: JudgeContext) -> str:
    """:func:`diagnosis`, with the failing line (``ctx.failed_on``) when the job FAILED and no
    fault says more than the exit."""
    why = diagnosis(ctx.facts)
    line = ctx.failed_on
    return f"{why}: {line}" if line else why


def _last_error_line(text: str) -> int | None:
    """Where the last line naming an error starts: a whole word error/fatal/failed, or a
    Python exception line without its traceback (``RuntimeError: ...``, ``KeyError: 'x'``:
    the seed counts a RuntimeError among the real terminal signals)."""
    word = _last_error_word(text)
    found = list(_EXCEPTION_LINE.finditer(text)) if "Error" in text or "Exception" in text else []
    # A passthrough exception (AgentTimeoutError, ContextLengthExceededError) is benign noise,
    # never why a job failed.
    at = next((m.start() for m in reversed(found)
               if benign_key(_line_at(text, m.start())) is None), None)
    if at is None:
        return word
    return at if word is None else max(word, at)


def _last_error_word(text: str) -> int | None:
    """Where the last whole word error/fatal/failed (any case) of ``text`` starts: searched
    back from the end (a log's error lines are many; a forward scan visited every one)."""
    low = text.lower()
    best: int | None = None
    for word in _ERROR_WORDS:
        end = len(low)
        while (at := low.rfind(word, 0, end)) >= 0:
            after = at + len(word)
            if ((at == 0 or not _word_char(low[at - 1]))
                    and (after == len(low) or not _word_char(low[after]))):
                best = at if best is None else max(best, at)
                break
            end = at + len(word) - 1
    return best


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _line_at(text: str, at: int) -> str:
    """The line of ``text`` that holds position ``at``."""
    end = text.find("\n", at)
    return text[text.rfind("\n", 0, at) + 1:end if end >= 0 else len(text)]
