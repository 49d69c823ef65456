"""Turn a bounded log tail into a ``LogSummary``: metric history, progress, rate, faults.

Policy: ``parse_log`` is a pure function over text (or bytes) that never raises. It splits on
``\\n`` and ``\\r`` (tqdm redraws), truncates every line to ``max_line_chars``, strips ANSI and
Ray ``(Name pid=N)`` prefixes, and reads the formats real trainers print: SkyRL ``Step N:``
pprint dicts and reward lines, verl ``step:N - k:v`` lines, Hugging Face Trainer / TRL
per-step dicts, Megatron ``iteration N/ T | key: value | ...`` lines (``T`` is the run's
``--train-iters``; the rate comes from their per-iteration times). Only canonical metric names
(``probes.logs.metric_names``) reach a point. A dict cut at the top of the tail is dropped, never
misread. The training progress bar is told
apart from tokenizer/packing/dataset/eval bars (``probes.logs.progress``); the rate is a trailing
window that one checkpoint-save spike does not move. Faults and benign noise come from
``probes.logs.faults``.

Speed policy: the tail is split in C, and a whole-text prefilter (``probes.logs.prefilter``) hands
``_Scan.feed`` only the lines holding one of its substring gates, a dict brace or quote, or a
timestamp's ``HH:MM:SS``; ``feed`` does nothing with any other line, so the result is the
per-line reference's (``_parse_reference``, which the property tests compare against). Pure
per-line results that repeat (dataset bars, noise timestamps, a step's metric-name plan) are
remembered for the length of one tail.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from math import isfinite

from probes.logs.faults import _scan_reference, scan_faults
from probes.logs.fingerprint import read_fingerprint  # issue 11 (wt-e)
from probes.logs.lines import (
    NESTED_BAR_MARK,
    IterationLine,
    TqdmBar,
    parse_iteration,
    parse_number,
    parse_pairs,
    parse_reward_line,
    parse_timestamp,
    parse_tqdm,
    parse_verl,
    split_lines,
    strip_ansi,
    strip_ray_prefix,
)
from probes.logs.metric_names import canonical_plan
from probes.logs.outcome import read_outcome  # issue 11 (wt-e)
from probes.logs.precision import precise_merge  # issue 11 (wt-e)
from probes.logs.prefilter import NeedleFilter
from probes.logs.progress import BarTrack, is_training_bar, sec_per_it, trailing_rate
from probes.models import LogSummary, MetricPoint, ProgressBar

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
_SKYRL_BAR = "Training Batches Processed"
_STEP_KEYS = ("trainer/global_step", "training/global_step", "global_step", "step")
_EVAL_PREFIXES = ("eval_", "test_", "predict_")
_METRIC_LINES = NeedleFilter(
    (
        *("%|", "step:", "Step ", "reward/", "Total", "heckpoint", "global_step_", "Mean:"),
        *("Running trials", "train_batch_size", "n_samples_per_prompt", *_FINISH_MARKS),
        *("{", "'", '"', " ::", "T::", "iteration"),
    ),
    unicode_digits=True,
)
"""Every line ``_Scan.feed`` acts on holds one of these: a substring gate of ``feed``, a dict's
brace or quoted key, or a timestamp's ``[ T]HH:MM:SS`` (every form ``parse_timestamp`` reads has
one), which is `` ::`` or ``T::`` once the prefilter deletes digits."""
_MAX_DICT_LINES = 5000
_ITER_TIMES_KEPT = 64
_CACHE_CAP = 256
_STAMP_LEADS = frozenset("0123456789[IWEDCF")
"""``parse_timestamp``'s own first test: it returns None at once for any other first character."""


