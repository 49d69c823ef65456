"""What a job keeps of its log tail once the tail is parsed: bounded excerpts, never the tail.

Policy (issue 12, "memory retained per job is bounded"): a sweep reads up to ``tail_bytes``
(1 MiB by default) of every log and the bot keeps the latest sweep for ``/job``, buttons and
digests, so the whole tail must not outlive its parse. ``retain`` runs once per job at
assembly (``probes.slurm.assemble.job_facts``, the Kubernetes probe) and replaces
``LogFetch.text`` with the tail's last lines, plus what the report reads from anywhere in the
tail, each capped:

- ``text``: the last ``TAIL_LINES`` (400, an incident file's tail) lines, at most
  ``TAIL_CHARS`` (16 KiB) characters: a suffix of the tail cut at a line start (a single line
  longer than the cap keeps its end). ``text_line`` numbers its first line in the tail.
- ``contexts``: ``CONTEXT_LINES`` (20) lines around each of the first ``MAX_CONTEXTS`` (3)
  faults by line (``time-limit`` is the scheduler's own fact and has none), each line cut at
  ``LINE_CHARS`` (500): ``jobtables job``'s log excerpt; ``last_context``, the last 20 lines
  so cut, when ``text`` holds fewer (long lines).
- ``tally_line``: the tail's last line holding a count of tests, rows, files, ... (``TALLY``)
  when it lies above ``text`` (a catch-all job's note).
- ``agent_marked`` / ``trials_in_object_store``: the tail names agent configuration or agentic
  trial lines (``AGENT_MARKERS``), or an object-store URI for its trials (the RL cleanup
  routine's flavour).

So a job keeps at most 16 Ki + 4 x 10 K + 500 characters (~57 K) of its log whatever the
tail's size (a typical 1 MiB SkyRL tail: ~17 KB as JSON).
A one-job read that parses the tail again (the deep probe) asks ``job_facts`` for the whole
tail and retains it once done. Lines are those of ``str.splitlines`` (as ``jobtables job``
always showed them). The
searches over the whole tail are ASCII substring gates on one lower-cased byte copy, with the
regex run on the candidate lines only: a few milliseconds per MiB, not a regex over the tail.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate

from probes.logs.lines import strip_ansi
from probes.models import Fault, LogContext, LogFetch, LogSummary

TAIL_LINES = 400
TAIL_CHARS = 16 << 10
CONTEXT_LINES = 20
MAX_CONTEXTS = 3
LINE_CHARS = 500

TALLY = re.compile(
    r"(?<![\d,.])\d[\d,._]*[kKmM]? (?:[a-z]{1,20} )?"
    r"(?:passed|failed|errors?|rows|files|shards|records|examples)\b(?!/)",
    re.IGNORECASE,
)
"""A count of tests or of what an upload moved, e.g. ``2 passed``, ``6,977 rows`` or ``52002
tokenized examples`` (one word may qualify the noun); never a rate (a tqdm bar's ``4213.33
examples/s`` is a speed: the bar itself is no closing line)."""
_TALLY_WORD = re.compile(r" (?:passed|failed|errors?|rows|files|shards|records|examples)\b",
                         re.IGNORECASE)
"""What every ``TALLY`` match ends with (:func:`last_tally_line` searches for it first)."""
_LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` breaks lines at (``\r\n`` is two here: an empty line between)."""


def last_tally_line(text: str) -> str | None:
    """The last of ``text.splitlines()`` (stripped) in which ``TALLY`` matches, else None.

    Only the lines holding an occurrence of a tally's word are searched, latest first:
    ``TALLY`` tries every digit of a metric-heavy line (1.6 ms for a 27 KB HF log). The line
    breaks are found once, so any number of occurrences costs one pass."""
    found = [m.start() for m in _TALLY_WORD.finditer(text)]
    if not found:
        return None
    breaks = [m.start() for m in _LINE_BREAK.finditer(text)]
    seen = -1
    for at in reversed(found):
        after = bisect_right(breaks, at)  # breaks[:after] come before the occurrence
        start = breaks[after - 1] + 1 if after else 0
        if start == seen:
            continue  # that line was searched
        seen = start
        line = text[start:breaks[after] if after < len(breaks) else len(text)].strip()
        if TALLY.search(line):
            return line
    return None


