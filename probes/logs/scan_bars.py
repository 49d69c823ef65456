"""``MetricScan``'s tqdm layer: each training bar's track (its count, last redraw and events),
read redraw by redraw (``feed_bar``, ``_on_bar``) or in bulk before the read-back suffix
(``skim_bars``), and what a redraw tells beyond its track: the HF anchor, SkyRL's pending
step, a dict or step line printed on the bar's line.

Policy: a bar's kind is judged once per distinct printing (desc, total, nesting, rate class)
and remembered for the tail: a tail redraws a few bars thousands of times.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import not_

from probes.logs.bar_lines import (
    TqdmBar,
    after_bar,
    epoch_step_label,
    glued_dict,
    loss_desc,
    may_be_lightning,
)
from probes.logs.clock import STAMP_LEADS
from probes.logs.lines import interval_seconds, parse_pairs, parse_verl, quoted_pairs
from probes.logs.progress import (
    EPISODE_BAR,
    EPOCH_STEP_BAR,
    LOSS_DESC_BAR,
    TRAINING_RATES,
    WIDE_WINDOW,
    BarTrack,
    drawn_training_desc,
    is_training_bar,
    sec_per_it,
    training_desc,
)
from probes.logs.scan_core import remember
from probes.logs.scan_episodes import EpisodeScan
from probes.logs.scan_patterns import SKYRL_BARS, VERL_EPOCH_RE
from probes.logs.scan_steps import ITER_TIMES_KEPT
from probes.logs.skyrl_batches import BATCHES_BAR, at_redraw, with_placed

_Printing = tuple[str, str, bool, bool, bool]
"""A bar line's (desc, total, nested, rate ends in an iteration rate, rate blank)."""
_Kind = tuple[str, tuple[str, int]] | None
"""A training bar's (desc, track key), or None (no training bar)."""


def _training_kind(desc_raw: str, total_raw: str, nested: bool, rated: bool,
                   blank: bool) -> tuple[str, tuple[str, int]] | None:
    """(desc, track key) of a training bar printed so, else None: ``is_training`` of its
    stripped desc and of a rate field ending in an iteration rate (``rated``) or blank."""
    desc = drawn_training_desc(desc_raw.strip(), nested) if rated or blank else None
    if desc is None:
        return None
    return desc, (desc, int(total_raw))


