"""``MetricScan``'s end: ``close`` settles what only the end of the tail can (HF dicts no bar
numbered, SkyRL's step left pending), ``summary`` freezes the scan into a ``LogSummary`` (the
training bar chosen, progress, rate and totals).
"""

from __future__ import annotations

from typing import cast

from probes.logs.bar_lines import TqdmBar, epoch_step_label
from probes.logs.progress import (
    EPISODE_BAR,
    BarTrack,
    episode_progress,
    iteration_clock,
    sec_per_it,
    trailing_rate,
    training_desc,
)
from probes.logs.scan_bars import BarScan
from probes.logs.scan_patterns import SKYRL_BARS
from probes.logs.skyrl_batches import BATCHES_BAR, VERL_BAR
from probes.models import LogSummary, ProgressBar


class SummaryScan(BarScan):
    """The end of ``MetricScan``'s pass: ``close`` and ``summary`` (see the module)."""

    def close(self, *, at_log_start: bool = True) -> None:
        """Flush what only the end of the tail can settle; ``at_log_start``: the pass began at
        the tail's first line (else unanchored HF dicts set ``hf_guessed``)."""
        if self._lasts:
            self._settle()
        if self.engine_line is not None:
            self._read_engine_line()
        self.hf_guessed = bool(self.hf_unanchored) and not at_log_start
        counted = bool(self.hf_unanchored)
        if counted:
            self.hf_counted = True
        for count, (pairs, line_no) in enumerate(self.hf_unanchored, start=1):
            self.record_counted(self.hf_counted_step(count), pairs, line_no)
        self.hf_unanchored.clear()
        if counted:
            self.in_line_order()
        skyrl = [t for (desc, _), t in self.bars.items() if desc in SKYRL_BARS]
        pending = self._pending_step()
        if pending is not None and skyrl and skyrl[-1].last is not None:
            last = skyrl[-1].last
            step = last.current + 1 - (self.skyrl_batches.lag if last.desc == BATCHES_BAR else 0)
            if step not in self.points:
                self._record(step, pending, 0, None, numbered=False)

    def summary(self, line_count: int, *, keep: int | None = None) -> LogSummary:
        """The summary; ``keep``: only the ``keep`` steps logged last (in step order). Without
        a bar or iteration rate, the rate is read from the stamps of those steps."""
        if self._lasts:
            self._settle()
        track = self._training_bar()
        progress, rate = None, None
        if track is not None and track.last is not None:
            progress, rate = self._bar_progress(track, track.last)
        logged = list(self.points)  # in logging order: a re-logged step (resume) moved last
        points = tuple(self.points[step] for step in sorted(logged[-(keep or len(logged)):]))
        if rate is None and self.iter_times:
            rate = trailing_rate(iteration_clock(self.iter_times))
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
            harbor_metric=self.harbor_metric,
            last_timestamp=self.clock.last,
            finished=self.finished,
            steps_unanchored=(self.hf_counted and not self.log_start) or self.episode_unanchored,
            relaunch_line=self.relaunch_line,
        )

    def _bar_progress(self, track: BarTrack,
                      last: TqdmBar) -> tuple[ProgressBar | None, float | None]:
        """The training bar's progress (``None`` without a known total) and its trailing
        seconds per step (``None`` if its draws tell none); ``last``: its latest draw."""
        current, total_known = last.current, cast(int | None, last.total)
        label = epoch_step_label(last.desc) if "|" in last.desc else None
        if label is not None:  # torchtune's: the global step of epochs x the bar's total
            current, total_known = label.step, self.epoch_steps_total(last.total)
        if last.desc == BATCHES_BAR:  # SkyRL's: a resampled batch is no step
            current = max(0, current - self.skyrl_batches.lag)
        unit, episodic = 1, training_desc(last.desc) == EPISODE_BAR
        if episodic:  # OpenRLHF's: episodes x the episode's steps
            episode = episode_progress(track, self.episode_base, ahead=self.episode_ahead)
            current, total_known, unit, spent = episode or (current, None, 1, False)
            if spent and self.points:  # the data is spent: the steps it took are the total
                # (0.8.1 to 0.9.0 move a one-a-step bar before the step's line: one step
                # ahead of the logged ones is the last, still under way)
                taken = max(self.points)
                current = total_known = current if unit == 1 and current == taken + 1 else taken
        if self.skyrl_batches.regenerated and self.points and (
                last.desc == VERL_BAR or episodic):  # verl DAPO's, OpenRLHF filtering's:
            current = min(current, max(self.points))  # its step lines count, not its bar
        progress = None
        if total_known is not None:
            per_it = sec_per_it(last.rate)
            progress = ProgressBar(
                current=current,
                total=total_known,
                elapsed_s=last.elapsed_s,
                sec_per_it=per_it * unit if per_it is not None else None,
            )
        rate = trailing_rate(track.events)
        if rate is not None and episodic:
            rate = rate * unit if total_known is not None else None
        return progress, rate

    def _training_bar(self) -> BarTrack | None:
        """The training bar: the banner's total if one matches, else a trainer's own desc,
        then a bar HF's step dicts followed, then the most redrawn; but a bar no dict followed
        that reached its total with another drawn after it is over (a script's own tokenizer
        loop before training), and comes last. A desc-less bar that neither the banner's total
        nor a dict vouches for is none when it runs faster than any optimizer step
        (``BarTrack.counts_items``: a tokenizer loop, an example count) or was first drawn
        after the trainer's finish line (an evaluation after ``train()``)."""
        tracks = list(self.bars.items())
        matching = [t for t in tracks if t[0][1] == self.banner_total]
        tracks = matching or [t for t in tracks if not self._not_training(*t)]
        if not tracks:
            return None
        latest = max(track.seen for _, track in tracks)

        def rank(item: tuple[tuple[str, int], BarTrack]) -> tuple[bool, bool, bool, int]:
            (desc, total), track = item
            over = (not track.anchored and track.last is not None
                    and track.last.current >= total and track.seen < latest)
            return desc != "", track.anchored > 0, not over, track.count

        return max(tracks, key=rank)[1]

    def _not_training(self, key: tuple[str, int], track: BarTrack) -> bool:
        """A desc-less bar no dict followed that cannot be the trainer's (``_training_bar``)."""
        if key[0] or track.anchored:
            return False
        after_end = self.finish_seq is not None and track.first > self.finish_seq
        return after_end or track.counts_items()