_TALLY_NEEDLES = (b"passed", b"failed", b"error", b"rows", b"files", b"shards", b"records",
                  b"examples")

AGENT_MARKERS = re.compile(
    # Letter boundaries, not \b: ``run_harbor_grpo.sh`` and ``agent_config=terminus-2`` count.
    r"(?i:(?<![a-z])(?:harbor|terminus(?:[-_]\d)?|trials?_dir|agentic|openhands"
    r"|mini[-_]swe[-_]agent|swe[-_]agent|agent_(?:name|config|execution|result))(?![a-z]))"
    r"|\bContextLengthExceededError\b|\bAgentTimeoutError\b"
    r"|generate/(?:avg_num_turns|num_timeout_trajectories|trajectories_context_length_exceeded)"
    r"|\bfailed: (?:Exception info|Error running trial)\b"
)
"""Agent configuration and agentic trial lines (Harbor, SkyRL's Harbor generator, agents)."""
_AGENT_NEEDLES = (b"harbor", b"terminus", b"_dir", b"agent", b"openhands",
                  b"contextlengthexceedederror", b"generate/", b"failed: ")
"""Every ``AGENT_MARKERS`` match holds one of these (lower-cased): the gate before the regex."""

OBJECT_STORE = re.compile(r"\b(?:s3|s3a|gs|gcs|az|abfss?|r2|oss|cos)://[\w.\-]+/?\S*")
"""An object-store URI; it makes the run object-store backed when its line is about trials."""
_TRIAL_WORDS = re.compile(r"(?i)trial|trajector|jobs_dir|rollout|harbor|://[^\s]*/jobs/")
"""A line about trials (a checkpoint or model upload to the same bucket is not one)."""


def object_store_trials(text: str) -> bool:
    """The text names an object-store URI for its trials (``trials_dir: s3://...``)."""
    if "://" not in text:
        return False
    return any(
        OBJECT_STORE.search(line) is not None and _TRIAL_WORDS.search(line) is not None
        for line in text.splitlines() if "://" in line
    )


def _store_line(line: str) -> bool | None:
    return True if object_store_trials(line) else None


def retain(log: LogFetch, summary: LogSummary | None) -> LogFetch:
    """``log`` as a job keeps it: bounded excerpts in place of the whole tail (module policy)."""
    text = log.text
    if not text:
        return log
    parts = text.splitlines(keepends=True)
    kept, first = last_lines(text, parts)
    raw = text.encode("utf-8", "replace")
    low = raw.lower()  # ASCII-only lowering: byte offsets stay those of ``raw``
    held = _held_needles(raw)
    above = len(raw) - len(kept.encode("utf-8", "replace"))  # bytes of the tail above ``kept``
    tally = _last_matching(raw, low, held(_TALLY_NEEDLES), TALLY.search)
    return log.model_copy(update={
        "text": kept,
        "text_line": first,
        "contexts": fault_contexts(parts, summary.faults if summary else ()),
        "last_context": last_context(parts) if len(parts) - first + 1 < CONTEXT_LINES else None,
        "tally_line": tally[1] if tally is not None and tally[0] < above else None,
        "agent_marked": _any_matching(raw, low, held(_AGENT_NEEDLES), AGENT_MARKERS.search),
        "trials_in_object_store": _any_matching(raw, low, held((b"://",)), _store_line),
    })


_UPPER_TO_LOWER = bytes.maketrans(bytes(range(65, 91)), bytes(range(97, 123)))


def _held_needles(raw: bytes) -> Callable[[Sequence[bytes]], tuple[bytes, ...]]:
    """The needles (lower-case ASCII, no digit, no line end) that may occur in ``raw``
    lower-cased: looked up in one copy of its distinct lines with digits deleted (a log
    repeats a few line shapes with new numbers), so each needle absent from the text costs
    no scan of it. Deleting digits can only join a needle, never hide one: a superset."""
    shapes = b"\n".join(dict.fromkeys(raw.translate(_UPPER_TO_LOWER, b"0123456789")
                                       .split(b"\n")))

    def held(needles: Sequence[bytes]) -> tuple[bytes, ...]:
        return tuple(needle for needle in needles if needle in shapes)

    return held