class BarScan(EpisodeScan):
    """The progress-bar readers of ``MetricScan`` (see the module)."""

    def _feed_bar_line(self, bar: TqdmBar, body: str, nested: bool, line_no: int) -> None:
        """``feed`` of a line that is a tqdm redraw: the bar, OpenRLHF's postfix status, and a
        dict printed on its line."""
        status = "=" in body and bar.desc.startswith("Episode [")
        before = self._episode_before(bar.total) if status else None
        self._on_bar(bar, nested, line_no)
        if status:
            self._episode_status(bar, before, body, line_no)
        if "}" in body or "Step " in body or "step:" in body:
            self.feed_glued(body, line_no)
        if "` stopped: `" in body:
            self.finish_marks(body)

    def feed_glued(self, body: str, line_no: int) -> None:
        """After a bar line's redraw: the one-line dict printed on its line, if any
        (``bar_lines.glued_dict``), read as its own line would be. An open multi-line dict stays
        open (the bar line left it so). So is torchtune's ``Step N | loss:... grad_norm:...``
        (its ``StdoutLogger`` prints to stdout right after the bar's redraw on stderr), and
        verl's ``step:N - key:value - ...`` where no Ray forwards the streams line by line (its
        FSDP SFT trainer under torchrun: ``LocalLogger`` prints after the ``Epoch E/M`` bar)."""
        if "Step " in body and " | " in body:
            rest = after_bar(body)
            if rest is not None and rest.lstrip().startswith("Step "):
                self._step_line(rest.strip(), line_no, None)
                return
        if "step:" in body:
            rest = after_bar(body)
            rest = rest.lstrip() if rest is not None else None
            verl = parse_verl(rest) if rest is not None and rest.startswith("step:") else None
            if verl is not None:
                self._mark("verl")
                if self._record(verl[0], verl[1], line_no, None):
                    self._verl_epoch_bar(body, verl[0])
                return
        text = glued_dict(body)
        if text is None or text.count("{") > 1:
            return
        pairs = quoted_pairs(text)
        if pairs is None:
            pairs = parse_pairs(text)
        if pairs:
            self._on_dict(pairs, line_no)

    def _verl_epoch_bar(self, body: str, step: int) -> None:
        """verl's step line printed on an ``Epoch E/M`` bar's redraw (its SFT trainers under
        torchrun): that redraw is the bar the step goes with (``verl_epoch_step``)."""
        bar = self._bar(body)
        if bar is not None and VERL_EPOCH_RE.fullmatch(bar.desc) is not None:
            self._see_verl_bar(bar.desc, bar.current, bar.total, bar.rate)
            self.verl_epoch_step(step, glued=True)

    def _see_verl_bar(self, desc: str, current: int, total: int, rate: str) -> None:
        """Remember an ``Epoch E/M`` redraw (E, M, count, total, rate): no training bar by its
        desc, it is verl's SFT trainers' only total when their step lines follow it."""
        found = VERL_EPOCH_RE.fullmatch(desc.strip())
        if found is not None and total > 0:
            self.verl_bar = (int(found.group(1)), int(found.group(2)), current, total, rate)

    def verl_epoch_step(self, step: int, *, glued: bool = False) -> None:
        """verl's SFT trainers (``fsdp_sft_trainer.py``, ``sft_trainer.py``) draw ``Epoch E/M``
        over an epoch's steps (``total=steps_per_epoch``; a resumed epoch's ``initial`` its
        steps done) and print each step's line after its redraw: on the redraw's line under
        torchrun, on its own line where srun's ``--label`` or Ray writes the streams apart
        (the bar then behind the steps by the pieces srun holds). When the latest redraw is
        not past step ``step`` nor an epoch behind it (``(E-1) x total + count <= step``, at
        most ``total`` on and within M x total; on the redraw's own line, ``glued``, the step
        is its next one), the run's total is
        M x total (the engine trainer prints no other: its ``Total training steps`` is logged
        at WARN) and the bar's s/it a step's time. A ``Number of steps/epoch`` line's total
        stands."""
        bar = self.verl_bar
        if bar is None:
            return
        epoch, epochs, current, total, rate = bar
        drawn = (epoch - 1) * total + current
        if not 0 < epoch <= epochs or not drawn <= step <= min(drawn + total, epochs * total):
            return
        if glued and step != drawn + 1:
            return
        if self.banner_total is None:
            self.banner_total = epochs * total
        per_step = sec_per_it(rate)
        times = self.iter_times
        if per_step is not None and (not times or step > times[-1][0]):
            times.append((step, per_step))
            del times[:-ITER_TIMES_KEPT]

    def feed_bar(self, line: str, groups: tuple[str, str, str, str, str], nested: bool,
                 line_no: int) -> None:
        """``feed`` of a bar line whose body is itself, led by neither ``{`` nor a quote
        (``bar_lines.own_bars``), given its ``tqdm_groups`` (with a count: a bar). ``_on_bar``
        inlined; the track's ``last`` is made a ``TqdmBar`` only when read (``_settle``)."""
        if self.yaml_step is not None:
            self._yaml_line(line, line_no)
        engine = self.engine_line
        if engine is not None and line_no > engine:
            self._read_engine_line()
        if line[:1] in STAMP_LEADS:
            self.clock.place(self._stamp(line))
        if line_no == self.engine_line:
            self._read_engine_line()
        if may_be_lightning(line):
            self._lightning(line, line_no)
        desc_raw, current, total_raw, elapsed, rate = groups
        shape = (desc_raw, total_raw, nested)
        shapes = self._shapes
        if shape in shapes:
            known = shapes[shape]
        else:
            desc = drawn_training_desc(desc_raw.strip(), nested)  # the rate: below
            known = remember(shapes, shape, None if desc is None
                              else (desc, (desc, int(total_raw))))
        if known is None:
            if desc_raw.startswith("Epoch "):  # verl SFT's bar, no training bar by its desc
                self._see_verl_bar(desc_raw, int(current), int(total_raw), rate.strip())
            return
        rate = rate.strip()
        if rate and not rate.endswith(TRAINING_RATES):
            return
        desc, key = known
        track = self.bars.get(key)
        if track is None:
            track = self.bars[key] = BarTrack()
            track.first = self.bar_seq + 1
        step = int(current)
        before = (self._episode_before(key[1])
                  if desc == EPISODE_BAR and "=" in line else None)
        track.see(step, interval_seconds(elapsed))
        self.bar_seq += 1
        track.seen = self.bar_seq
        self._lasts[key] = groups
        if desc == EPOCH_STEP_BAR:
            self._on_epoch_step(desc_raw, line_no)
        else:
            if not desc:
                self.hf_anchor_key = key
            elif desc == EPISODE_BAR:
                self._see_episode_bar(desc_raw, key[1])
            elif desc == LOSS_DESC_BAR:
                self._on_loss_desc(desc_raw, step, line_no)
            self._after_bar(desc, step)
            if desc == EPISODE_BAR and "=" in line:
                self._episode_status(TqdmBar(desc_raw.strip(), step, key[1], None, ""),
                                     before, line, line_no)

    def settle(self) -> None:
        """Make each track's last ``feed_bar`` redraw its ``last`` (what ``feed`` of those
        lines would have left: ``summary``, ``close`` and a snapshot call it first)."""
        if self._lasts:
            self._settle()

    def _settle(self) -> None:
        """Make each track's last ``feed_bar`` redraw its ``last``."""
        for key, (desc, current, _, elapsed, rate) in self._lasts.items():
            self.bars[key].last = TqdmBar(desc.strip(), int(current), key[1],
                                          interval_seconds(elapsed), rate.strip())
        self._lasts.clear()

    def skim_glued(self, body: str, seq: int | None = None) -> None:
        """``skim``'s part of ``feed_glued``: HF's end-of-training dict on a bar's line marks
        the run finished (no other dict is read while skimming); ``seq``: that line's
        ``bar_seq`` when ``skim_bars`` counted past it."""
        text = glued_dict(body)
        if text is not None and "train_runtime" in text:
            unfinished = self.finish_seq is None
            self.feed_glued(body, 0)
            if unfinished and seq is not None and self.finish_seq is not None:
                self.finish_seq = seq

    def skim_bars(self, found: Sequence[tuple[str, str, str, str, str]],
                  nested: Sequence[bool]) -> None:
        """``skim`` of consecutive bar lines, given their ``tqdm_groups`` (each a bar).

        What the summary reads comes out as line by line: each training track's count (one
        judgement per distinct printing of desc, total, nesting and rate class, counted in
        C), its last redraw, the HF anchor, the formats marked; and each track's events
        since its last restart, of which ``trailing_rate`` reads the last ``WIDE_WINDOW`` at
        most: at least those are kept, found walking back from the end (a tail redraws its
        bar thousands of times). ``hf_prev``, which ``enter_suffix`` resets, is not kept."""
        self._skimming = True
        if self._lasts:
            self._settle()
        if not found:
            return
        printings, kinds = self._count_bars(found, nested)
        if any(kind is not None for kind in kinds.values()):
            self._bars_back(found, printings, kinds)

    def _count_bars(self, found: Sequence[tuple[str, str, str, str, str]],
                    nested: Sequence[bool]) -> tuple[list[_Printing], dict[_Printing, _Kind]]:
        """``skim_bars``' counts: (each line's printing, each printing's kind); the tracks
        made in order of first appearance, each format marked at its track's first redraw."""
        descs, _, totals, _, rates = zip(*found, strict=True)
        # A rate field counts as the training bar's by whether it ends in an iteration rate
        # (or is blank): printings differing only in the rate's number are judged once.
        rated = map(str.endswith, map(str.strip, rates), repeat(TRAINING_RATES))
        blank = map(not_, map(str.strip, rates))
        printings = list(zip(descs, totals, nested, rated, blank, strict=True))
        kinds: dict[_Printing, _Kind] = {}
        bars = self.bars
        for printing, count in Counter(printings).items():  # in order of first appearance
            kind = kinds[printing] = _training_kind(*printing)
            if kind is None:
                continue
            if kind[0] == EPISODE_BAR:
                self._see_episode_bar(printing[0], kind[1][1])
            track = bars.get(kind[1])
            if track is None:
                track = bars[kind[1]] = BarTrack()
                track.first = self.bar_seq + printings.index(printing) + 1  # as _bars_back's
                if kind[0] == EPOCH_STEP_BAR:
                    self._mark("torchtune")
                elif kind[0]:
                    self._after_bar(kind[0], 0)  # its format (no record while skimming)
            track.count += count
        return printings, kinds

    def _bars_back(self, found: Sequence[tuple[str, str, str, str, str]],
                   printings: Sequence[_Printing], kinds: Mapping[_Printing, _Kind]) -> None:
        """``skim_bars``' walk back: each track's last redraw and events, the HF anchor."""
        tracks = {kind[1] for kind in kinds.values() if kind is not None}
        anchor = any(not key[0] for key in tracks)  # the last HF redraw is still to find
        lasts: dict[tuple[str, int], int] = {}
        newer: dict[tuple[str, int], tuple[int, float]] = {}  # the later event seen, undecided
        kept: dict[tuple[str, int], list[tuple[int, float]]] = {key: [] for key in tracks}
        settled: set[tuple[str, int]] = set()  # restart found, or WIDE_WINDOW events kept
        for at in range(len(printings) - 1, -1, -1):
            kind = kinds[printings[at]]
            if kind is None:
                continue
            key = kind[1]
            if key not in lasts:
                lasts[key] = at
                if anchor and not kind[0]:
                    self.hf_anchor, anchor = int(found[at][1]), False
                    self.hf_anchor_key = key
            if key in settled:
                continue
            elapsed_s = interval_seconds(found[at][3])
            if elapsed_s is None:
                continue
            step = int(found[at][1])
            later = newer.get(key)
            newer[key] = (step, elapsed_s)
            if later is None or later[0] == step:
                continue  # an equal later step is a refresh: the earliest sighting counts
            kept[key].append(later)
            if later[0] < step or len(kept[key]) >= WIDE_WINDOW:
                settled.add(key)  # a restart at ``later``, or enough events
                del newer[key]
                if len(settled) == len(tracks):
                    break  # every track's last was found before it settled
        for key in tracks:
            track = self.bars[key]
            track.seen = self.bar_seq + lasts[key] + 1
            track.extend_back(kept[key], newer.get(key), reached=key not in settled)
            desc, current, _, elapsed, rate = found[lasts[key]]
            track.last = TqdmBar(desc.strip(), int(current), key[1], interval_seconds(elapsed),
                                 rate.strip())
        self.bar_seq += len(found)

    def _on_bar(self, bar: TqdmBar, nested: bool, line_no: int) -> None:
        if not is_training_bar(bar, nested):
            if bar.desc.startswith("Epoch ") and not self._skimming:  # as ``feed_bar``'s
                self._see_verl_bar(bar.desc, bar.current, bar.total, bar.rate)
            return
        if self._lasts:
            self._settle()
        desc = training_desc(bar.desc)
        assert desc is not None  # is_training_bar
        track = self.bars.get((desc, bar.total))
        if track is None:
            track = self.bars[(desc, bar.total)] = BarTrack()
            track.first = self.bar_seq + 1
        track.add(bar)
        self.bar_seq += 1
        track.seen = self.bar_seq
        if desc == EPOCH_STEP_BAR:
            self._on_epoch_step(bar.desc, line_no)
        else:
            if not desc:
                self.hf_anchor_key = (desc, bar.total)
            elif desc == EPISODE_BAR:
                self._see_episode_bar(bar.desc, bar.total)
            elif desc == LOSS_DESC_BAR:
                self._on_loss_desc(bar.desc, bar.current, line_no)
            self._after_bar(desc, bar.current)

    def _skyrl_redraw(self, current: int) -> int:
        """The global step SkyRL's batches bar at ``current`` stands for; the steps it placed
        before an anchor that corrects its lead move with it (``probes.logs.skyrl_batches``).
        A skim counts redraws in bulk and records nothing: its redraws place nothing."""
        if self._skimming:
            return current
        state, step, shift = at_redraw(self.skyrl_batches, current)
        if shift:
            points = self.points
            moved = [(placed, points.pop(placed)) for placed in self.skyrl_batches.placed
                     if placed in points]
            for placed, point in moved:
                if placed - shift not in points:
                    points[placed - shift] = point.model_copy(update={"step": placed - shift})
            self.top = max(points, default=None)
        self.skyrl_batches = state
        return step

    def _on_epoch_step(self, desc: str, line_no: int) -> None:
        """torchtune's bar label (``bar_lines.epoch_step_label``): the loss at the global step."""
        self._mark("torchtune")
        label = epoch_step_label(desc.strip())
        if label is not None and label.loss is not None:
            self._record(label.step, {"loss": label.loss}, line_no, None)

    def _on_loss_desc(self, desc: str, step: int, line_no: int) -> None:
        """A run-long bar whose desc carries the loss (``bar_lines.loss_desc``): the point at
        its count, the optimizer steps done."""
        self._mark("fsdp_qlora")
        values = loss_desc(desc.strip())
        if values is not None and step > 0:
            self._record(step, values, line_no, None)

    def _after_bar(self, desc: str, current: int) -> None:
        """What a training bar's redraw tells beyond its track: the HF anchor, SkyRL's step."""
        if desc == "":
            if self.hf_anchor is not None and current < self.hf_anchor:
                self.hf_prev = None  # a new training loop (resume) restarted the bar
            self.hf_anchor = current
        elif desc in SKYRL_BARS:
            self._mark("skyrl")
            step = self._skyrl_redraw(current) if desc == BATCHES_BAR else current
            pending = self._pending_step()
            if pending is not None and step not in self.points and self._record(
                    step, pending, 0, None, numbered=False) and desc == BATCHES_BAR:
                self.skyrl_batches = with_placed(self.skyrl_batches, step)
            self.pending_reward, self.pending_status = None, None
        elif desc == "Training Progress":
            self._mark("verl")
        elif desc == EPISODE_BAR:
            self._mark("openrlhf")