class _Scan:
    """The stateful pass over one tail; ``summary()`` freezes it into a ``LogSummary``."""

    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = aliases
        self.points: dict[int, MetricPoint] = {}
        self.formats: dict[str, None] = {}
        self.banner_total: int | None = None
        self.bars: dict[tuple[str, int], BarTrack] = {}
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
        self.iter_total: int | None = None
        self.iter_times: list[tuple[int, float]] = []
        self.bar_cache: dict[str, TqdmBar | None] = {}
        self.stamps: dict[tuple[str, int | None], datetime | None] = {}
        self.plans: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}

    def feed(self, line: str, raw: str, line_no: int) -> None:
        """Classify one cleaned line; cheap substring tests gate every regex."""
        body = strip_ray_prefix(line)
        stamp = self._stamp(body) if body[:1] in _STAMP_LEADS else None
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
            bar = self._bar(body)
            if bar is not None:
                self._on_bar(bar, NESTED_BAR_MARK in raw)
                return
        if "iteration" in body:
            iteration = parse_iteration(body)
            if iteration is not None:
                self._on_iteration(iteration, line_no, stamp)
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
            merged = precise_merge(self.pending_reward or {}, pairs)  # issue 11 (wt-e)
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
        if self._plan(pairs):
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

    def _on_iteration(self, line: IterationLine, line_no: int, stamp: datetime | None) -> None:
        """A Megatron iteration line: its step, ``--train-iters`` total and per-iteration time."""
        self._mark("megatron")
        self.iter_total = line.total
        per_iter = _iteration_seconds(line.values)
        if per_iter is not None:
            if self.iter_times and line.step <= self.iter_times[-1][0]:
                self.iter_times.clear()  # a restarted run counts again from its resume point
            self.iter_times.append((line.step, per_iter))
            del self.iter_times[:-_ITER_TIMES_KEPT]
        self._record(line.step, line.values, line_no, stamp)

    def _on_header(self, step: int, stamp: datetime | None, inline: str | None, no: int) -> None:
        self._mark("skyrl")
        self.header = (step, stamp)
        if inline:
            self._start_dict(inline, no)

    def _on_bar(self, bar: TqdmBar, nested: bool) -> None:
        if not is_training_bar(bar, nested):
            return
        self.bars.setdefault((bar.desc, bar.total), BarTrack()).add(bar)
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

    def _bar(self, body: str) -> TqdmBar | None:
        """``parse_tqdm``, remembered per line text: dataset bars redraw identical lines."""
        if body in self.bar_cache:
            return self.bar_cache[body]
        if len(self.bar_cache) >= _CACHE_CAP:
            self.bar_cache.clear()
        bar = self.bar_cache[body] = parse_tqdm(body)
        return bar

    def _stamp(self, body: str) -> datetime | None:
        """``parse_timestamp`` with the current year hint, remembered: noise lines repeat."""
        key = (body, self.year_hint)
        if key in self.stamps:
            return self.stamps[key]
        if len(self.stamps) >= _CACHE_CAP:
            self.stamps.clear()
        stamp = self.stamps[key] = parse_timestamp(body, self.year_hint)
        return stamp

    def _plan(self, raw: Mapping[str, float]) -> tuple[tuple[str, str], ...]:
        """``canonical_plan`` for these names, remembered: a trainer repeats them every step."""
        names = tuple(raw)
        plan = self.plans.get(names)
        if plan is None:
            if len(self.plans) >= _CACHE_CAP:
                self.plans.clear()
            plan = self.plans[names] = canonical_plan(names, self.aliases)
        return plan

    def _record(self, step: int, raw: dict[str, float], line_no: int, at: datetime | None) -> None:
        values = {canonical: raw[name] for canonical, name in self._plan(raw)}
        if not values:
            return
        self.points.pop(step, None)
        # Every field already has its declared type (ints, a fresh dict of floats, a datetime or
        # None), so validating would only copy: construct directly, thousands of times a tail.
        self.points[step] = MetricPoint.model_construct(
            step=step, values=values, line_no=line_no, wall_time=at
        )

    def _training_bar(self) -> BarTrack | None:
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
                sec_per_it=sec_per_it(last.rate),
            )
            rate = trailing_rate(track.events)
        points = tuple(self.points[step] for step in sorted(self.points))
        if rate is None and self.iter_times:
            rate = trailing_rate(_iteration_clock(self.iter_times))
        if rate is None:
            timed = [(p.step, p.wall_time.timestamp()) for p in points if p.wall_time is not None]
            rate = trailing_rate(timed)
        harbor = self.harbor or (None, None, None)
        rollouts = self.samples * self.batch if self.samples and self.batch else None
        return LogSummary(
            line_count=line_count,
            points=points,
            formats=tuple(self.formats),
            total_steps=self.banner_total or self.iter_total or (
                progress.total if progress else None
            ),
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


def _iteration_seconds(values: Mapping[str, float]) -> float | None:
    """Megatron's ``elapsed time per iteration (ms)`` (or ``(s)``, older forks) in seconds."""
    for key, scale in (("elapsed time per iteration (ms)", 1e-3),
                       ("elapsed time per iteration (s)", 1.0)):
        value = values.get(key)
        if value is not None and isfinite(value) and value >= 0:
            return value * scale
    return None


def _iteration_clock(times: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(step, seconds per iteration averaged since the previous line) -> (step, elapsed)."""
    clock = [(times[0][0], 0.0)]
    for (previous, _), (step, per_iter) in pairwise(times):
        clock.append((step, clock[-1][1] + (step - previous) * per_iter))
    return clock


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
) -> LogSummary:
    """Summarise one bounded log tail; never raises (a parser bug is logged, not propagated)."""
    decoded = _decode(text)
    split = split_lines(decoded, max_line_chars)
    return _summarise(decoded, split, aliases, benign_patterns, first_line_no)


def _parse_reference(
    text: str | bytes, *, benign_patterns: Sequence[str] = (), first_line_no: int = 1
) -> LogSummary:
    """``parse_log`` without prefilters: every line through every rule (the tests' oracle)."""
    decoded = _decode(text)
    raws = [p[:65536] if len(p) > 65536 else p for p in _SPLIT_RE.split(decoded)]
    lines = [strip_ansi(raw) for raw in raws]
    return _summarise(decoded, (raws, lines), None, benign_patterns, first_line_no, fast=False)


def _summarise(
    decoded: str,
    split: tuple[Sequence[str], Sequence[str]],
    aliases: Mapping[str, str] | None,
    benign_patterns: Sequence[str],
    first_line_no: int,
    *,
    fast: bool = True,
) -> LogSummary:
    """The metric pass and the fault scan over (raw, ANSI-stripped) lines; ``fast`` prefilters."""
    raws, lines = split
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
            # issue 11 (wt-e): what the run runs, and a catch-all job's closing signal
            "fingerprint": read_fingerprint(lines),
            "outcome": read_outcome(lines[-400:]),
        }
    )