def last_lines(text: str, parts: Sequence[str]) -> tuple[str, int]:
    """The suffix of ``text`` holding its last ``TAIL_LINES`` lines (``parts``, line ends
    kept) within ``TAIL_CHARS``, and the 1-based number of its first line; a last line over
    the cap keeps its end."""
    if not parts:
        return text[len(text):], 1
    window = parts[-TAIL_LINES:]
    sizes = list(accumulate(map(len, reversed(window))))  # the last 1, 2, ... lines' sizes
    taken = bisect_right(sizes, TAIL_CHARS)  # the most of them within the cap
    if not taken:  # the last line alone is over the cap
        return text[-TAIL_CHARS:], len(parts)
    size = sizes[taken - 1]
    return text[len(text) - size:], len(parts) - taken + 1


def fault_contexts(parts: Sequence[str], faults: Iterable[Fault]) -> tuple[LogContext, ...]:
    """``CONTEXT_LINES`` lines around each of the first ``MAX_CONTEXTS`` faults' lines (the
    fault's line tenth, as ``jobtables job`` shows it); ``parts`` keep their line ends."""
    wanted = sorted({f.line_no for f in faults
                     if f.kind != "time-limit" and 1 <= f.line_no <= len(parts)})
    out = []
    for line_no in wanted[:MAX_CONTEXTS]:
        start = max(0, line_no - CONTEXT_LINES // 2)
        window = parts[start : start + CONTEXT_LINES]
        out.append(LogContext(line_no=line_no, text="\n".join(map(_bare, window))))
    return tuple(out)


def last_context(parts: Sequence[str]) -> str:
    """The tail's last ``CONTEXT_LINES`` lines, each cut at ``LINE_CHARS``."""
    return "\n".join(map(_bare, parts[-CONTEXT_LINES:]))


def _bare(part: str) -> str:
    """A line without its line end, cut at ``LINE_CHARS``."""
    return cut_line((part.splitlines() or [""])[0])


def cut_line(line: str) -> str:
    """``line`` without its terminal escapes (Ray's colours: ``\x1b[36m(pid=1)\x1b[0m``),
    at most ``LINE_CHARS`` characters long (an ellipsis marks the cut)."""
    line = strip_ansi(line)
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def _line_at(low: bytes, at: int) -> tuple[int, int]:
    """The bounds of the line holding byte ``at`` (``\\n`` and ``\\r`` end lines); each
    search stays inside that line, so a candidate costs its own line only."""
    start = low.rfind(b"\n", 0, at) + 1
    start = low.rfind(b"\r", start, at) + 1 or start
    end = low.find(b"\n", at)
    end = len(low) if end < 0 else end
    cr = low.find(b"\r", at, end)
    return start, end if cr < 0 else cr


def _any_matching(raw: bytes, low: bytes, needles: Sequence[bytes],
                  matches: Callable[[str], object]) -> bool:
    """Whether a line of ``raw`` holding one of ``needles`` (found in its lower-cased copy
    ``low``) matches; each candidate line is decoded and checked once."""
    seen: set[int] = set()
    for needle in needles:
        at = low.find(needle)
        while at >= 0:
            start, end = _line_at(low, at)
            if start not in seen:
                seen.add(start)
                if matches(raw[start:end].decode("utf-8", "replace")) is not None:
                    return True
            at = low.find(needle, end)
    return False


def _last_matching(raw: bytes, low: bytes, needles: Sequence[bytes],
                   matches: Callable[[str], object]) -> tuple[int, str] | None:
    """The last line of ``raw`` that holds a needle and matches: its start byte and its text,
    cut at ``LINE_CHARS``."""
    best: tuple[int, str] | None = None
    for needle in needles:
        at = low.rfind(needle)
        while at >= 0 and (best is None or at >= best[0]):
            start, stop = _line_at(low, at)
            line = raw[start:stop].decode("utf-8", "replace")
            if matches(line) is not None:
                if best is None or start > best[0]:
                    best = (start, cut_line(line))
                break
            at = low.rfind(needle, 0, start)
    return best
