"""Turn a bounded log tail into a ``LogSummary``: metric history, progress, rate, faults.

Policy: ``parse_log`` is a pure function over text (or bytes) that never raises. It splits on
``\\n`` and ``\\r`` (tqdm redraws), truncates every line to ``max_line_chars``, strips ANSI and
Ray ``(Name pid=N)`` prefixes, and reads the formats real trainers print: SkyRL ``Step N:``
pprint dicts and reward lines, verl ``step:N - k:v`` lines, Hugging Face Trainer / TRL
per-step dicts, Megatron ``iteration N/ T | key: value | ...`` lines (``T`` is the run's
``--train-iters``; the rate comes from their per-iteration times), OpenRLHF's ``Global step N:
{status}`` lines, NeMo-RL's ``===== Step N/M =====`` banners and ``  • Label: value`` result
bullets, prime-rl's ``Step N | <time> | Label value | ...`` lines. That metric pass is
``probes.logs.history``; the training progress bar is told apart from tokenizer/packing/
dataset/eval bars (``probes.logs.progress``); the rate is a trailing window that one
checkpoint-save spike does not move. Faults, benign noise and launch checks come from
``probes.logs.faults``. Every time is on the log's own clock (``probes.logs.clock``): the
file's ``mtime`` places year-less stamps before the log shows a dated one, and the engine's
last 200 is the clock's reading at that line, so a stamp-less access line still has a time.

Speed policy: the tail is split in C, and a whole-text prefilter (``probes.logs.prefilter``) hands
``MetricScan.feed`` only the lines holding one of its substring gates, a dict brace or quote, or
a timestamp's ``HH:MM:SS``; ``feed`` does nothing with any other line. Metrics are read back
from the end, only as deep as the report looks (the last ``HISTORY_DEPTH`` steps,
``probes.logs.recent``), while markers printed once (banner totals, checkpoint saves) are still
found anywhere in the tail; faults keep their whole-tail prefilter. The result is the per-line,
whole-tail reference's (``_parse_reference``, which the property tests compare against).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from probes.logs.bracket_lines import DURATION_GATE
from probes.logs.config_total import capped_total, config_total
from probes.logs.faults import FaultScan, scan_faults
from probes.logs.fingerprint import read_fingerprint
from probes.logs.history import MetricScan
from probes.logs.launch_checks import quiet_since
from probes.logs.lines import split_lines, strip_ansi
from probes.logs.outcome import read_outcome
from probes.logs.pair_lines import MAXTEXT_STEPS
from probes.logs.planned_stop import read_planned_stop
from probes.logs.prefilter import shared_skeletons
from probes.logs.progress import trailing_rate
from probes.logs.recent import HISTORY_DEPTH, recent_metrics
from probes.logs.scan_patterns import EPOCH_CONFIG_GATES, VERL_SFT_STEPS
from probes.logs.slime_lines import ARGS_GATE
from probes.logs.titan_lines import TITAN_INIT
from probes.models import LogSummary

__all__ = ["parse_log", "trailing_rate"]

_log = logging.getLogger(__name__)

_SPLIT_RE = re.compile(r"\r\n?|\n")


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return text


def parse_log(
    text: str | bytes,
    *,
    aliases: Mapping[str, str] | None = None,
    benign_patterns: Sequence[str] = (),
    first_line_no: int = 1,
    max_line_chars: int = 65536,
    mtime: datetime | None = None,
    log_start: bool = True,
    head: str | None = None,
) -> LogSummary:
    """Summarise one bounded log tail; never raises (a parser bug is logged, not propagated).

    ``mtime`` is the file's modification time, the year of year-less stamps (vLLM, glog)
    until the log prints a dated one. ``log_start``: the text begins at the log's first byte
    (else it is a tail cut from a longer log, and ``head``, the log's first bytes, is read
    for the HF training banner: ``MetricScan.seed_head``).
    """
    decoded = _decode(text)
    split = split_lines(decoded, max_line_chars)
    with shared_skeletons(split[1]):  # every reader's prefilter over the same lines
        return _summarise(decoded, split, aliases, benign_patterns, first_line_no, mtime=mtime,
                          seed=head_seed(log_start, head))


def head_before(head: str | None, offset: int) -> str | None:
    """The whole lines of ``head`` (a log's first bytes, the collector's ``head``) that end
    before byte ``offset``, where the tail read beside it starts. A log not much longer than
    the tail has a head that runs into the tail (a 1.1 MiB log: its 1 MiB tail from 0.1 MiB,
    its 256 KiB head past that), and a line read in both would be read twice: a trainer's
    start line there would seem printed again (``MetricScan.seed_head``)."""
    if head is None:
        return None
    data = head.encode("utf-8", "replace")
    if len(data) <= offset:
        return head
    return data[:data.rfind(b"\n", 0, max(0, offset)) + 1].decode("utf-8", "ignore")


def head_seed(log_start: bool, head: str | None) -> list[str] | None:
    """What ``MetricScan.seed_head`` reads before a cut tail (None: the text is the log's
    start): the head's lines that can hold what it reads (a banner's ``Num ...``/``Total
    ...`` line, a ``logging_*`` argument), ANSI stripped (``[]`` with no head). Only those are
    kept: a 256 KiB head is thousands of lines, and the scan reads it again at each deepening
    of the suffix (stripping and keeping every line cost a 200-step tail 21 ms, not 2 ms)."""
    if log_start:
        return None
    lines: list[str] = []
    text, end = head or "", -1
    for at in sorted(_needle_positions(text)):
        if at < end:
            continue  # on the line taken last
        start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
        ends = [e for e in (text.find("\n", at), text.find("\r", at)) if e >= 0]
        end = min(ends) if ends else len(text)
        lines.append(strip_ansi(text[start:end]))
    return lines


_SEED_NEEDLES = ("Num", "Total", "logging_", "rollout_batch_size", "training loop",
                 "orchestrator loop", TITAN_INIT, ARGS_GATE, DURATION_GATE, MAXTEXT_STEPS,
                 "max_steps=", "total_training_steps", "total_train_steps ",
                 *EPOCH_CONFIG_GATES)
"""What a line ``MetricScan.seed_head`` reads holds (``max_steps=``: a one-line config repr
such as ROLL's, for the total from the printed config, ``_read_run``; ``total_training_steps``:
verl's SFT trainers' one-line config, whose limit caps their steps line; ``total_train_steps``:
verl's fully-async trainer's total, ``BANNER_RE`` group 4; the run's epochs, torchtune's
``epochs: 3`` and mmengine's ``max_epochs=3``, which with an epoch's steps give the total)."""


def _needle_positions(text: str) -> list[int]:
    """Where each of ``_SEED_NEEDLES`` occurs in ``text`` (``str.find``: the head is never
    split, nor scanned by a regex, which tries each of its 256 K positions)."""
    found = []
    for needle in _SEED_NEEDLES:
        at = text.find(needle)
        while at >= 0:
            found.append(at)
            at = text.find(needle, at + len(needle))
    resumed = text.find("consumed_samples: ")
    while resumed >= 0:  # OpenRLHF's resume line, and the first Episode bar after it
        found.append(resumed)
        bar = text.find("Episode [", resumed)
        if bar >= 0:
            found.append(bar)
        resumed = text.find("consumed_samples: ", resumed + 1)
    return found


def _parse_reference(
    text: str | bytes,
    *,
    benign_patterns: Sequence[str] = (),
    first_line_no: int = 1,
    mtime: datetime | None = None,
    log_start: bool = True,
    head: str | None = None,
) -> LogSummary:
    """``parse_log`` without prefilters: every line through every rule (the tests' oracle)."""
    decoded = _decode(text)
    raws = [p[:65536] if len(p) > 65536 else p for p in _SPLIT_RE.split(decoded)]
    lines = [strip_ansi(raw) for raw in raws]
    return _summarise(
        decoded, (raws, lines), None, benign_patterns, first_line_no, fast=False, mtime=mtime,
        seed=head_seed(log_start, head))


def _summarise(
    decoded: str,
    split: tuple[Sequence[str], Sequence[str]],
    aliases: Mapping[str, str] | None,
    benign_patterns: Sequence[str],
    first_line_no: int,
    *,
    fast: bool = True,
    mtime: datetime | None = None,
    seed: Sequence[str] | None = None,
) -> LogSummary:
    """The fault scan and the metric pass over (raw, ANSI-stripped) lines; ``fast`` prefilters;
    ``seed``: a cut tail's head lines (``head_seed``).

    The two fail independently: a bug in one must not hide the other's findings, and a sweep
    never dies on a log. Such a bug is logged with its trace.
    """
    raws, lines = split
    line_count = decoded.count("\n") + (0 if decoded.endswith("\n") or not decoded else 1)
    faults: FaultScan | None = None
    try:
        faults = scan_faults(lines, benign_patterns=benign_patterns,
                             first_line_no=first_line_no, mtime=mtime, prefilter=fast)
    except Exception:
        _log.exception("parse_log: fault scan failed on a %d-character tail", len(decoded))
    engine_line = faults.last_engine_ok_line if faults is not None else None
    engine_at: datetime | None = None
    try:
        if fast:
            summary, engine_at = recent_metrics(
                raws, lines, aliases=aliases or {}, mtime=mtime, engine_line=engine_line,
                first_line_no=first_line_no, line_count=line_count, seed=seed)
        else:
            summary, engine_at = _scan_all_metrics(
                split, aliases or {}, mtime, engine_line, first_line_no=first_line_no,
                line_count=line_count, seed=seed)
    except Exception:
        _log.exception("parse_log: metric pass failed on a %d-character tail", len(decoded))
        summary = LogSummary(line_count=line_count)
    summary = _read_run(summary, lines, first_line_no, len(decoded), seed)
    return summary if faults is None else _with_faults(summary, faults, engine_at)


def _scan_all_metrics(
    split: tuple[Sequence[str], Sequence[str]],
    aliases: Mapping[str, str],
    mtime: datetime | None,
    engine_line: int | None,
    *,
    first_line_no: int,
    line_count: int,
    seed: Sequence[str] | None,
) -> tuple[LogSummary, datetime | None]:
    """The metric pass with no prefilter: every non-blank line fed to one :class:`MetricScan`;
    the summary, and the engine's clock at its last healthy line."""
    raws, lines = split
    scan = MetricScan(aliases, mtime, engine_line)
    if seed is not None:
        scan.seed_head(seed)
    for index in range(len(lines)):
        if lines[index].strip():
            scan.feed(lines[index], raws[index], first_line_no + index)
    scan.close()
    return scan.summary(line_count, keep=HISTORY_DEPTH), scan.engine_at


def _read_run(summary: LogSummary, lines: Sequence[str], first_line_no: int,
              chars: int, seed: Sequence[str] | None = None) -> LogSummary:
    """``summary`` with what the run runs, a catch-all job's closing signal (issue 11) and a
    planned stop; as it was if a reader fails (logged: the sweep goes on). The total is capped
    by the printed config's step limit, or is that limit with none yet (``capped_total``):
    the tail's config, else its head's (``seed``)."""
    try:
        fingerprint = read_fingerprint(lines)
        total = capped_total(summary.total_steps, fingerprint)
        # The head's config is read (tens of ms) only when the tail's gave no total, or gave
        # verl's SFT steps line, which its config may cap.
        uncapped = VERL_SFT_STEPS in summary.formats and config_total(fingerprint) is None
        if seed and (total is None or uncapped):
            total = capped_total(total, read_fingerprint(seed))
        return summary.model_copy(update={
            "fingerprint": fingerprint, "outcome": read_outcome(lines, last=400),
            "planned_stop": read_planned_stop(lines, first_line_no), "total_steps": total})
    except Exception:
        _log.exception("parse_log: run readers failed on a %d-character tail", chars)
        return summary


def _with_faults(summary: LogSummary, faults: FaultScan,
                 engine_at: datetime | None) -> LogSummary:
    """``summary`` with the fault scan's findings (and the engine clock the metrics read)."""
    infra = faults.infra
    if engine_at is not None:  # the whole log's clock at the last 200 (see the module policy)
        infra = infra.model_copy(update={"last_engine_ok_at": engine_at})
    return summary.model_copy(
        update={
            "step_quiet_since": step_quiet_since(summary, faults.marks),
            "faults": faults.faults,
            "benign_counts": dict(faults.benign_counts),
            "infra": infra,
            "bring_up": faults.bring_up and not summary.points,
        }
    )


def step_quiet_since(summary: LogSummary, marks: Sequence[tuple[int, datetime]]
                     ) -> datetime | None:
    """``LogSummary.step_quiet_since``: the first stamped engine line after the last logged
    step, when that step's line has no stamp (``launch_checks.quiet_since``)."""
    last = summary.points[-1] if summary.points else None
    return quiet_since(marks, last.line_no if last else None, last.wall_time if last else None)
