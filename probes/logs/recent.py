"""The metric pass read back from the end of a tail: only as deep as the report looks.

Policy. The report reads a job's metric history no deeper than its last few dozen steps: the
collapse rule judges the last ``collapse_recent_steps`` (5) steps, each against a window of the
previous ``window`` (10, needing ``min_window`` 5) values; Trend words and sparklines use the
last 8 values, ``/job``'s history table the last 10 points, the first-launch test whether there
are 10. So the pass keeps the ``HISTORY_DEPTH`` (32) steps logged last (a run restarted from
step 0 shows its new steps, not the old run's higher ones), twice the 15 a dense metric
needs, so a metric logged every other step still fills its windows; the bot's Redis history
carries longer runs across sweeps.

It feeds ``MetricScan`` the candidate lines of a suffix of the tail, and deepens the suffix
(by the lines per step seen, at least x2) until it holds ``HISTORY_DEPTH + MARGIN`` steps or
is the whole tail. The ``MARGIN`` steps a suffix logged first are dropped: a SkyRL header,
reward line or multi-line dict cut by the suffix's start can only touch those. A suffix is
also deepened while an HF dict has no bar count to take its step from (only the start of the
log may number those 1, 2, ...; a tail cut from a longer log takes HF's banner from the
log's head, ``seed``, and claims no step by a count: ``MetricScan.seed_head``; such a tail is
deepened only while a progress bar or a checkpoint save line before the suffix may number its
dicts: with none, a count from further back would be no step either, and a 1 MiB tail of
bar-less dicts cost 260 ms, not 7 ms, read to its first line), and while SkyRL's batches
bar leads its step by resampled batches the suffix cannot measure (no ``Step N:`` dict or
``global_step_N`` save in it: ``probes.logs.skyrl_batches``). Known limit: a
step numbered from state before the suffix (an HF dict after a run of bar-less dicts, a SkyRL
reward line's step already logged) may differ; a real log's order re-anchors those at the
next bar. The rate needs nothing deeper: bars are skimmed over the whole tail, the last
``WIDE_WINDOW + 1`` Megatron iteration lines before the suffix too, and a rate from step
stamps reads the kept steps only.

What the tail says once, anywhere, is still read from the whole tail: the lines before the
suffix that hold a progress bar or a marker needle (banner totals such as ``Total optimization
steps``, checkpoint saves, completion marks, Harbor progress, rollout geometry) are skimmed
first, with no metric recorded; the log clock enters the suffix at the last stamp before it,
and the engine's last 200 is read at its own line wherever it is. So a 2 GB log costs what
its last steps cost, and the summary's fields equal the full pass's (the property tests hold
the two together), but ``formats``, which no rule reads: it names the formats of the lines
read.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import compress, islice, repeat
from operator import contains, itemgetter

from probes.logs.bar_lines import BAR_SHAPE, own_bars, parse_tqdm
from probes.logs.clock import (
    STAMP_LEADS,
    LogClock,
    YearlessStamp,
    place_in_year,
    read_stamp,
)
from probes.logs.harbor_progress import ROW_SHAPE
from probes.logs.history import MetricScan

# Re-exported (a fold's increment, probes.logs.incremental, is fed as the suffix is); the
# redundant alias is how mypy --strict is told the re-export is meant.
from probes.logs.line_feed import feed_lines as feed_lines  # noqa: PLC0414
from probes.logs.lines import (
    MMENGINE_EPOCH_GATE,
    MMENGINE_GATE,
    NESTED_BAR_MARK,
    XTUNER_GATE,
    may_be_iteration,
    parse_iteration,
    parse_verl,
    strip_ray_prefix,
)
from probes.logs.prefilter import NeedleFilter, held_skeletons
from probes.logs.progress import WIDE_WINDOW
from probes.logs.scan_patterns import MARKER_GATES, METRIC_LINES, SKYRL_HEADER_RE
from probes.models import LogSummary

HISTORY_DEPTH = 32
"""Steps of metric history one tail's summary keeps (see the module policy)."""
MARGIN = 2
_MAX_DICT_RUN = 5000
"""As ``MetricScan`` gives up on a dict: lines looked back over for its opening brace."""
_FIRST_SPAN = 2 * (HISTORY_DEPTH + MARGIN) + 4
"""Candidate lines in the first suffix tried: enough at two lines a step (HF's bar redraw and
dict at ``logging_steps=1``; verl and Megatron log one), with a step cut at each end; a
retry aims at the depth from the lines per step seen so far, and at least doubles."""
MARKER_LINES = NeedleFilter(("train_runtime", *MARKER_GATES), shape=ROW_SHAPE + b"|" + BAR_SHAPE)
"""The lines before the suffix worth skimming: progress bars (the training bar is the most
redrawn over the whole tail; by ``BAR_SHAPE``, not a ``%|`` needle, which also kept a
million lines that only look like bars), every needle of ``MetricScan._markers``, and the
``train_runtime`` of HF's end-of-training dict."""
ITERATION_LINES = NeedleFilter(
    ("iteration", MMENGINE_GATE.lower(), MMENGINE_EPOCH_GATE.lower(), XTUNER_GATE))
