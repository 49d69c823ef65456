"""The base layer of ``MetricScan`` (``probes.logs.history``): its state, the per-tail caches
of pure readers, and the point recorder with its restart rule (``_record``, ``_rewind``).

Policy: ``MetricScan`` is one class built of layers, one module each, every layer a subclass of
the one before: ``scan_core`` < ``scan_dicts`` (dicts; HF's step-less ones) < ``scan_steps``
(each format's step lines) < ``scan_episodes`` (OpenRLHF's Episode bar and resume) <
``scan_bars`` (tqdm bars) < ``scan_summary`` (``close``, ``summary``) < ``scan_markers`` (the
run's markers) < ``history`` (``feed``, ``skim``, ``seed_head``). A layer calls only methods of
its own and of the layers below it, so mypy checks every call. Inheritance, not delegation: a
method or attribute is found on the instance's class in one cached lookup whichever layer
defines it, so the per-line path costs what it did as one class. Pure per-line results that
repeat are remembered for the length of one tail (``remember``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from probes.logs.bar_lines import TqdmBar, parse_tqdm
from probes.logs.clock import LogClock, YearlessStamp, read_stamp
from probes.logs.hf_banner import HfBanner
from probes.logs.hf_cadence import HfCadence
from probes.logs.metric_names import canonical_plan
from probes.logs.nemo_rl_epochs import NemoEpochs
from probes.logs.progress import BarTrack
from probes.logs.scan_patterns import FINISH_FORMATS, FINISH_MARKS
from probes.logs.skyrl_batches import SkyrlBatches
from probes.models import MetricPoint

_STEP_KEYS = ("trainer/global_step", "training/global_step", "global_step", "step",
              "system/step", "system/global_step")
"""A dict's own step, first found wins (ROLL's ``system/step`` and ``system/global_step``:
its zero-based loop step, as its tensorboard and ``checkpoint-N`` saves number it)."""
_EVAL_PREFIXES = ("eval_", "test_", "predict_")
_CACHE_CAP = 256


Plan = tuple[tuple[str, str], ...]
"""A dict's ``canonical_plan``: (canonical name, raw name) pairs."""
_DictKind = tuple[bool, tuple[str, ...], Plan]
_Value = TypeVar("_Value")


def remember(cache: dict[Any, _Value], key: object, value: _Value) -> _Value:
    """Store a pure reader's answer in a per-tail cache of at most ``_CACHE_CAP`` entries
    (emptied when full: a log inventing new lines without end must not grow memory)."""
    if len(cache) >= _CACHE_CAP:
        cache.clear()
    cache[key] = value
    return value


