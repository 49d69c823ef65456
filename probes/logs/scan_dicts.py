"""``MetricScan``'s dict layer: one-line and multi-line dicts (HF/TRL's, SkyRL's step dict, a
dict with a step key, EasyR1's YAML step block) and HF's step-less dicts, placed by the
training bar, by their epoch and the banner (``HfBanner``), by a checkpoint save, or at the
end by their count.

Policy: a dict cut at the top of the tail or nested (a config dump) is dropped, never misread;
an eval/test/predict dict is no training point.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from math import isfinite

from probes.logs.easyr1_lines import YamlStep
from probes.logs.hf_banner import HfBanner, epoch_step, printed_quantum, significant_quantum
from probes.logs.hf_cadence import HfCadence, advance, step_interval
from probes.logs.lines import parse_pairs, quoted_pairs
from probes.logs.precision import precise_merge
from probes.logs.scan_core import Plan, ScanCore
from probes.logs.scan_patterns import HF_BATCH_RE, HF_NUM_RE
from probes.logs.tracker_records import tracker_record
from probes.logs.unsloth_lines import unsloth_banner, unsloth_batch

_MAX_DICT_LINES = 5000
_RANK_LABEL_RE = re.compile(r"\s*(?:\d{1,6}:|\[(?:rank|default)\d{1,6}\]:)")
_EVAL_LABEL_RE = re.compile(r"(?i)\b(?:eval\w*|val|valid\w*|test\w*)\b[^\]|]{0,80}:\s*$")
"""A label naming an evaluation ending a logger's prefix (``eval: {``, ``Validation results:
{``, ``test metrics: {``): its dict is no training step (the logger's fields before ``] ``,
`` - `` or ``| `` are not the label)."""
TRACKER_FORMAT = "tracker-json"
"""The format of a log whose steps are a tracker's JSON records (Levanter's ``json_logger``)."""
_TRAINING_NAMES = frozenset({"loss", "reward", "grad_norm", "policy_loss", "entropy"})
"""What a dict behind a logger's prefix must hold (or a step key) to be a training point: a
logged config (``Training args: {'learning_rate': ...}``) holds none of them."""


class DictScan(ScanCore):
    """The dict readers of ``MetricScan`` and HF's step-less dicts (see the module)."""

    yaml_step: YamlStep | None = None
    """EasyR1's step block being read (``probes.logs.easyr1_lines``): a point once it ends.
    Every way a line is fed (``feed``, ``feed_bar``, ``feed_dict``) offers it first."""
    hf_grid: tuple[HfBanner, int | None, float | None, int | None] | None = None
    """``hf_banner``'s steps per epoch and logging interval for ``banner_total``, and the
    banner and total they are for (:meth:`_hf_grid`)."""

    def _yaml_line(self, body: str, line_no: int) -> bool:
        """A line after EasyR1's ``Step N`` or a bracketed header (``BracketStep``): read
        into its block, or (False) the block ends before it and is the step's point (none
        while its step is unknown)."""
        block = self.yaml_step
        if block is not None and block.read(body, line_no):
            return True
        self.yaml_step = None
        if block is not None and block.values and block.step >= 0:
            self._mark(block.fmt)
            self._record(block.step, block.values, block.line_no, block.at)
        return False

    def feed_dict(self, line: str, line_no: int) -> None:
        """``feed`` of a one-line dict that is its own body: it starts with ``{`` and ends in
        ``}`` (so no Ray prefix, no ``[repeated ...]`` tail, no stamp): read at once."""
        if self.yaml_step is not None:
            self._yaml_line(line, line_no)
        engine = self.engine_line
        if engine is not None and line_no >= engine:
            self._read_engine_line()
        self.dict_line_no = line_no
        self.dict_lines = None
        self._read_dict(line)

    def _start_dict(self, body: str, line_no: int) -> None:
        self.dict_line_no = line_no
        if body.rstrip().endswith("}"):  # a one-line dict (HF's every step): read at once
            self.dict_lines = None
            self._read_dict(body)
            return
        self.dict_lines = [body]

    def _continue_dict(self, body: str, line_no: int) -> None:
        assert self.dict_lines is not None
        if "max_num_steps" in body:  # NeMo-RL's printed config (a nested dict, read no more)
            self.nemo_epochs = self.nemo_epochs.read(body)
        self.dict_lines.append(body)
        if body.rstrip().endswith("}"):
            self._finish_dict()
        elif len(self.dict_lines) > _MAX_DICT_LINES:
            self.dict_lines = None

    def _prefixed_dict(self, body: str, line_no: int, at: datetime | None) -> bool:
        """A one-line flat dict a logger printed behind its prefix (ROLL's ``[stamp] [file
        (line)] [INFO] [DRIVER 0 / 1][PID N] {"critic/score/mean": ...}``, any ``logger.info(
        f"... {metrics}")``), read as the bare dict is when it has a step key or a training
        metric; whether it was. ``body`` ends in ``}``; ``at``: the line's stamp (the point's
        time: the rate of a log with no bar is read from its steps' stamps). The prefix must
        be a logger's (a stamp or an ``INFO`` level) and name no rank: ``srun -l``'s ``3: ``
        or torchrun's ``[rank7]:`` are another rank's dicts, ``val: {...}`` a labelled one, as is
        an eval dict behind its label (``INFO - eval: {...}``: ``_EVAL_LABEL_RE``), and a dict
        in a log whose steps another trainer's lines give (a component's stats in a verl log)."""
        start = body.find("{")
        if start <= 0 or body.count("{") > 1:
            return False
        prefix = body[:start]
        if (at is None and "INFO" not in prefix) or _RANK_LABEL_RE.match(prefix):
            return False
        formats = self.formats
        if self.points and formats and "hf" not in formats and "skyrl" not in formats:
            return False  # the log's steps are another format's (a verl or Megatron log's)
        if prefix.rstrip().endswith(":") and _EVAL_LABEL_RE.search(
                prefix.rsplit(" - ", 1)[-1]):
            return False  # an eval dict behind its label
        text = body[start:]
        pairs = quoted_pairs(text)
        if pairs is None:
            pairs = parse_pairs(text)
        if not pairs:
            return False
        _, step_keys, plan = self._kind(tuple(pairs))
        if not step_keys and not any(name in _TRAINING_NAMES for name, _ in plan):
            return False
        self.dict_line_no = line_no
        self._on_dict(pairs, line_no, at)
        return True

    def _tracker_record(self, body: str, line_no: int, at: datetime | None) -> bool:
        """A tracker's JSON record behind a logger's prefix (Levanter's ``json_logger``,
        ``probes.logs.tracker_records``): its step's point, merged with the step's records
        before it (a step logs its hyperparameters and its loss apart), its ``run_progress``
        the run's total; whether it was one. Not another rank's (``srun -l``'s ``3: ``), nor
        in a log whose steps another format gives."""
        record = tracker_record(body)
        if record is None or _RANK_LABEL_RE.match(body):
            return False
        if self.points and self.formats and TRACKER_FORMAT not in self.formats:
            return False
        values = {canonical: record.values[name] for canonical, name in self._plan(record.values)}
        prior = self.points.get(record.step) if record.step == self.top else None
        if prior is not None and TRACKER_FORMAT in self.formats:
            values = {**prior.values, **values}
        if values:
            self._mark(TRACKER_FORMAT)
            self._record(record.step, values, line_no, at, tuple((k, k) for k in values))
        if record.total is not None:
            self.iter_total = record.total
        return True

    def _finish_dict(self) -> None:
        text = "\n".join(self.dict_lines or ())
        self.dict_lines = None
        self._read_dict(text)

    def _read_dict(self, text: str) -> None:
        if text.count("{") > 1:
            return  # metric dicts are flat; a nested one is a config dump (verl's config)
        # HF's every step, read without the regex (quoted_pairs reads one-brace texts only).
        pairs = quoted_pairs(text)
        if pairs is None:
            pairs = parse_pairs(text)
        if pairs:
            self._on_dict(pairs, self.dict_line_no)

    def _on_dict(self, pairs: dict[str, float], line_no: int,
                 at: datetime | None = None) -> None:
        """A complete dict: SkyRL step dict, HF/TRL per-step dict, or an end/eval summary
        (``at``: the stamp of the line it was printed on, if it had one)."""
        if "train_runtime" in pairs:
            self.finished = True
            if self.finish_seq is None:
                self.finish_seq = self.bar_seq
            self._mark("hf")
            return
        if self.header is not None:
            step, stamp = self.header
            self.header = None
            # The step's reward line and status line print at full precision what the dict
            # prints with 4 decimals: a seqnorm run's grad norm of 2e-5 is '0.0000' there
            # (rulebook: ~1e-5 is that regime, not a vanishing gradient).
            merged = precise_merge({**(self.pending_status or {}), **(self.pending_reward or {})},
                                   pairs)
            self.pending_reward, self.pending_status = None, None
            self._mark("skyrl")
            self._record(step, merged, line_no, stamp)
            return
        is_eval, step_keys, plan = self._kind(tuple(pairs))
        if is_eval:
            return
        for key in step_keys:
            explicit = pairs[key]
            if isfinite(explicit) and 0 <= explicit < 1e15:
                self._record(int(explicit), pairs, line_no, at, plan)
                return
        if plan:
            self._mark("hf")
            self._on_hf_dict(pairs, line_no, plan)

    def _on_hf_dict(self, pairs: dict[str, float], line_no: int, plan: Plan) -> None:
        """HF dicts carry no step: take the training bar's count, never going backwards
        (``plan``: their names' ``canonical_plan``). With no bar (``disable_tqdm``), the step
        the dict's ``epoch`` gives by the banner (``hf_epoch_step``); else it waits for a bar,
        or the end (``close``)."""
        anchor, prev = self.hf_anchor, self.hf_prev
        if anchor is None and prev is None:
            per, every = self._hf_grid()
            by_epoch = epoch_step(per, every, pairs.get("epoch"))
            if by_epoch is not None:
                self._record(self._on_grid(pairs, by_epoch), pairs, line_no, None, plan)
                return
            saved = self.hf_saved
            if saved is not None and every is not None and not self.hf_unanchored:
                count = saved[1] + 1
                self.hf_saved = (saved[0], count)
                self._record((saved[0] // every + count) * every, pairs, line_no, None, plan)
                return
            self.hf_unanchored.append((pairs, line_no))
            return
        if prev is None:
            step = max(1, anchor or 0)
        else:
            step = max(1, prev + 1) if anchor is None else max(1, anchor, prev + 1)
        if anchor is not None:
            step = self._epoch_ahead(pairs, step) or step
        anchored = self.bars.get(self.hf_anchor_key) if self.hf_anchor_key else None
        if anchor is not None and anchored is not None:
            anchored.anchored += 1
        if self.hf_unanchored:
            for back, (early, early_line) in enumerate(reversed(self.hf_unanchored), start=1):
                if step - back >= 1:
                    self._record(step - back, early, early_line, None, numbered=False)
            self.hf_unanchored.clear()
        self.hf_prev = step
        self._record(step, pairs, line_no, None, plan)

    def _hf_grid(self) -> tuple[float | None, int | None]:
        """The banner's (``steps_per_epoch``, ``every``) by ``banner_total``, kept while the
        banner and total stand (each bar-less dict asked both twice: a tenth of a bot's first
        read of a 1 MiB HF tail)."""
        banner, total = self.hf_banner, self.banner_total
        kept = self.hf_grid
        if kept is not None and kept[0] is banner and kept[1] == total:
            return kept[2], kept[3]
        per, every = banner.steps_per_epoch(total), banner.every(total)
        self.hf_grid = (banner, total, per, every)
        return per, every

    def _on_grid(self, pairs: Mapping[str, float], step: int) -> int:
        """A bar-less training dict's step on its logging grid (``_grid_step``), else
        ``step``, the nearest its epoch gives."""
        on_grid = self._grid_step(pairs)
        return step if on_grid is None else on_grid

    def _grid_step(self, pairs: Mapping[str, float]) -> int | None:
        """An HF training dict's step on its logging grid: its epoch, rounded by the Trainer,
        gives an interval of steps, and the cadence inferred from the dicts so far
        (``hf_cadence``) picks one in it; None when it cannot. A printed ``logging_steps``
        already places a dict (``hf_epoch_step``)."""
        epoch, (per, every) = pairs.get("epoch"), self._hf_grid()
        if "loss" not in pairs or epoch is None or per is None or every is not None:
            return None  # an eval or summary dict is off the training grid
        printed = printed_quantum(epoch)
        if printed < 0.01:
            self.hf_fine_epoch = True
        quantum = significant_quantum(epoch) if self.hf_fine_epoch else min(printed, 0.01)
        interval = step_interval(epoch, per, quantum)
        if interval is None:
            self.hf_cadence = HfCadence()
            return None
        self.hf_cadence, on_grid = advance(self.hf_cadence, *interval)
        return on_grid

    def _epoch_ahead(self, pairs: Mapping[str, float], step: int) -> int | None:
        """The step an HF dict's ``epoch`` gives (``hf_epoch_step``) when it lies past
        ``step``, the bar's count, by more than the epoch's printed precision: the bar lags
        its dicts (``srun --label`` holds a task's unfinished line, the bar, and writes it
        in pieces after dicts printed later). None when the banner cannot say, or agrees.
        Every Trainer prints the epoch to 0.01 or finer (``round(epoch, 2)`` in older
        Trainers, 4 significant digits in 5.x, whose ``'0.3'`` dropped its zeros: 0.3000).
        Once an epoch printed finer than 0.01 is read (``hf_fine_epoch``: no rounding to 2
        decimals), an epoch that puts the dict on a whole step within 4 significant digits
        takes that step when it is past the bar's count: srun writes the held bar in pieces,
        so it may be a step or two behind as well as 10-20 (``0.6`` was 0.6000: step 120 of
        200 a epoch, not the bar's 119). An epoch rounded to 0.01 spans several steps: the
        logging grid (``_grid_step``) places the dict in it when it can."""
        epoch, (per, every) = pairs.get("epoch"), self._hf_grid()
        by_epoch = epoch_step(per, every, epoch)
        if by_epoch is None or per is None or epoch is None:
            return None
        on_grid = self._grid_step(pairs)
        if on_grid is not None and on_grid > step:
            return on_grid  # the logging grid places the dict past the lagging bar's count
        printed = printed_quantum(epoch)
        if printed < 0.01:
            self.hf_fine_epoch = True
        if by_epoch > step + 1 + per * min(printed, 0.01) / 2:
            return by_epoch
        if not self.hf_fine_epoch:
            return None
        # The Trainer does not round its epochs to 0.01: each is printed to 4 significant
        # digits or finer, and one that puts the dict on a whole step, past the bar's count,
        # is that step (a bar a step or two behind).
        exact = epoch * per
        near, slack = round(exact), per * significant_quantum(epoch) / 2
        return near if near > step and slack < 0.5 and abs(exact - near) <= slack else None

    def _on_hf_save(self, step: int) -> None:
        """HF Trainer saved ``checkpoint-{step}`` (after logging that step): where no bar
        numbers the dicts, the ones waiting for a step are counted back from it, on the
        logging grid (the last is the last multiple of ``logging_steps`` up to ``step``; the
        first at step 1 under ``logging_first_step``), and the ones after it counted on
        (``_on_hf_dict``). Needs ``logging_steps``: else nothing is anchored."""
        if self.hf_anchor is not None or self.hf_prev is not None:
            return  # a training bar numbers the dicts
        every = self.hf_banner.every(self.banner_total)
        if every is None:
            return
        self.hf_saved = (step, 0)
        pending = self.hf_unanchored
        last = step // every * every
        for at, (pairs, line_no) in enumerate(pending):  # in logging order
            back = len(pending) - 1 - at
            if at == 0 and self.hf_banner.logging_first and last - back * every < 1:
                self._record(1, pairs, line_no, None, numbered=False)
            elif last - back * every >= 1:
                self._record(last - back * every, pairs, line_no, None, numbered=False)
        pending.clear()

    def _hf_banner_line(self, body: str) -> bool:
        """One line of HF Trainer's ``***** Running training *****`` banner: ``Num Epochs``
        opens a new banner (a resumed or second run prints its own), taking the ``Num
        examples`` line just before it (an eval banner's is followed by ``Batch size``); or of
        Unsloth's in its place (``unsloth_lines``). Whether it was Unsloth's start line (its
        total read: the caller records the launch)."""
        banner = self.hf_banner
        unsloth = unsloth_banner(body) if "Total steps = " in body else None
        if unsloth is not None:
            self.banner_total = unsloth.total
            self.hf_banner = HfBanner(epochs=unsloth.epochs, examples=unsloth.examples,
                                      logging_steps=banner.logging_steps,
                                      logging_first=banner.logging_first,
                                      logging_by_steps=banner.logging_by_steps)
            return True
        found = HF_NUM_RE.search(body)
        if found is not None:
            kind, number = found.group(1), int(found.group(2).replace(",", ""))
            if kind == "examples":
                self.hf_banner = banner.model_copy(update={"examples_seen": number})
            elif kind == "Epochs":
                self.hf_banner = HfBanner(epochs=number, examples=banner.examples_seen,
                                          logging_steps=banner.logging_steps,
                                          logging_first=banner.logging_first,
                                          logging_by_steps=banner.logging_by_steps)
            else:
                self.hf_banner = banner.model_copy(update={"epoch_steps": number})
            return False
        batch = HF_BATCH_RE.search(body)
        size = int(batch.group(1).replace(",", "")) if batch is not None else unsloth_batch(body)
        if size is not None:
            self.hf_banner = banner.model_copy(update={"batch": size})
        return False

    def record_counted(self, step: int, pairs: dict[str, float], line_no: int) -> None:
        """A bar-less HF dict numbered at the end (``close``), unless its step was logged
        again on a later line (a restarted run's), which stands."""
        held = self.points.get(step)
        if held is None or not held.line_no or held.line_no < line_no:
            self._record(step, pairs, line_no, None, numbered=False)

    def in_line_order(self) -> None:
        """After bar-less HF dicts were numbered at the end (``close``): the points in the
        order of their lines, as they were logged, not with those dicts last. The summary keeps
        the steps logged last, and a dict counted at the end is no later for it: read so, a
        dict far above the read-back suffix (``probes.logs.recent``) took the place of the
        suffix's own steps. Points of no line (SkyRL's step left pending) keep the order."""
        items = list(self.points.items())
        if any(not point.line_no for _, point in items):
            return
        ordered = sorted(items, key=lambda item: item[1].line_no or 0)
        if ordered != items:
            self.points.clear()
            self.points.update(ordered)

    def hf_counted_step(self, count: int) -> int:
        """The step of the ``count``-th bar-less HF dict of the log: ``count`` logging
        intervals (``logging_steps`` if the log printed it, else 1), the first dict at
        step 1 under ``logging_first_step``."""
        every = self.hf_banner.every(self.banner_total)
        if every is None or every == 1:
            return count
        if self.hf_banner.logging_first:
            return 1 if count == 1 else (count - 1) * every
        return count * every