_STAMP_OR_RAY = tuple(sorted(STAMP_LEADS | {"("}))


def recent_metrics(
    raws: Sequence[str],
    lines: Sequence[str],
    *,
    aliases: Mapping[str, str],
    mtime: datetime | None,
    engine_line: int | None,
    first_line_no: int,
    line_count: int,
    seed: Sequence[str] | None = None,
) -> tuple[LogSummary, datetime | None]:
    """(summary with the last ``HISTORY_DEPTH`` steps, the log clock at ``engine_line``);
    ``seed``: the head lines of a tail cut from a longer log (``MetricScan.seed_head``)."""
    candidates = METRIC_LINES.lines(lines)
    if candidates is None:
        candidates = list(range(len(lines)))
    # The span counts the candidates that hold text: a blank line is one only for EasyR1's
    # YAML shape (the end of a block), and HF's ``\r`` redraws leave one before every bar.
    filled = list(compress(range(len(candidates)),
                           map(str.strip, map(lines.__getitem__, candidates))))
    span = _FIRST_SPAN
    anchors: int | None = None
    while True:
        cut = filled[len(filled) - span] if len(filled) > span else 0
        start = candidates[cut] if cut else 0
        scan = _scan_suffix(raws, lines, candidates, cut, start=start, aliases=aliases,
                            mtime=mtime, engine_line=engine_line, first_line_no=first_line_no,
                            seed=seed)
        got = len(scan.points)
        # SkyRL's batches bar read mid-log leads the step by resampled batches no anchor of
        # this pass measured (``SkyrlBatches.unsettled``): deeper, to an anchor or the start.
        settled = not scan.skyrl_batches.unsettled
        if start == 0 or (got >= HISTORY_DEPTH + MARGIN and not scan.hf_guessed and settled):
            break
        if got >= HISTORY_DEPTH + MARGIN and seed is not None:
            # A cut tail's bar-less HF dicts: deeper, only a bar or a save line numbers them.
            anchors = _first_anchor(lines) if anchors is None else anchors
            if anchors >= start:
                break  # none before the suffix: a count from further back is no step either
        # Aim at the depth from the lines per step seen so far (at least doubling each time).
        # None seen: the whole tail at once. Each pass skims every marker line before its
        # suffix again, and deepening by four a tail of a million lines that only look like
        # markers (a job printing '%|' over and over) took seven passes and 21 s, enough for
        # a few such jobs to run a cluster's sweep past its deadline.
        span = (max(2 * span, span * (HISTORY_DEPTH + 2 * MARGIN) // got) if got
                else len(filled))
    engine_at = scan.engine_at
    if engine_line is not None and engine_line < first_line_no + start:
        engine_at = clock_at(lines, engine_line - first_line_no, mtime, inclusive=True,
                             among=candidates)
    return scan.summary(line_count, keep=HISTORY_DEPTH), engine_at


def _first_anchor(lines: Sequence[str]) -> int:
    """The index of the first line of ``lines`` that may number a cut tail's bar-less HF
    dicts (``MetricScan._on_hf_dict``): a progress bar (the training bar's count), or
    ``_on_hf_save``'s checkpoint save line; ``len(lines)`` where none does."""
    return next((at for at, line in enumerate(lines)
                 if "%|" in line or "Saving model checkpoint" in line), len(lines))


def _scan_suffix(
    raws: Sequence[str],
    lines: Sequence[str],
    candidates: Sequence[int],
    cut: int,
    *,
    start: int,
    aliases: Mapping[str, str],
    mtime: datetime | None,
    engine_line: int | None,
    first_line_no: int,
    seed: Sequence[str] | None = None,
) -> MetricScan:
    """Skim the markers before ``start``, then the full pass over ``candidates[cut:]`` (all
    >= start); a cut tail's ``seed`` first."""
    in_suffix = engine_line is not None and engine_line >= first_line_no + start
    scan = MetricScan(aliases, mtime, engine_line if in_suffix else None)
    if seed is not None:
        scan.seed_head(seed)
    if start:
        _skim_all(scan, raws, lines, _skimmed(lines, start), first_line_no)
        scan.enter_suffix(clock_at(lines, start - 1, mtime, inclusive=True, among=candidates))
    feed_lines(scan, raws, lines, candidates[cut:], first_line_no)
    scan.close(at_log_start=start == 0)
    return scan


def _skim_all(scan: MetricScan, raws: Sequence[str], lines: Sequence[str],
              skimmed: Sequence[int], first_line_no: int) -> None:
    """``skim`` of each line at ``skimmed``, in order; a run of bar lines that are their own
    body (found by one regex pass over them all) takes ``skim_bars``."""
    found = own_bars([lines[index] for index in skimmed])
    counts = list(map(itemgetter(1), found))
    memo = _DictMemo()
    at, end = 0, len(skimmed)
    while at < end:
        if counts[at]:
            try:
                stop = counts.index("", at)
            except ValueError:
                stop = end
            run = skimmed[at:stop]
            base = scan.bar_seq  # skim_bars counts the run's lines: each glued end is placed
            scan.skim_bars(found[at:stop],
                           list(map(contains, map(raws.__getitem__, run), repeat(NESTED_BAR_MARK))))
            for offset in compress(range(len(run)), map(contains, map(lines.__getitem__, run),
                                                        repeat("train_runtime"))):
                # HF's end dict on a bar's line (``skim``), at its place among the redraws
                scan.skim_glued(lines[run[offset]], base + offset + 1)
            for offset in compress(range(len(run)), map(contains, map(lines.__getitem__, run),
                                                        repeat("` stopped: `"))):
                scan.finish_marks(lines[run[offset]], base + offset + 1)  # Lightning's finish
            at = stop
        else:
            _skim(scan, lines, raws, skimmed[at], first_line_no, memo=memo)
            at += 1


def _skim(scan: MetricScan, lines: Sequence[str], raws: Sequence[str], index: int,
          first_line_no: int, *, memo: _DictMemo | None = None) -> None:
    line = lines[index]
    quoted = strip_ray_prefix(line).lstrip()[:1] in ("'", '"')
    inside = quoted and (memo.inside(lines, index) if memo is not None
                         else _inside_dict(lines, index))
    scan.skim(line, raws[index], first_line_no + index, in_dict=inside)


class _DictMemo:
    """``_inside_dict`` for quoted lines asked in ascending order (the skimmed ones): a walk
    back that reaches the line asked last goes on from there as that walk went, so its answer
    is reused (when the line it was decided at is within this walk's ``_MAX_DICT_RUN``). A
    config dump of thousands of quoted lines is walked once, not once per marker in it."""

    def __init__(self) -> None:
        self.asked = -1
        """The quoted line asked last (-1: none)."""
        self.answer = False
        self.decided = -1
        """Where that walk stopped: the line that decided it, or its last line looked at."""

    def inside(self, lines: Sequence[str], index: int) -> bool:
        floor = max(-1, index - _MAX_DICT_RUN)
        asked = self.asked
        if floor < asked < index and self.decided > floor:
            answer, decided = _walk_back(lines, index, asked)
            if decided < 0:  # reached the line asked last, undecided: it goes on as before
                stripped = strip_ray_prefix(lines[asked]).strip()
                if stripped.endswith("}"):  # quoted, and it closed a dict
                    answer, decided = False, asked
                else:
                    answer, decided = self.answer, self.decided
        else:
            answer, decided = _walk_back(lines, index, floor)
            decided = decided if decided >= 0 else floor + 1
        self.asked, self.answer, self.decided = index, answer, decided
        return answer


def _walk_back(lines: Sequence[str], index: int, stop: int) -> tuple[bool, int]:
    """``_inside_dict``'s walk from ``index - 1`` down to (not including) ``stop``: (its
    answer, the line that decided it), or (False, -1) when no line there decided."""
    for back in range(index - 1, stop, -1):
        decided = _decides(lines[back])
        if decided is not None:
            return decided, back
    return False, -1


def _decides(line: str) -> bool | None:
    """What one line looked back at tells ``_inside_dict`` (None: look further back)."""
    body = strip_ray_prefix(line)
    stripped = body.strip()
    lead = stripped[:1]
    if lead in ("'", '"'):
        return False if stripped.endswith("}") else None
    if lead == "{":
        return not stripped.endswith("}")
    if "Step " in body and "{" in body:
        return _header_dict(body)
    return None


def _skimmed(lines: Sequence[str], start: int) -> list[int]:
    """The lines before ``start`` to skim: marker and bar lines, and the last Megatron
    iteration lines (the rate's widest window of them, and the last ``--train-iters``)."""
    marked = MARKER_LINES.lines(lines, 0, start)
    if marked is None:
        return list(range(start))
    iterations = ITERATION_LINES.lines(lines, 0, start) or []
    parsed = (i for i in reversed(iterations) if parse_iteration(strip_ray_prefix(lines[i])))
    last = list(islice(parsed, WIDE_WINDOW + 1))
    return sorted({*marked, *last}) if last else marked


def _inside_dict(lines: Sequence[str], index: int) -> bool:
    """Whether the full pass has a multi-line dict open at the quoted-key line at ``index``:
    looking back, a line opening one (a ``{`` line, or a SkyRL ``Step N: {`` header) comes
    before any quoted line ending in ``}`` (which closed it, or found none open). Every other
    line leaves an open dict open (``MetricScan.feed`` continues it past noise lines); an
    opening more than ``_MAX_DICT_RUN`` lines back is not looked for."""
    for back in range(index - 1, max(-1, index - _MAX_DICT_RUN), -1):
        body = strip_ray_prefix(lines[back])
        stripped = body.strip()
        lead = stripped[:1]
        if lead in ("'", '"'):
            if stripped.endswith("}"):
                return False  # an earlier dict closed here
            continue
        if lead == "{":
            return not stripped.endswith("}")
        if "Step " in body and "{" in body:
            opened = _header_dict(body)
            if opened is not None:
                return opened
    return False


def _header_dict(body: str) -> bool | None:
    """For a SkyRL ``Step N: {...`` header line as ``feed`` routes it: whether the dict it
    opens is left open (``None``: the line opens no dict)."""
    header = SKYRL_HEADER_RE.search(body)
    if header is None or not header.group(2):
        return None
    if (("%|" in body and parse_tqdm(body) is not None)
            or (may_be_iteration(body) and parse_iteration(body) is not None)
            or ("step:" in body and parse_verl(body) is not None)):
        return None  # read as a bar, iteration or verl line first
    return not header.group(2).rstrip().endswith("}")


def clock_at(
    lines: Sequence[str], index: int, mtime: datetime | None, *, inclusive: bool,
    among: Sequence[int] | None = None,
) -> datetime | None:
    """The log clock's reading at ``lines[index]``: its own stamp, else the last before it.

    Read backwards, so the cost is the distance to that stamp; ``among`` (ascending) names
    the only lines that may hold one (``METRIC_LINES`` keeps every stamp). A year-less stamp
    is placed by the file's mtime (the forward pass places it by the stamp before it: the two
    differ only for a tail that crosses New Year with no dated stamp near its end); with no
    mtime, by the nearest dated stamp before it (the forward pass's chain starts there: the
    two differ only where the year-less stamps after it drift half a year from it), and with
    neither it has no time, as in the forward pass. Within ``shared_skeletons``, a tail none
    of whose lines may hold a time is not walked at all.
    """
    held = held_skeletons(lines)
    if held is not None and not held.may_hold_time():
        return None  # no line holds a stamp: nothing to walk back over
    stop = index if inclusive else index - 1
    backwards: Sequence[int] = range(stop, -1, -1)
    if among is not None:
        below = bisect_right(among, stop)
        backwards = among[below - 1 :: -1] if below else ()
    # Only a Ray prefix moves a line's start: a line led by neither it nor a stamp's first
    # character holds no stamp (judged in C, as the walk goes).
    leads = map(str.startswith, map(lines.__getitem__, backwards), repeat(_STAMP_OR_RAY))
    for back in compress(backwards, leads):
        body = strip_ray_prefix(lines[back])
        if body[:1] in STAMP_LEADS:
            stamp = read_stamp(body)
            if isinstance(stamp, YearlessStamp) and mtime is None:
                dated = _dated_before(lines, back)
                return None if dated is None else place_in_year(stamp, dated)
            if stamp is not None:
                return LogClock(mtime).place(stamp)
    return None


_DATED_LINES = NeedleFilter(("-- ::", "--t::"), unicode_digits=True)
"""The lines that may hold a dated stamp (``YYYY-MM-DD[ T]HH:MM:SS`` once digits are deleted:
``-- ::``, ``--t::``; a stamp of non-ASCII digits keeps them)."""


def _dated_before(lines: Sequence[str], index: int) -> datetime | None:
    """The nearest dated stamp (one with its year) leading a line before ``index``."""
    dated = _DATED_LINES.lines(lines)
    if dated is None:
        backwards: Sequence[int] = range(index - 1, -1, -1)
    else:
        below = bisect_left(dated, index)
        backwards = dated[below - 1 :: -1] if below else ()
    for back in backwards:
        body = strip_ray_prefix(lines[back])
        if body[:1] in STAMP_LEADS:
            stamp = read_stamp(body)
            if isinstance(stamp, datetime):
                return stamp
    return None