def _dict_shape(keys: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
    """(an eval/test/predict dict, the step keys it holds in ``_STEP_KEYS`` order) of a
    dict's key names (pure: remembered per tail, as a trainer repeats its keys every step)."""
    return (any(key.startswith(_EVAL_PREFIXES) for key in keys),
            tuple(key for key in _STEP_KEYS if key in keys))


_POINT_FIELDS = frozenset(MetricPoint.model_fields)
_set = object.__setattr__
_new = object.__new__
_SLOTS = BaseModel.__dict__
_set_fields = _SLOTS["__pydantic_fields_set__"].__set__
_set_extra = _SLOTS["__pydantic_extra__"].__set__
_set_private = _SLOTS["__pydantic_private__"].__set__


def metric_point(step: int, values: dict[str, float], line_no: int,
                 at: datetime | None) -> MetricPoint:
    """``MetricPoint.model_construct`` with every field given, as that sets them (0.5 us, not
    1.5: thousands a tail). Every field already has its declared type (ints, a fresh dict of
    floats, a datetime or None), so validating would only copy. ``BaseModel``'s slots are set
    through their own descriptors (``object.__setattr__`` would look each up first)."""
    point = _new(MetricPoint)
    _set(point, "__dict__", {"step": step, "values": values, "line_no": line_no,
                             "wall_time": at})
    _set_fields(point, set(_POINT_FIELDS))
    _set_extra(point, None)
    _set_private(point, None)
    return point


class ScanCore:
    """The state of the pass over one tail (``MetricScan``); ``summary()`` freezes it into a
    ``LogSummary``.

    ``mtime`` (the file's) places year-less stamps until the log shows a dated one;
    ``engine_line`` asks for the log clock's reading at that line (``engine_at``): the line's
    own stamp, else the last one before it (vLLM's access lines carry none).
    """

    harbor_metric: str | None = None
    """The metric Harbor's last row named (``Mean``, a reward key's ``Accuracy``)."""
    top: int | None = None
    """The highest step of ``points`` (a new segment lowers it: ``_rewind``)."""
    launch = False
    """A trainer's start line was read since the last point recorded (its banner total:
    verl's and SkyRL's ``Total training steps``, HF's ``Total optimization steps``;
    prime-rl's ``Starting training loop``): the next step logged at or below ``top``
    starts a new segment (``_rewind``)."""
    launch_kinds: frozenset[str] = frozenset()
    """The kinds of start line read (``_launched``)."""
    relaunch_line: int | None = None
    """The line of the last start line whose kind was read before: the run launched again
    into the same log (a restart appended to its old log, a retry in the job's script); what
    the log says above it is an earlier launch's (``LogSummary.relaunch_line``)."""

    hf_fine_epoch = False
    """An HF dict's epoch was printed finer than 0.01: the Trainer does not round its epochs
    to 2 decimals (``_epoch_ahead``)."""
    hf_cadence = HfCadence()
    """The logging cadence of bar-less HF training dicts, inferred from their epochs
    (``_on_grid``)."""
    ds_losses: tuple[float, int] = (0.0, 0)
    """The sum and count of DeepSpeed-Chat's rank-0 micro-batch losses since DeepSpeed's last
    engine line (``parse_ds_chat_loss``): their mean is the loss of the engine's next step
    line."""
    ds_accumulation: int | None = None
    """DeepSpeed's ``gradient_accumulation_steps`` from its config dump (``_ds_total``)."""
    ds_batch: int | None = None
    """DeepSpeed's ``train_batch_size`` from the same dump (``_ds_total``)."""
    verl_bar: tuple[int, int, int, int, str] | None = None
    """The latest redraw of verl's SFT ``Epoch E/M`` bar: E, M, count, total, rate
    (``BarScan.verl_epoch_step``)."""
    epochs_planned: int | None = None
    """The epochs a run by epochs plans (llm-foundry's ``max_duration: Nep``, OpenRLHF's
    ``Train epoch`` bar's total plus the epoch it starts from): with an epoch's batches or
    steps, the run's total (``probes.logs.bracket_lines``, ``EpisodeScan._openrlhf_step``)."""
    nemo_epochs = NemoEpochs()
    """NeMo-RL's epoch under way and ``max_num_steps``: its banner's step is the epoch's."""
    pending_sc: dict[str, float] | None = None
    """NeMo-RL SingleController's ``step_metrics`` dict, until its ``train step`` line
    (``probes.logs.nemo_sc_lines``; assigned, never mutated in place)."""

    def __init__(
        self,
        aliases: Mapping[str, str],
        mtime: datetime | None = None,
        engine_line: int | None = None,
    ) -> None:
        self.aliases = aliases
        self.clock = LogClock(mtime)
        self.engine_line = engine_line
        self.engine_at: datetime | None = None
        self.points: dict[int, MetricPoint] = {}
        self.formats: dict[str, None] = {}
        self.banner_total: int | None = None
        self.bars: dict[tuple[str, int], BarTrack] = {}
        self.checkpoints: set[int] = set()
        self.finished = False
        self.header: tuple[int, datetime | None] | None = None
        self.dict_lines: list[str] | None = None
        self.dict_line_no = 0
        self.pending_reward: dict[str, float] | None = None
        self.pending_status: dict[str, float] | None = None
        """SkyRL's status dict of the step being logged (``parse_status_line``): taken at the
        bar's redraw with the reward line, unless a console ``Step N:`` dict has the step."""
        self.nemo: tuple[int, datetime | None, dict[str, float]] | None = None
        """NeMo-RL's open step: its banner's step and stamp, and the bullets read since."""
        self.hf_anchor: int | None = None
        self.hf_anchor_key: tuple[str, int] | None = None
        """The track of the desc-less bar ``hf_anchor`` was read from."""
        self.bar_seq = 0
        """Training-kind redraws seen so far: each track's ``seen`` is its last one's."""
        self.finish_seq: int | None = None
        """``bar_seq`` at the trainer's first finish line (``finished``): a desc-less bar first
        drawn after it (``trainer.evaluate()`` after ``train()``) is none of its training."""
        self.hf_prev: int | None = None
        self.hf_unanchored: list[tuple[dict[str, float], int]] = []
        self.samples: int | None = None
        self.batch: int | None = None
        self.harbor: tuple[int, int, float | None] | None = None
        self.iter_total: int | None = None
        self.iter_times: list[tuple[int, float]] = []
        self.config_epochs: int | None = None
        self.config_epoch_cap: int | None = None
        """torchtune's resolved ``epochs`` and ``max_steps_per_epoch`` (None: null or not
        printed): its total optimization steps with the epoch bar's total."""
        self.hf_guessed = False
        """HF dicts were numbered 1, 2, ... for want of a bar: right only from the log's start."""
        self.hf_banner: HfBanner = HfBanner()
        """The HF Trainer banner and ``TrainingArguments`` logging fields read so far: a bar-less
        dict's step from its ``epoch`` (``hf_epoch_step``), its dict count's spacing."""
        self.hf_saved: tuple[int, int] | None = None
        self.log_start, self.hf_counted = True, False
        """``hf_saved``: the last HF checkpoint save read (``Saving model checkpoint to
        .../checkpoint-N``) and the bar-less dicts numbered after it: the k-th is ``N + k x
        logging_steps`` on the logging grid (``_on_hf_save``). ``log_start``: the pass began
        at the log's first byte: only then is a bar-less HF dict's count (``hf_counted_step``)
        its step. A tail cut from a longer log (``seed_head``) counts from no step of the run:
        such dicts keep their order, but the summary claims no step (``steps_unanchored``).
        ``hf_counted``: ``close`` numbered bar-less HF dicts by their count."""
        # SkyRL's batches bar's lead over the global step (``probes.logs.skyrl_batches``)
        self._skimming, self.skyrl_batches = False, SkyrlBatches()
        # Pure per-line readers, remembered for this tail: dataset bars redraw identical lines,
        # noise lines repeat their stamps, and a trainer repeats its metric names every step.
        self._bars_read: dict[str, TqdmBar | None] = {}
        self._stamps_read: dict[str, datetime | YearlessStamp | None] = {}
        self._kinds: dict[tuple[str, ...], _DictKind] = {}
        self._shapes: dict[tuple[str, str, bool], tuple[str, tuple[str, int]] | None] = {}
        """``feed_bar``: a bar's (desc, total, nested) printing -> (desc, track key), or None
        for no training bar (remembered: a tail redraws a few bars thousands of times)."""
        self._lasts: dict[tuple[str, int], tuple[str, str, str, str, str]] = {}
        """``feed_bar``: each track's last redraw, not yet made its ``last`` (``_settle``)."""

    def _bar(self, body: str) -> TqdmBar | None:
        """``parse_tqdm`` (remembered: dataset bars redraw identical lines)."""
        read = self._bars_read
        if body in read:
            return read[body]
        return remember(read, body, parse_tqdm(body))

    def _stamp(self, body: str) -> datetime | YearlessStamp | None:
        """``read_stamp`` (remembered: noise lines repeat their stamps)."""
        read = self._stamps_read
        if body in read:
            return read[body]
        return remember(read, body, read_stamp(body))

    def _kind(self, keys: tuple[str, ...]) -> _DictKind:
        """(eval dict, step keys, ``canonical_plan``) of a dict's key names (remembered)."""
        known = self._kinds.get(keys)
        if known is None:
            is_eval, step_keys = _dict_shape(keys)
            kind: _DictKind = (is_eval, step_keys, canonical_plan(keys, extra=self.aliases))
            known = remember(self._kinds, keys, kind)
        return known

    def epoch_steps_total(self, per_epoch: int) -> int | None:
        """The run's total optimization steps for an epoch of ``per_epoch`` steps (torchtune's
        epoch bar, mmengine's ``Epoch(train)`` lines): the resolved ``epochs`` x steps a epoch
        (capped by ``max_steps_per_epoch``); None when the log printed no ``epochs`` (an
        epoch's own count is never the run's)."""
        epochs, cap = self.config_epochs, self.config_epoch_cap
        if not epochs or per_epoch <= 0:
            return None
        return epochs * (min(per_epoch, cap) if cap and cap > 0 else per_epoch)

    def _mark(self, fmt: str) -> None:
        self.formats.setdefault(fmt, None)

    def _launched(self, kind: str, line_no: int) -> None:
        """A trainer's start line of ``kind`` at ``line_no``: the next step logged at or
        below the highest starts a new segment (``launch``); one of a kind read before is the
        run launched again into the same log (``relaunch_line``)."""
        self.launch = True
        if kind in self.launch_kinds:
            self.relaunch_line = line_no
        else:
            self.launch_kinds = self.launch_kinds | {kind}

    def finish_marks(self, body: str, seq: int | None = None) -> None:
        """A trainer's own finish line in ``body`` (``FINISH_MARKS``), also on a bar's line
        (Lightning's, after its last redraw); ``seq``: that line's ``bar_seq`` when
        ``skim_bars`` counted past it."""
        for mark in FINISH_MARKS:
            if mark in body:
                self.finished = True
                if self.finish_seq is None:
                    self.finish_seq = self.bar_seq if seq is None else seq
                self._mark(FINISH_FORMATS.get(mark, "skyrl"))

    def _read_engine_line(self) -> None:
        self.engine_at, self.engine_line = self.clock.last, None

    def _plan(self, raw: Mapping[str, float]) -> Plan:
        """``canonical_plan`` for these names (remembered)."""
        return self._kind(tuple(raw))[2]

    def _record(self, step: int, raw: dict[str, float], line_no: int, at: datetime | None,
                plan: Plan | None = None, *, numbered: bool = True) -> bool:
        """A point at ``step`` of ``raw``'s canonical values (``plan``: ``raw``'s names'
        ``canonical_plan``, if at hand). ``numbered``: the line itself gave the step, in the
        order the trainer logs its steps (``_rewind``); False for a step filled in after the
        fact (HF dicts numbered back from a bar or a save, SkyRL's step left pending).
        Whether a point was recorded: a line of no metric of ours records none."""
        if self._skimming:
            return False
        values = {canonical: raw[name]
                  for canonical, name in (self._plan(raw) if plan is None else plan)}
        if not values:
            return False
        if numbered:
            top = self.top
            if (top is not None and step < top) or self.launch:
                self._rewind(step)
        points = self.points
        points.pop(step, None)
        points[step] = metric_point(step, values, line_no, at)
        if self.top is None or step > self.top:
            self.top = step
        return True

    def _rewind(self, step: int, *, strict: bool = True) -> None:
        """Before a point at ``step``: a log that goes on with a restarted run (the same
        file appended to: ``--open-mode=append``, a requeue, a rerun with the same ``-o``)
        starts a new segment where its step counter goes back. The old run's points from
        ``step`` on are dropped (a run resumed from a checkpoint keeps the steps before it,
        one started afresh keeps none), so the summary, its newest step and every window read
        the newest run. A step below the highest logged (``strict``) is such a restart in
        every format that logs one line per step in order; prime-rl's trainer logs each step
        after its orchestrator has logged the next ones, so there (``strict`` False) only a
        trainer start line read since the last point (``launch``: ``Starting training
        loop``) followed by a step at or below the highest is."""
        top, launched = self.top, self.launch
        self.launch = False
        if top is None or not ((step < top and strict) or (step <= top and launched)):
            return
        points = self.points
        for stale in [old for old in points if old >= step]:
            del points[stale]
        forget = getattr(points, "forget_from", None)
        if forget is not None:
            forget(step)
        self.top = max(points, default=None)
        logged_top = getattr(points, "logged_top", None)
        if logged_top is not None:
            below = logged_top()
            if below is not None and (self.top is None or below > self.top):
                self.top = below
