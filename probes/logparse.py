"""Turn a bounded log tail into a ``LogSummary``: metric history, progress, rate, faults.

Policy: ``parse_log`` is a pure function over text (or bytes) that never raises. It splits on
``\\n`` and ``\\r`` (tqdm redraws), truncates every line to ``max_line_chars``, strips ANSI and
Ray ``(Name pid=N)`` prefixes, and reads the formats real trainers print: SkyRL ``Step N:``
pprint dicts and reward lines, verl ``step:N - k:v`` lines, Hugging Face Trainer / TRL
per-step dicts. Only canonical metric names (``probes.metric_names``) reach a point. A dict
cut at the top of the tail is dropped, never misread. The training progress bar is told
apart from tokenizer/packing/dataset/eval bars; the rate is a trailing window that one
checkpoint-save spike does not move. Faults and benign noise come from ``probes.faults``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from math import isfinite
from statistics import median

from probes.faults import _scan_reference, scan_faults
from probes.logline import (
    ANSI_RE,
    NESTED_BAR_MARK,
    TqdmBar,
    parse_number,
    parse_pairs,
    parse_reward_line,
    parse_timestamp,
    parse_tqdm,
    parse_verl,
    strip_ansi,
    strip_ray_prefix,
)
from probes.metric_names import canonical_name, canonical_values
from probes.models import LogSummary, MetricPoint, ProgressBar
from probes.prefilter import NeedleFilter

_log = logging.getLogger(__name__)


_SPLIT_RE = re.compile(r"\r\n?|\n")
_SKYRL_HEADER_RE = re.compile(r"\bStep (\d{1,12}):\s*(\{.*)?$")
_BANNER_RE = re.compile(
    r"Total optimization steps = ([\d,]{1,20})|Total training steps: ?(\d{1,12})"
)
_CHECKPOINT_RE = re.compile(
    r"(?i)(?:\bsav(?:ed|ing|e)\b.{0,300}?|local_global_step_folder:\s*\S{0,300}?)"
    r"(?:global_step_|checkpoint-)(\d{1,12})"
    r"|(?i:saved checkpoint)\b.{0,80}?\bstep[ _=:]{0,3}(\d{1,12})"
)
_HARBOR_RE = re.compile(r"(?:^|\s)(\d{1,9})/(\d{1,9}) (?:Mean: ?(\S{1,32})|Running trials)")
_SAMPLES_RE = re.compile(r"\bn_samples_per_prompt['\"]?\s*[:=]\s*(\d{1,6})")
_BATCH_RE = re.compile(r"(?<![\w.])train_batch_size['\"]?\s*[:=]\s*(\d{1,9})")
_FINISH_MARKS = ("Training done!", "Reached max_training_steps", "Final validation metrics")
_TRAIN_DESCS = frozenset(
    {"", "Training Progress", "Training Batches Processed", "Training", "Train", "Steps"}
)
_SKYRL_BAR = "Training Batches Processed"
_STEP_KEYS = ("trainer/global_step", "training/global_step", "global_step", "step")
_EVAL_PREFIXES = ("eval_", "test_", "predict_")
_METRIC_LINES = NeedleFilter(
    (
        *("%|", "step:", "Step ", "reward/", "Total", "heckpoint", "global_step_", "Mean:"),
        *("Running trials", "train_batch_size", "n_samples_per_prompt", *_FINISH_MARKS),
        *("{", "'", '"', "::"),
    ),
    unicode_digits=True,
)
"""Every line ``_Scan.feed`` acts on holds one of these: a substring gate of ``feed``, a dict's
brace or quoted key, or a timestamp's ``HH:MM:SS`` (``::`` once the prefilter deletes digits)."""
_MAX_DICT_LINES = 5000
_RATE_WINDOW = 10
_BAR_EVENTS_KEPT = 64
_CLOCK_FLOOR_S = 5.0


