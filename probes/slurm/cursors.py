"""What a warm bot sweep carries per job between sweeps, and the fold of a resumed read.

Policy: the bot keeps, per running job, a :class:`LogState`: the collector's cursor (where the
last read stopped, and how the collector re-identifies the file: ``probes.remote.logread``),
the log fold's carry (``probes.logs.incremental``: banner totals, fault state, windows), the
fingerprint read from the log's head, and a bounded window of the latest text (what excerpts
and notes show). A resumed read whose answer continues the stored cursor is folded onto its
carry; any other answer (``fresh``: a first, rotated, truncated, rewritten or overrun log) is
folded from nothing, so the summary is always what a whole read of the same bytes gives (but
for a file rotated, truncated or rewritten under the running job: its first byte is no step
of the run, so the dicts a whole read would number by their count claim no step).

The stored state is a hint, never trusted blindly: it is decoded under a size bound and
validated (anything else is dropped: a cold read), and the collector re-checks the file's
identity (device, inode, digest) before it resumes. The CLI never comes here: its sweeps
read cold with ``parse_log`` (``probes.slurm.assemble.job_facts``). Nor does Kubernetes: its
log API resumes by time (``sinceTime``), not by byte, so a pod's lines at the boundary second
would be read twice or lost; its sweeps stay cold (one bounded ``tailLines`` read per pod).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import Field, PrivateAttr, ValidationError, field_serializer, field_validator

from probes.logs.attempts import own_part
from probes.logs.excerpt import MAX_CONTEXTS, TALLY, cut_line, retain
from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import head_before
from probes.models import (
    ACTIVE_STATES,
    Frozen,
    JobFacts,
    LogContext,
    LogFetch,
    LogSummary,
    RunFingerprint,
    SchedulerRecord,
)
from probes.slurm.assemble import head_fingerprint, job_facts

RECENT_CHARS = 16 << 10
"""Characters of the latest log text a state keeps (excerpts, a catch-all job's note)."""

MAX_STATE_BYTES = 256 << 10
"""A stored state larger than this is not read (nor written): that job is read cold."""


_RAW_PATH = "\x00utf8-surrogatepass:"
"""Marks a stored cursor path written as hex (no path holds a NUL)."""


class LogCursor(Frozen):
    """Where the last read of a job's log stopped (the collector's ``cursor``, verbatim)."""

    path: str
    """The file's exact name: a byte that is not UTF-8 is ``os.fsdecode``'s lone surrogate
    (``probes.slurm.undecodable``). Stored as JSON (Redis), such a path is written as hex
    behind :data:`_RAW_PATH` and read back to the very string."""

    @field_serializer("path", when_used="json")
    def _stored_path(self, path: str) -> str:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # JSON text must be UTF-8: the bytes as hex
            return _RAW_PATH + path.encode("utf-8", "surrogatepass").hex()
        return path

    @field_validator("path", mode="before")
    @classmethod
    def _read_path(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith(_RAW_PATH):
            try:
                return bytes.fromhex(value[len(_RAW_PATH):]).decode("utf-8", "surrogatepass")
            except ValueError:
                return value  # malformed: no file has this name, the log is read afresh
        return value
    dev: int = Field(ge=0)
    ino: int = Field(ge=0)
    offset: int = Field(ge=0)
    """Bytes of the file read so far (a whole UTF-8 character boundary)."""
    digest: str = Field(pattern=r"^[0-9a-f]{32}$")
    """SHA-256 prefix over the file's first 4 KiB and the 4 KiB before ``offset``."""
    dirs: tuple[str, ...] = Field(default=(), max_length=8)
    """Checkpoint directories the log named so far (searched again on every read)."""
    trials: tuple[str, ...] = Field(default=(), max_length=4)
    """Trials directories the log named so far (counted again on every read)."""
    cmd: str = Field(default="", pattern=r"^(?:[0-9a-f]{16})?$")
    """The job's command line and bases whose every save folder ``dirs`` holds (a digest,
    ``probes.remote.logged_paths.command_mark``): the collector does not read it again."""
    ckpt: tuple[dict[str, Any], ...] = Field(default=(), max_length=8)
    """The named checkpoint folders' answers and what each rests on: the collector searches
    a folder again only when that changed (``probes.remote.tree._folder``), and re-checks
    every record's shape (a hint, as the rest of the cursor). A collector that reused every
    record the request's cursor brought answers ``"same"`` (:func:`_cursor_of`)."""


class LogState(Frozen):
    """One running job's log between two sweeps (see the module policy)."""

    cursor: LogCursor
    carry: LogCarry
    head_fingerprint: RunFingerprint | None = None
    """The run fingerprint in the log's head (sent only on a cold read of a long log)."""
    recent: str = ""
    """The latest text read, at most :data:`RECENT_CHARS`, from a line start."""
    recent_offset: int = Field(default=0, ge=0)
    """Byte offset in the file where ``recent`` starts."""
    recent_line: int = Field(default=1, ge=1)
    """The fold's line number of ``recent``'s first line (faults are numbered so)."""
    stream: str = Field(default="", max_length=64)
    """Which reading of the file ``recent`` continues: set by a read from nothing (the
    cursor's digest then, and where that read began), kept by every read that resumed it.
    Two states of one stream hold one text, the later ``recent`` further on (the store
    appends only the new bytes: ``bot.store_texts``)."""
    contexts: tuple[LogContext, ...] = Field(default=(), max_length=MAX_CONTEXTS)
    """The excerpts kept around the first faults (``probes.logs.excerpt``), fold-numbered:
    a fault above ``recent`` keeps the context read when it was below."""
    tally: str | None = None
    """The last line read with a count of tests, rows, files, ... (a catch-all job's note)."""
    agent_marked: bool = False
    """Some line read names agent configuration (``probes.logs.excerpt.AGENT_MARKERS``)."""
    trials_in_object_store: bool = False
    """Some line read names an object-store URI for its trials."""
    _summary: LogSummary | None = PrivateAttr(default=None)
    """This process only, never stored: the summary the state was folded into, and the file's
    mtime then. A log unchanged since (no byte appended, same mtime) reuses it: folding
    nothing would give it again, at the cost of restoring every rule's state."""
    _mtime: datetime | None = PrivateAttr(default=None)
    _kept: tuple[LogFetch, LogFetch] | None = PrivateAttr(default=None)
    """This process only: ``(read, kept)``, a read this unchanged state reused its summary for
    and what ``_retained`` kept of it: the next such read, equal, keeps the same."""


def decode_state(raw: bytes | str) -> LogState | None:
    """A stored state, or ``None`` when it is oversized or malformed (read that job cold)."""
    if len(raw) > MAX_STATE_BYTES:
        return None
    try:
        return LogState.model_validate_json(raw)
    except ValidationError:
        return None


def encode_state(state: LogState) -> str | None:
    """The state as stored, or ``None`` when it would be over :data:`MAX_STATE_BYTES`."""
    text = state.model_dump_json()
    return text if len(text.encode("utf-8")) <= MAX_STATE_BYTES else None


_REPLACED = ("rotated", "truncated", "rewritten")
"""The collector's ``fresh`` reasons for a log that is no longer the file the cursor read."""


def fold_jobs(
    records: Sequence[SchedulerRecord],
    collected: Mapping[str, Any],
    prior: Mapping[str, LogState] | None,
    *,
    aliases: Mapping[str, str],
    benign_patterns: Sequence[str],
) -> tuple[tuple[JobFacts, ...], dict[str, LogState]]:
    """:func:`fold_job` for every job of a sweep (states only for the jobs that have one);
    with no ``prior`` (the CLI, a cold read whatever it asked), ``job_facts`` and no states."""
    if prior is None:
        return tuple(job_facts(r, collected.get(r.job_id), aliases=aliases,
                               benign_patterns=benign_patterns) for r in records), {}
    jobs: list[JobFacts] = []
    states: dict[str, LogState] = {}
    for r in records:
        facts, state = fold_job(r, collected.get(r.job_id), prior.get(r.job_id),
                                aliases=aliases, benign_patterns=benign_patterns)
        jobs.append(facts)
        if state is not None:
            states[r.job_id] = state
    return tuple(jobs), states


class _Start(NamedTuple):
    """Where one job's fold begins: the stored state it continues (``base``) or nothing."""

    base: LogState | None
    new_text: str
    """This read's text (on a first read, only the job's own part of it)."""
    head_text: str | None
    head_fp: RunFingerprint | None
    recent: str
    recent_offset: int
    recent_line: int
    stream: str
    log_start: bool


def _start_fold(record: SchedulerRecord, raw: Mapping[str, Any], prior: LogState | None,
                cursor: LogCursor) -> _Start:
    """Resume ``prior`` when the collector's answer continues its cursor, else start afresh."""
    new_text = str(raw.get("text") or "")
    if (prior is not None and raw.get("continued") is True
            and prior.cursor.path == cursor.path and raw.get("offset") == prior.cursor.offset):
        return _Start(prior, new_text, None, prior.head_fingerprint, prior.recent,
                      prior.recent_offset, prior.recent_line, prior.stream, True)
    head = raw.get("head")
    head_text = head if isinstance(head, str) and head else None
    head_fp = head_fingerprint(head_text) if head_text is not None else None
    # A first read folds the job's own part (a chain's attempts appending to one file,
    # probes.logs.attempts), as job_facts shows it.
    new_text, cut = own_part(new_text, record.job_id, live=record.state in ACTIVE_STATES)
    recent_offset = int(raw.get("offset") or 0) + cut
    # Read from the file's first byte, or from this attempt's own start: else a cut
    # tail, whose head (if sent) gives HF Trainer's banner (``parse_log``'s). A file
    # rotated, truncated or rewritten under the running job (a ``fresh`` answer to a
    # stored cursor) starts at no step of the run either: its bar-less dicts counted
    # from 1 again would be merged over the stored history's steps (left unanchored).
    replaced = prior is not None and raw.get("fresh") in _REPLACED
    log_start = (recent_offset == 0 and not replaced) or cut > 0
    return _Start(None, new_text, head_text, head_fp, "", recent_offset, 1,
                  f"{cursor.digest}@{recent_offset}", log_start)


class _Summariser:
    """The ``summarise`` hook :func:`job_facts` calls: the fold of this read onto the start's
    carry (or the stored summary again, for a log unchanged since), noting the carry."""

    def __init__(self, start: _Start, cursor: LogCursor, *, aliases: Mapping[str, str],
                 benign_patterns: Sequence[str]) -> None:
        self.start = start
        self.unchanged = (start.base is not None and not start.new_text
                          and cursor == start.base.cursor)
        self.aliases, self.benign_patterns = aliases, benign_patterns
        self.carried: list[LogCarry] = []
        self.reused = False

    def __call__(self, log: LogFetch) -> LogSummary:
        """The summary of ``log`` (the read :func:`job_facts` was given)."""
        start, base = self.start, self.start.base
        if self.unchanged and base is not None and base._summary is not None \
                and base._mtime == log.mtime:
            self.carried.append(base.carry)
            self.reused = True
            return base._summary
        summary, carry = parse_increment(
            base.carry if base is not None else None, start.new_text, aliases=self.aliases,
            benign_patterns=self.benign_patterns, mtime=log.mtime, log_start=start.log_start,
            head=head_before(start.head_text, start.recent_offset))
        self.carried.append(carry)
        if summary.fingerprint is None and start.head_fp is not None:
            summary = summary.model_copy(update={"fingerprint": start.head_fp})
        return summary


def fold_job(
    record: SchedulerRecord,
    collected: Mapping[str, Any] | None,
    prior: LogState | None,
    *,
    aliases: Mapping[str, str],
    benign_patterns: Sequence[str],
) -> tuple[JobFacts, LogState | None]:
    """One job's facts from a tracked read, and the state the next sweep resumes from
    (``None``: no cursor came back, e.g. an ended job or a failed read)."""
    raw = (collected or {}).get("log") or {}
    try:
        cursor = LogCursor.model_validate(_cursor_of(raw.get("cursor"), prior))
    except ValidationError:
        return job_facts(record, collected, aliases=aliases,
                         benign_patterns=benign_patterns), None
    start = _start_fold(record, raw, prior, cursor)
    shown = start.recent + start.new_text  # the text this sweep's facts show: the latest, bounded
    summarise = _Summariser(start, cursor, aliases=aliases, benign_patterns=benign_patterns)
    log = {k: v for k, v in raw.items() if k not in ("head", "cursor")}
    log.update(text=shown, offset=start.recent_offset)  # (job_facts cuts nothing given summarise)
    facts = job_facts(record, dict(collected or {}, log=log), aliases=aliases,
                      benign_patterns=benign_patterns, summarise=summarise, whole_tail=True)
    carried = summarise.carried
    if facts.log is None or not carried or carried[0].reset or carried[0].afresh:
        # No fold, or the fold lost its state (a parser bug) or the points a restart below
        # them needs (``LogCarry.afresh``): read the log afresh next time.
        return facts.model_copy(update={"log": retain(facts.log, facts.summary)}
                                ) if facts.log else facts, None
    base = start.base
    if summarise.reused and base is not None:  # as it was (see LogState._summary)
        return _reuse_state(facts, facts.log, base), base
    return _fold_state(facts, facts.log, start, cursor, carry=carried[0], shown=shown)


def _cursor_of(raw: Any, prior: LogState | None) -> Any:
    """The collector's cursor, its ``ckpt`` of ``"same"`` (every folder record the request
    sent was reused) replaced by those records: the prior state's, which the request sent."""
    if isinstance(raw, dict) and raw.get("ckpt") == "same":
        return {**raw, "ckpt": prior.cursor.ckpt if prior is not None else ()}
    return raw


def _reuse_state(facts: JobFacts, log: LogFetch, base: LogState) -> JobFacts:
    """``facts`` of an unchanged log showing what ``base`` kept of the same read."""
    if base._kept is None or base._kept[0] != log:
        base._kept = log, _retained(log, facts.summary, base, base.recent_line)[0]
    return facts.model_copy(update={"log": base._kept[1]})


def _fold_state(facts: JobFacts, log: LogFetch, start: _Start, cursor: LogCursor, *,
                carry: LogCarry, shown: str) -> tuple[JobFacts, LogState]:
    """``facts`` with the retained excerpts, and the state this read leaves for the next."""
    kept_log, excerpts = _retained(log, facts.summary, start.base, start.recent_line)
    facts = facts.model_copy(update={"log": kept_log})
    kept, dropped = _latest(shown)
    state = LogState(cursor=cursor, carry=carry, head_fingerprint=start.head_fp, recent=kept,
                     recent_offset=start.recent_offset + len(dropped.encode("utf-8")),
                     recent_line=start.recent_line + _breaks(dropped), stream=start.stream,
                     **excerpts)
    state._summary, state._mtime = facts.summary, facts.log.mtime if facts.log else None
    return facts, state


def _retained(log: LogFetch, summary: LogSummary | None, base: LogState | None,
              first: int) -> tuple[LogFetch, dict[str, Any]]:
    """``retain`` of this read's text (whose first line is the fold's line ``first``), with
    what earlier reads kept of the lines above it; and those excerpts, for the state.

    On a cold read (``base`` None, ``first`` 1) this is ``retain`` itself."""
    shift = first - 1
    faults = summary.faults if summary is not None else ()
    local = summary
    if summary is not None and shift:  # retain numbers lines from the text's first
        local = summary.model_copy(update={"faults": tuple(
            f.model_copy(update={"line_no": f.line_no - shift}) for f in faults)})
    kept = retain(log, local)
    here = {c.line_no + shift: c.text for c in kept.contexts}
    earlier = {c.line_no: c.text for c in base.contexts} if base is not None else {}
    wanted = sorted({f.line_no for f in faults if f.kind != "time-limit"})
    contexts = tuple(LogContext(line_no=n, text=here.get(n) or earlier[n])
                     for n in wanted if n in here or n in earlier)[:MAX_CONTEXTS]
    latest = last_tally(kept.text)  # the last tally overall when the kept text holds one
    tally = latest or kept.tally_line or (base.tally if base is not None else None)
    excerpts: dict[str, Any] = {
        "contexts": contexts, "tally": tally,
        "agent_marked": kept.agent_marked or (base is not None and base.agent_marked),
        "trials_in_object_store": kept.trials_in_object_store
        or (base is not None and base.trials_in_object_store)}
    shown = kept.model_copy(update={
        "contexts": contexts, "text_line": kept.text_line + shift,
        "tally_line": None if latest else tally, "agent_marked": excerpts["agent_marked"],
        "trials_in_object_store": excerpts["trials_in_object_store"]})
    return shown, excerpts


_TALLY_WORDS = ("passed", "failed", "error", "rows", "files", "shards", "records", "examples")
"""Every ``TALLY`` match holds one of these (lower-cased): the gate before the regex."""


def last_tally(text: str) -> str | None:
    """The text's last line with a tally (``probes.logs.excerpt.TALLY``), cut as kept. The
    regex runs only on lines holding one of its words (a log is full of digits)."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: line by line
        return next((cut_line(line) for line in reversed(text.splitlines())
                     if TALLY.search(line)), None)
    best: tuple[int, str] | None = None
    for word in _TALLY_WORDS:
        at = low.rfind(word)
        while at >= 0 and (best is None or at > best[0]):
            start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
            ends = [e for e in (text.find("\n", at), text.find("\r", at)) if e >= 0]
            line = text[start:min(ends, default=len(text))]
            if TALLY.search(line):
                best = (start, cut_line(line)) if best is None or start > best[0] else best
                break
            at = low.rfind(word, 0, start)
    return best[1] if best is not None else None



def _breaks(text: str) -> int:
    """Line breaks as the log parser counts them: ``\\r\\n``, ``\\r`` and ``\\n``."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _latest(text: str) -> tuple[str, str]:
    """``(kept, dropped)``: the last :data:`RECENT_CHARS` of ``text`` from a line start."""
    if len(text) <= RECENT_CHARS:
        return text, ""
    cut = len(text) - RECENT_CHARS
    newline = text.find("\n", cut - 1)
    cut = len(text) if newline < 0 else newline + 1
    return text[cut:], text[:cut]
