"""An incremental ``parse_log``: fold the bytes a log gained since the last read into its summary.

Policy: ``parse_increment(carry, text)`` takes what a log gained since ``carry`` was made (the
whole tail when ``carry`` is None) and returns the ``LogSummary`` of everything read so far
together with the carry for the next read. It is a pure function that never raises, and its
cost is that of the increment: each rule's state is carried over, never the text. The result
is the per-line, whole-tail pass's (``parse._parse_reference``), and so ``parse_log``'s over
the concatenated text wherever ``parse_log``'s read back from the end is exact (its known
limit, ``probes.logs.recent``). The property tests fold random cuts of every fixture and of
random real lines, round-tripping the carry through JSON between chunks.

The text layer makes any cut exact: a line not yet ended (a tqdm redraw, a chunk cut mid-line)
is carried (its first ``max_line_chars`` characters: the parse reads no more of a line), a
trailing ``\\r`` remembers that a ``\\n`` opening the next text closes the same line, and
bytes ending in a cut UTF-8 sequence keep those (at most three) bytes for the next read. Pass
bytes: a ``str`` increment was decoded on its own, so a character cut by the read has become
replacement characters. The last, unfinished line is read into the summary, not into the carry.

A restarted run that goes back below the points carried (the whole pass keeps the old run's
points below its resume step, dropped from the carry long ago) cannot be folded: that read's
carry says ``afresh`` and the caller reads the log afresh next time, as a rotated one.

What is carried, and its bound (``probes.logs.metric_carry``, ``fault_carry``,
``fingerprint_carry``): the metric pass's state with its last 32 points, the fault scan's open
tracebacks and newest hits, the launch checks, the fingerprint found so far, the outcome lines
of the last 400, the last planned-stop line, and the text above. Its JSON is a few KiB on a
training log whatever its length (7 KiB on ``tests/bench/bench_incremental.py``'s log; under
64 KiB through a 100k-line log and 3000 faults, ``tests/probes/logs/test_incremental_bound.py``),
plus what the log itself makes big: the printed config (51 KiB for verl's, which the summary
holds too), one unfinished line (at most ``max_line_chars`` characters), one unfinished
multi-line dict or dump (at most 5000 / 20000 lines), the lines after a recent
``ChildFailedError`` (120, blanked but for the summary's own). Pass the same ``aliases``,
``benign_patterns`` and ``max_line_chars`` on every read of one log: lines already read keep
what the earlier ones made of them.

Where bounded state is not exact (each is far from what a trainer prints, and tested as
documented):

- a step logged more than 256 gaps of step numbers ago counts as not logged (the SkyRL
  reward-line rule); more than 256 bar-less HF dicts followed by a training bar number the
  middle ones from placeholders;
- more than 256 faults: a traceback that closes after the 128 newest hits with a line older
  than theirs, and a ``ChildFailedError`` summary read more than 120 lines after its line;
- the file's mtime places a year-less stamp only until the log shows a stamp, with the mtime
  of the read that reached it (the whole pass uses the last read's).
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from probes.logs.carried import Carried
from probes.logs.config_total import capped_total
from probes.logs.fault_carry import FaultCarry, FoldScanner, restore_faults, snapshot_faults
from probes.logs.faults import _LINE_NEEDLES, _compile_patterns, _frozen, _split_prefix
from probes.logs.fingerprint_carry import FingerprintCarry, FingerprintFold
from probes.logs.fold_scan import KEEP_POINTS, FoldScan
from probes.logs.lines import split_lines, strip_ansi
from probes.logs.metric_carry import MetricCarry, restore_metrics, snapshot_metrics
from probes.logs.outcome import OUTCOME_GATE, read_outcome
from probes.logs.parse import head_seed, step_quiet_since
from probes.logs.planned_stop import read_planned_stop
from probes.logs.prefilter import pattern_lines, shared_skeletons
from probes.logs.recent import feed_lines
from probes.logs.scan_patterns import METRIC_LINES
from probes.models import LogOutcome, LogSummary, PlannedStop

__all__ = ["LogCarry", "parse_increment"]

_log = logging.getLogger(__name__)
OUTCOME_LINES = 400
"""``parse_log`` reads the outcome from the last 400 lines."""


class TextCarry(Carried):
    """Where the text stopped: the unfinished line, a cut ``\\r\\n`` or UTF-8 sequence."""

    undecoded: str = ""
    """Hex of the bytes of a UTF-8 sequence cut by the end of the last read (at most 3)."""
    partial: str = ""
    """The unfinished last line (its first ``max_line_chars`` characters)."""
    after_cr: bool = False
    """The text so far ends in ``\\r``: a ``\\n`` opening the next text closes no new line."""
    line_no: int = 1
    """The number of the unfinished line."""
    newlines: int = 0
    ends_lf: bool = False
    empty: bool = True


class OutcomeCarry(Carried):
    """The last pytest summary and upload target read, with their lines."""

    pytest: tuple[int, str] | None = None
    pushed: tuple[int, str] | None = None


class LogCarry(Carried):
    """What the next read of the same log needs; JSON-serialisable (NaN as strings), bounded."""

    version: int = 1
    reset: bool = False
    """A parser bug dropped the state (it was logged): read the log afresh next time."""
    afresh: bool = False
    """A restarted run went back below the points this carry keeps (``KEEP_POINTS``): the
    whole pass keeps the old run's points below its resume step, which the fold dropped long
    ago. Read the log afresh next time, as a rotated or truncated one (this read's summary
    lacks those older points; the fresh read is ``parse_log``'s)."""
    text: TextCarry = TextCarry()
    metrics: MetricCarry = MetricCarry()
    faults: FaultCarry = FaultCarry()
    fingerprint: FingerprintCarry = FingerprintCarry()
    outcome: OutcomeCarry = OutcomeCarry()
    planned_stop: PlannedStop | None = None
    """The last planned-stop line read (``probes.logs.planned_stop``)."""


def parse_increment(
    carry: LogCarry | None,
    text: str | bytes,
    *,
    aliases: Mapping[str, str] | None = None,
    benign_patterns: Sequence[str] = (),
    max_line_chars: int = 65536,
    mtime: datetime | None = None,
    first_line_no: int = 1,
    log_start: bool = True,
    head: str | None = None,
) -> tuple[LogSummary, LogCarry]:
    """``text`` is the bytes appended to the log since ``carry`` was made (all of it when
    carry is None), decoded or (better, see the module policy) not. Never raises.

    ``first_line_no`` numbers the first line when ``carry`` is None (as ``parse_log``'s does);
    so do ``log_start`` and ``head`` (a first read cut from a longer log: ``parse_log``'s).
    """
    seed = head_seed(log_start, head) if carry is None else None
    carry = carry or LogCarry(text=TextCarry(line_no=first_line_no))
    try:
        return _Fold(carry, aliases or {}, benign_patterns, max_line_chars, mtime,
                     seed=seed).run(text)
    except Exception:  # a sweep never dies on a log: the bug is logged, the log read afresh
        size = len(text) if isinstance(text, str | bytes) else -1
        _log.exception("parse_increment failed on a %d-character increment", size)
        return LogSummary(line_count=0), LogCarry(reset=True)


class _Fold:
    """One increment through every rule: the committed lines into the carry, then the
    unfinished last line into the summary only."""

    def __init__(
        self,
        carry: LogCarry,
        aliases: Mapping[str, str],
        benign_patterns: Sequence[str],
        max_line_chars: int,
        mtime: datetime | None,
        *,
        seed: Sequence[str] | None = None,
    ) -> None:
        self.carry, self.aliases, self.mtime, self.seed = carry, aliases, mtime, seed
        self.benign = _compile_patterns(tuple(benign_patterns))
        self.cap = max_line_chars

    def run(self, data: str | bytes) -> tuple[LogSummary, LogCarry]:
        decoded, undecoded = _decode(self.carry.text.undecoded, data)
        text, raws, lines = self._split(decoded, undecoded)
        first = self.carry.text.line_no
        committed_raws, committed = raws[:-1], lines[:-1]
        with shared_skeletons(committed):  # every reader's prefilter over the same lines
            scanner = self._faults(committed, first)
            scan = self._metrics(committed_raws, committed, first, scanner)
            prints = self._fingerprint(committed)
            outcome = _outcome(self.carry.outcome, committed, first)
            stop = read_planned_stop(committed, first) or self.carry.planned_stop
        carry = LogCarry(
            text=text, metrics=_snapshot_metrics(scan), faults=_snapshot_faults(scanner),
            fingerprint=prints.carry() if prints is not None else FingerprintCarry(),
            outcome=outcome, planned_stop=stop,
            afresh=scan is not None and scan.lost)
        flushed = codecs.decode(bytes.fromhex(undecoded), "utf-8", "replace")
        last_raw = raws[-1] + flushed
        last_raw = last_raw[: self.cap] if len(last_raw) > self.cap else last_raw
        last = strip_ansi(last_raw)
        ends, empty = text.ends_lf and not flushed, text.empty and not flushed
        line_count = text.newlines + (0 if ends or empty else 1)
        summary = self._summary(scanner=scanner, scan=scan, prints=prints, outcome=outcome,
                                last=(last_raw, last), line_no=text.line_no,
                                line_count=line_count)
        stop = read_planned_stop([last], text.line_no) or stop
        return summary.model_copy(update={"planned_stop": stop}), carry

    def _split(
        self, decoded: str, undecoded: str
    ) -> tuple[TextCarry, list[str], list[str]]:
        """(the text carry after ``decoded``, its raw lines, ANSI-stripped): the last line of
        each is the unfinished one."""
        before = self.carry.text
        newlines = before.newlines + decoded.count("\n")
        body = decoded[1:] if before.after_cr and decoded[:1] == "\n" else decoded
        combined = before.partial + body
        raws, lines = split_lines(combined, self.cap)
        after_cr = combined.endswith("\r") or (before.after_cr and not decoded)
        tail = combined[max(combined.rfind("\n"), combined.rfind("\r")) + 1 :]
        text = TextCarry(
            undecoded=undecoded, partial=tail[: self.cap] if self.cap >= 1 else tail,
            after_cr=after_cr, line_no=before.line_no + len(raws) - 1, newlines=newlines,
            ends_lf=decoded.endswith("\n") if decoded else before.ends_lf,
            empty=before.empty and not decoded)
        if self.cap < 1:  # a cap below one cuts differently (``split_lines``): keep it all
            raws[-1], lines[-1] = tail, strip_ansi(tail)
        return text, raws, lines

    def _faults(self, lines: Sequence[str], first: int) -> FoldScanner | None:
        try:
            scanner = restore_faults(self.carry.faults, lines, self.benign, first, self.mtime)
            needled = _LINE_NEEDLES.lines(lines)
            extra = pattern_lines(lines, self.benign, lambda line: _split_prefix(line)[1])
            if needled is None:
                scanner.advance()
            else:
                scanner.advance(sorted(extra.union(needled)) if extra else needled)
            scanner.settle()
        except Exception:
            _log.exception("parse_increment: fault scan failed on %d lines", len(lines))
            return None
        return scanner

    def _metrics(
        self,
        raws: Sequence[str],
        lines: Sequence[str],
        first: int,
        scanner: FoldScanner | None,
    ) -> FoldScan | None:
        try:
            scan = restore_metrics(self.carry.metrics, self.aliases, self.mtime)
            if self.seed is not None:
                scan.seed_head(self.seed)
            _follow_engine(scan, scanner, self.carry.faults.launch.last_ok_line)
            candidates = METRIC_LINES.lines(lines)
            feed_lines(scan, raws, lines,
                       range(len(lines)) if candidates is None else candidates, first)
        except Exception:
            _log.exception("parse_increment: metric pass failed on %d lines", len(lines))
            return None
        return scan

    def _fingerprint(self, lines: Sequence[str]) -> FingerprintFold | None:
        try:
            prints = FingerprintFold(self.carry.fingerprint)
            prints.feed(lines)
        except Exception:
            _log.exception("parse_increment: fingerprint failed on %d lines", len(lines))
            return None
        return prints

    def _summary(
        self,
        *,
        scanner: FoldScanner | None,
        scan: FoldScan | None,
        prints: FingerprintFold | None,
        outcome: OutcomeCarry,
        last: tuple[str, str],
        line_no: int,
        line_count: int,
    ) -> LogSummary:
        """``parse._summarise`` over the state so far and the unfinished last line."""
        last_raw, last_line = last
        faults = None
        if scanner is not None:
            try:
                engine_before = scanner.launch.last_ok_line
                scanner.lines, scanner.first = [last_line], line_no
                scanner.advance()
                scanner.tracebacks.close_all()
                faults = _frozen(scanner)
                if scan is not None:
                    _follow_engine(scan, scanner, engine_before)
            except Exception:
                _log.exception("parse_increment: fault scan failed on the last line")
                faults = None
        summary = LogSummary(line_count=line_count)
        engine_at = None
        if scan is not None:
            try:
                if last_line.strip():
                    scan.feed(last_line, last_raw, line_no)
                scan.close()
                summary = scan.summary(line_count, keep=KEEP_POINTS)
                engine_at = scan.engine_at
            except Exception:
                _log.exception("parse_increment: metric pass failed on the last line")
        fingerprint = prints.fingerprint(last_line) if prints is not None else None
        summary = summary.model_copy(update={
            "fingerprint": fingerprint, "outcome": _last_outcome(outcome, last_line, line_no),
            "total_steps": capped_total(summary.total_steps, fingerprint)})
        if faults is None:
            return summary
        infra = faults.infra
        if engine_at is not None:
            infra = infra.model_copy(update={"last_engine_ok_at": engine_at})
        return summary.model_copy(update={
            "step_quiet_since": step_quiet_since(summary, faults.marks),
            "faults": faults.faults, "benign_counts": dict(faults.benign_counts),
            "infra": infra, "bring_up": faults.bring_up and not summary.points})


def _decode(undecoded: str, data: str | bytes) -> tuple[str, str]:
    """(the text of ``data`` after the carried bytes, the hex of a UTF-8 sequence it cuts)."""
    if isinstance(data, str):
        flushed = codecs.decode(bytes.fromhex(undecoded), "utf-8", "replace")
        return flushed + data, ""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.setstate((bytes.fromhex(undecoded), 0))
    decoded = decoder.decode(bytes(data), final=False)
    return decoded, decoder.getstate()[0].hex()


def _follow_engine(scan: FoldScan, scanner: FoldScanner | None, before: int | None) -> None:
    """Point the metric pass at the engine's last 200 when this read found a newer one (the
    whole pass reads the log clock at that line, ``parse._summarise``)."""
    if scanner is not None and scanner.launch.last_ok_line != before:
        scan.engine_line, scan.engine_at = scanner.launch.last_ok_line, None


def _snapshot_metrics(scan: FoldScan | None) -> MetricCarry:
    try:
        return MetricCarry() if scan is None else snapshot_metrics(scan)
    except Exception:
        _log.exception("parse_increment: metric snapshot failed")
        return MetricCarry()


def _snapshot_faults(scanner: FoldScanner | None) -> FaultCarry:
    try:
        return FaultCarry() if scanner is None else snapshot_faults(scanner)
    except Exception:
        _log.exception("parse_increment: fault snapshot failed")
        return FaultCarry()


def _outcome(carry: OutcomeCarry, lines: Sequence[str], first: int) -> OutcomeCarry:
    """The last pytest summary and upload target among the newest ``OUTCOME_LINES`` lines.

    ``read_outcome`` of one line reads it only if its gate keeps it: the gate is judged
    once over the window (per line, as the gate judges), not once per line."""
    pytest, pushed = carry.pytest, carry.pushed
    found_pytest = found_pushed = False
    start = max(0, len(lines) - OUTCOME_LINES)
    kept = OUTCOME_GATE.lines(lines, start)
    for index in reversed(range(len(lines) - start) if kept is None else kept):
        seen = read_outcome([lines[start + index]], gated=kept is None)
        if seen is None:
            continue
        if not found_pytest and seen.pytest_summary is not None:
            pytest, found_pytest = (first + start + index, seen.pytest_summary), True
        if not found_pushed and seen.pushed is not None:
            pushed, found_pushed = (first + start + index, seen.pushed), True
        if found_pytest and found_pushed:
            break
    return OutcomeCarry(pytest=pytest, pushed=pushed)


def _last_outcome(carry: OutcomeCarry, last: str, line_no: int) -> LogOutcome | None:
    """``read_outcome`` over the last ``OUTCOME_LINES`` lines, ``last`` the newest."""
    window = line_no - OUTCOME_LINES
    seen = read_outcome([last])
    pytest = seen.pytest_summary if seen is not None else None
    pushed = seen.pushed if seen is not None else None
    if pytest is None and carry.pytest is not None and carry.pytest[0] > window:
        pytest = carry.pytest[1]
    if pushed is None and carry.pushed is not None and carry.pushed[0] > window:
        pushed = carry.pushed[1]
    if pytest is None and pushed is None:
        return None
    return LogOutcome(pytest_summary=pytest, pushed=pushed)