class _BarTrack:
    """Redraws of one (desc, total) bar: how often seen, the last one, (step, elapsed) events."""

    def __init__(self) -> None:
        self.count = 0
        self.last: TqdmBar | None = None
        self.events: list[tuple[int, float]] = []

    def add(self, bar: TqdmBar) -> None:
        self.count += 1
        self.last = bar
        if bar.elapsed_s is None:
            return
        if self.events and bar.current <= self.events[-1][0]:
            if bar.current < self.events[-1][0]:
                self.events.clear()  # a new bar (restart): its elapsed clock starts again
            else:
                return  # a refresh of the same step keeps the first sighting
        self.events.append((bar.current, bar.elapsed_s))
        if len(self.events) > _BAR_EVENTS_KEPT:
            del self.events[: -_BAR_EVENTS_KEPT // 2]


def _is_training_bar(bar: TqdmBar, nested: bool) -> bool:
    """Training bars have no desc (HF) or a trainer's own desc, and count iterations."""
    if nested or bar.desc not in _TRAIN_DESCS:
        return False
    return not bar.rate or bar.rate.endswith(("s/it", "it/s", "?it/s"))


def trailing_rate(events: Sequence[tuple[int, float]], window: int = _RATE_WINDOW) -> float | None:
    """Seconds per step over the last ``window`` steps, ignoring pairs far slower than typical.

    Pairs slower than 3x the median per-step time (a checkpoint save) are left out, then the
    rate is total time over total steps, which keeps the resolution of whole-second clocks.
    """
    recent = list(events)[-(window + 1) :]
    if len(recent) >= 2 and recent[-1][1] - recent[0][1] < _CLOCK_FLOOR_S:
        recent = list(events)  # sub-second steps on a whole-second clock: widen the window
    pairs = [(s1 - s0, t1 - t0) for (s0, t0), (s1, t1) in pairwise(recent) if s1 > s0 and t1 >= t0]
    if not pairs:
        return None
    typical = median(dt / ds for ds, dt in pairs)
    kept = [(ds, dt) for ds, dt in pairs if typical == 0 or dt / ds <= 3 * typical]
    steps = sum(ds for ds, _ in kept)
    seconds = sum(dt for _, dt in kept)
    return seconds / steps if steps and seconds > 0 else None


class _Scan:
    """The stateful pass over one tail; ``summary()`` freezes it into a ``LogSummary``."""

    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = aliases
        self.points: dict[int, MetricPoint] = {}
        self.formats: dict[str, None] = {}
        self.banner_total: int | None = None
        self.bars: dict[tuple[str, int], _BarTrack] = {}
        self.checkpoints: set[int] = set()
        self.finished = False
        self.last_ts: datetime | None = None
        self.year_hint: int | None = None
        self.header: tuple[int, datetime | None] | None = None
        self.dict_lines: list[str] | None = None
        self.dict_line_no = 0
        self.pending_reward: dict[str, float] | None = None
        self.hf_anchor: int | None = None
        self.hf_prev: int | None = None
        self.hf_unanchored: list[tuple[dict[str, float], int]] = []
        self.samples: int | None = None
        self.batch: int | None = None
        self.harbor: tuple[int, int, float | None] | None = None

    def feed(self, line: str, raw: str, line_no: int) -> None:
        """Classify one cleaned line; cheap substring tests gate every regex."""
        body = strip_ray_prefix(line)
        stamp = parse_timestamp(body, self.year_hint)
        if stamp is not None:
            self.last_ts = stamp
            self.year_hint = stamp.year
        lead = body.lstrip()[:1]
        if self.dict_lines is not None and lead in ("'", '"'):
            self._continue_dict(body, line_no)
            return
        if lead == "{":
            self._start_dict(body, line_no)
            return
        if "%|" in body:
            bar = parse_tqdm(body)
            if bar is not None:
                self._on_bar(bar, NESTED_BAR_MARK in raw)
                return
        if "step:" in body:
            verl = parse_verl(body)
            if verl is not None:
                self._mark("verl")
                self._record(verl[0], verl[1], line_no, None)
                return
        if "Step " in body:
            header = _SKYRL_HEADER_RE.search(body)
            if header is not None:
                self._on_header(int(header.group(1)), stamp, header.group(2), line_no)
                return
        if "reward/" in body:
            reward = parse_reward_line(body)
            if reward is not None:
                self._mark("skyrl")
                self.pending_reward = reward
                return
        self._markers(body)

    def _markers(self, body: str) -> None:
        """Banner totals, checkpoint saves, completion, Harbor progress, rollout geometry."""
        if "Total" in body:
            banner = _BANNER_RE.search(body)
            if banner is not None:
                if banner.group(1):  # SkyRL and verl both print "Total training steps: N"
                    self._mark("hf")
                self.banner_total = int((banner.group(1) or banner.group(2)).replace(",", ""))
        if "heckpoint" in body or "global_step_" in body:
            saved = _CHECKPOINT_RE.search(body)
            if saved is not None:
                self.checkpoints.add(int(saved.group(1) or saved.group(2)))
        if "Mean:" in body or "Running trials" in body:
            harbor = _HARBOR_RE.search(body)
            if harbor is not None:
                self._mark("harbor")
                mean = parse_number(harbor.group(3)) if harbor.group(3) else None
                self.harbor = (int(harbor.group(1)), int(harbor.group(2)), mean)
        if "train_batch_size" in body or "n_samples_per_prompt" in body:
            samples, batch = _SAMPLES_RE.search(body), _BATCH_RE.search(body)
            self.samples = int(samples.group(1)) if samples else self.samples
            self.batch = int(batch.group(1)) if batch else self.batch
        for mark in _FINISH_MARKS:
            if mark in body:
                self.finished = True
                self._mark("verl" if mark.startswith("Final") else "skyrl")

    def _mark(self, fmt: str) -> None:
        self.formats.setdefault(fmt, None)

    def _start_dict(self, body: str, line_no: int) -> None:
        self.dict_lines = [body]
        self.dict_line_no = line_no
        if body.rstrip().endswith("}"):
            self._finish_dict()

    def _continue_dict(self, body: str, line_no: int) -> None:
        assert self.dict_lines is not None
        self.dict_lines.append(body)
        if body.rstrip().endswith("}"):
            self._finish_dict()
        elif len(self.dict_lines) > _MAX_DICT_LINES:
            self.dict_lines = None

    def _finish_dict(self) -> None:
        text = "\n".join(self.dict_lines or ())
        self.dict_lines = None
        if text.count("{") > 1:
            return  # metric dicts are flat; a nested one is a config dump (verl pprints its config)
        pairs = parse_pairs(text)
        if pairs:
            self._on_dict(pairs, self.dict_line_no)

    def _on_dict(self, pairs: dict[str, float], line_no: int) -> None:
        """A complete dict: SkyRL step dict, HF/TRL per-step dict, or an end/eval summary."""
        if "train_runtime" in pairs:
            self.finished = True
            self._mark("hf")
            return
        if self.header is not None:
            step, stamp = self.header
            self.header = None
            merged = {**(self.pending_reward or {}), **pairs}
            self.pending_reward = None
            self._mark("skyrl")
            self._record(step, merged, line_no, stamp)
            return
        if any(key.startswith(_EVAL_PREFIXES) for key in pairs):
            return
        for key in _STEP_KEYS:
            explicit = pairs.get(key)
            if explicit is not None and isfinite(explicit) and 0 <= explicit < 1e15:
                self._record(int(explicit), pairs, line_no, None)
                return
        if any(canonical_name(key, self.aliases) for key in pairs):
            self._mark("hf")
            self._on_hf_dict(pairs, line_no)

    def _on_hf_dict(self, pairs: dict[str, float], line_no: int) -> None:
        """HF dicts carry no step: take the training bar's count, never going backwards."""
        following = None if self.hf_prev is None else self.hf_prev + 1
        known = [s for s in (self.hf_anchor, following) if s is not None]
        if not known:
            self.hf_unanchored.append((pairs, line_no))
            return
        step = max(1, *known)
        for back, (early, early_line) in enumerate(reversed(self.hf_unanchored), start=1):
            if step - back >= 1:
                self._record(step - back, early, early_line, None)
        self.hf_unanchored.clear()
        self.hf_prev = step
        self._record(step, pairs, line_no, None)

    def _on_header(self, step: int, stamp: datetime | None, inline: str | None, no: int) -> None:
        self._mark("skyrl")
        self.header = (step, stamp)
        if inline:
            self._start_dict(inline, no)

    def _on_bar(self, bar: TqdmBar, nested: bool) -> None:
        if not _is_training_bar(bar, nested):
            return
        self.bars.setdefault((bar.desc, bar.total), _BarTrack()).add(bar)
        if bar.desc == "":
            if self.hf_anchor is not None and bar.current < self.hf_anchor:
                self.hf_prev = None  # a new training loop (resume) restarted the bar
            self.hf_anchor = bar.current
        elif bar.desc == _SKYRL_BAR:
            self._mark("skyrl")
            if self.pending_reward is not None and bar.current not in self.points:
                self._record(bar.current, self.pending_reward, 0, None)
            self.pending_reward = None
        elif bar.desc == "Training Progress":
            self._mark("verl")

    def _record(self, step: int, raw: dict[str, float], line_no: int, at: datetime | None) -> None:
        values = canonical_values(raw, self.aliases)
        if not values:
            return
        self.points.pop(step, None)
        self.points[step] = MetricPoint(step=step, values=values, line_no=line_no, wall_time=at)

    def _training_bar(self) -> _BarTrack | None:
        """The training bar: the banner's total if one matches, else the most redrawn."""
        tracks = list(self.bars.items())
        if self.banner_total is not None:
            matching = [t for t in tracks if t[0][1] == self.banner_total]
            tracks = matching or tracks
        if not tracks:
            return None
        return max(tracks, key=lambda item: (item[0][0] != "", item[1].count))[1]

    def close(self) -> None:
        """Flush what only the end of the tail can settle."""
        for step, (pairs, line_no) in enumerate(self.hf_unanchored, start=1):
            self._record(step, pairs, line_no, None)
        self.hf_unanchored.clear()
        skyrl = [t for (desc, _), t in self.bars.items() if desc == _SKYRL_BAR]
        if self.pending_reward is not None and skyrl and skyrl[-1].last is not None:
            step = skyrl[-1].last.current + 1
            if step not in self.points:
                self._record(step, self.pending_reward, 0, None)

    def summary(self, line_count: int) -> LogSummary:
        track = self._training_bar()
        progress, rate = None, None
        if track is not None and track.last is not None:
            last = track.last
            progress = ProgressBar(
                current=last.current,
                total=last.total,
                elapsed_s=last.elapsed_s,
                sec_per_it=_sec_per_it(last.rate),
            )
            rate = trailing_rate(track.events)
        points = tuple(self.points[step] for step in sorted(self.points))
        if rate is None:
            timed = [(p.step, p.wall_time.timestamp()) for p in points if p.wall_time is not None]
            rate = trailing_rate(timed)
        harbor = self.harbor or (None, None, None)
        rollouts = self.samples * self.batch if self.samples and self.batch else None
        return LogSummary(
            line_count=line_count,
            points=points,
            formats=tuple(self.formats),
            total_steps=self.banner_total or (progress.total if progress else None),
            progress=progress,
            sec_per_step=rate,
            checkpoint_steps=tuple(sorted(self.checkpoints)),
            rollouts_per_step=rollouts,
            harbor_done=harbor[0],
            harbor_total=harbor[1],
            harbor_mean=harbor[2],
            last_timestamp=self.last_ts,
            finished=self.finished,
        )


def _sec_per_it(rate: str) -> float | None:
    """tqdm's rate field (``2.35s/it`` or ``12.9it/s``) as seconds per iteration."""
    if rate.endswith("s/it"):
        return parse_number(rate[:-4])
    if rate.endswith("it/s"):
        per_second = parse_number(rate[:-4])
        return 1.0 / per_second if per_second else None
    return None


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return text


def _split(decoded: str, max_line_chars: int) -> tuple[list[str], list[str]]:
    """(raw lines cut to ``max_line_chars``, the same ANSI-stripped), split as ``_SPLIT_RE``.

    ``str.replace`` and ``str.split`` do in C what the regex split does: ``\\r\\n`` pairs never
    overlap, so turning them and then lone ``\\r`` into ``\\n`` gives the same separators.
    """
    raws = decoded.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(decoded) > max_line_chars:
        raws = [r[:max_line_chars] if len(r) > max_line_chars else r for r in raws]
    if "\x1b" not in decoded:
        return raws, raws
    return raws, [ANSI_RE.sub("", r) if "\x1b" in r else r for r in raws]


def parse_log(
    text: str | bytes,
    *,
    aliases: Mapping[str, str] | None = None,
    benign_patterns: Sequence[str] = (),
    first_line_no: int = 1,
    max_line_chars: int = 65536,
) -> LogSummary:
    """Summarise one bounded log tail; never raises (a parser bug is logged, not propagated)."""
    decoded = _decode(text)
    raws, lines = _split(decoded, max_line_chars)
    return _summarise(
        decoded,
        raws,
        lines,
        aliases=aliases,
        benign_patterns=benign_patterns,
        first_line_no=first_line_no,
        fast=True,
    )


def _parse_reference(
    text: str | bytes,
    *,
    aliases: Mapping[str, str] | None = None,
    benign_patterns: Sequence[str] = (),
    first_line_no: int = 1,
    max_line_chars: int = 65536,
) -> LogSummary:
    """``parse_log`` without prefilters: every line through every rule (the tests' oracle)."""
    decoded = _decode(text)
    raws = [p[:max_line_chars] if len(p) > max_line_chars else p for p in _SPLIT_RE.split(decoded)]
    lines = [strip_ansi(raw) for raw in raws]
    return _summarise(
        decoded,
        raws,
        lines,
        aliases=aliases,
        benign_patterns=benign_patterns,
        first_line_no=first_line_no,
        fast=False,
    )


def _summarise(
    decoded: str,
    raws: Sequence[str],
    lines: Sequence[str],
    *,
    aliases: Mapping[str, str] | None,
    benign_patterns: Sequence[str],
    first_line_no: int,
    fast: bool,
) -> LogSummary:
    line_count = decoded.count("\n") + (0 if decoded.endswith("\n") or not decoded else 1)
    # The metric pass and the fault scan fail independently: a bug in one must not hide the
    # other's findings, and a sweep never dies on a log. Such a bug is logged with its trace.
    try:
        scan = _Scan(aliases or {})
        candidates = _METRIC_LINES.lines(lines) if fast else None
        for index in range(len(lines)) if candidates is None else candidates:
            line = lines[index]
            if line.strip():
                scan.feed(line, raws[index], first_line_no + index)
        scan.close()
        summary = scan.summary(line_count)
    except Exception:
        _log.exception("parse_log: metric pass failed on a %d-character tail", len(decoded))
        summary = LogSummary(line_count=line_count)
    try:
        scan_lines = scan_faults if fast else _scan_reference
        faults = scan_lines(lines, benign_patterns=benign_patterns, first_line_no=first_line_no)
    except Exception:
        _log.exception("parse_log: fault scan failed on a %d-character tail", len(decoded))
        return summary
    return summary.model_copy(
        update={
            "faults": faults.faults,
            "benign_counts": dict(faults.benign_counts),
            "infra": faults.infra,
            "bring_up": faults.bring_up and not summary.points,
        }
    )
