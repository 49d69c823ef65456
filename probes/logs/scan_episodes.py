"""``MetricScan``'s OpenRLHF layer: the step status its ``Episode [k/N]`` bar's postfix prints,
its resume from a checkpoint (``EpisodeResume``), its ``Global step N: {...}`` line and its
SFT/DPO/RM trainers' ``Train step of epoch E`` bars (in micro-batches).
"""

from __future__ import annotations

from datetime import datetime

from probes.logs.bar_lines import (
    OPENRLHF_EPOCHS_BAR,
    TqdmBar,
    bar_postfix,
    openrlhf_epoch,
    postfix_loss,
)
from probes.logs.lines import parse_pairs, quoted_pairs
from probes.logs.progress import EPISODE_BAR, episode_number, sec_per_it
from probes.logs.scan_patterns import CONSUMED_RE, ROLLOUT_BATCH_RE
from probes.logs.scan_steps import ITER_TIMES_KEPT, OPENRLHF_UNSTEPPED, StepScan
from probes.models import Frozen

_UNPLACED = (0, 0)
"""``EpisodeScan._resumed_epoch``'s answer for a resumed epoch's bar it cannot place."""


class EpisodeResume(Frozen):
    """An OpenRLHF run resumed from a checkpoint, as its log says (before 0.8.1).

    Up to 0.8.0 a resumed run restores ``consumed_samples``, takes ``steps = consumed_samples
    // rollout_batch_size + 1`` and starts the episode it stopped in with
    ``sampler.set_epoch(episode, consumed_samples=...)``, whose length is then the batches *left*
    in that episode: that episode's ``Episode [k/N]`` bar counts from 0 to the batches left
    (``openrlhf/trainer/ppo_trainer.py`` and ``utils/distributed_sampler.py``, v0.8.0), and
    only the next episodes' bars count whole episodes. So the first bar after the resume
    gives the run's step only from ``consumed_samples // rollout_batch_size`` (the steps before
    its count 0), and the whole episode as those steps plus its total over k; with no
    ``rollout_batch_size`` printed, neither (``MetricScan.episode_base``)."""

    samples: int
    """``consumed_samples`` the run was restored at (> 0)."""
    bar: tuple[int, int] | None = None
    """(k, total) of the first ``Episode [k/N]`` bar drawn after the resume line."""
    epoch: int | None = None
    """E of the first ``Train step of epoch E`` bar drawn after the resume line: the epoch
    the SFT/DPO/RM trainers resumed in (``EpisodeScan._openrlhf_step``)."""


class EpisodeScan(StepScan):
    """OpenRLHF's episodes, resume and global-step lines in ``MetricScan`` (see the module)."""

    rollout_batch: int | None = None
    """OpenRLHF's ``rollout_batch_size``, if printed."""
    resume: EpisodeResume | None = None
    """OpenRLHF's last resume (``EpisodeResume``), None for a fresh run."""
    episode_unanchored = False
    """A resumed episode's postfix steps were counted from its bar's 0 (no
    ``rollout_batch_size`` to place them): their order only (``steps_unanchored``)."""
    episode_ahead = False
    """OpenRLHF's ``Episode [k/N]`` bar counts from the run's next step (0.8.11 and 0.9.0:
    ``initial=steps``): a ``Global step N`` line was read with the bar at N + 1
    (``_on_global_step``), so its count is one ahead of the steps done in every episode."""
    def _resume_marker(self, body: str) -> None:
        """OpenRLHF's ``rollout_batch_size`` and its resume line (``EpisodeResume``): a
        ``consumed_samples`` of 0 is a fresh start (``--load_checkpoint`` with none saved)."""
        rollout = ROLLOUT_BATCH_RE.search(body)
        if rollout is not None and int(rollout.group(1)) > 0:
            self.rollout_batch = int(rollout.group(1))
        consumed = CONSUMED_RE.search(body) if "consumed_samples: " in body else None
        if consumed is not None:
            samples = int(consumed.group(1))
            self.resume = EpisodeResume(samples=samples) if samples > 0 else None

    def _see_episode_bar(self, desc: str, total: int) -> None:
        """An ``Episode [k/N]`` bar's redraw: the first after a resume line is the resumed
        episode's (``EpisodeResume.bar``)."""
        resume = self.resume
        if resume is not None and resume.bar is None:
            episode = episode_number(desc.strip())
            if episode is not None:
                self.resume = resume.model_copy(update={"bar": (episode, total)})

    def episode_base(self, episode: int, total: int) -> tuple[int | None, int | None]:
        """(steps before the count 0 of the ``Episode [episode/N]`` bar of ``total``, the
        run's steps a episode), by ``EpisodeResume``: ``(episode - 1) x total`` and ``total``
        for a whole episode's bar; for the resumed one the steps ``consumed_samples //
        rollout_batch_size`` and ``(those + total) / episode``, or (None, None) when the log
        does not say (no ``rollout_batch_size``, or numbers that do not add up)."""
        resume = self.resume
        if resume is None or resume.bar != (episode, total):
            return (episode - 1) * total, total
        batch = self.rollout_batch
        if not batch or resume.samples % batch:
            return None, None
        before = resume.samples // batch
        if (before + total) % episode or before < (episode - 1) * total:
            return None, None  # (a whole episode is at least the batches left in it)
        return before, (before + total) // episode

    def _episode_before(self, total: int) -> int | None:
        """The count of the ``Episode [k/N]`` bar's redraw before this one (any episode's: they
        share a track), None if none was read."""
        key = (EPISODE_BAR, total)
        pending = self._lasts.get(key)
        if pending is not None:
            return int(pending[1])
        track = self.bars.get(key)
        return track.last.current if track is not None and track.last is not None else None

    def _episode_status(self, bar: TqdmBar, before: int | None, body: str,
                        line_no: int) -> None:
        """OpenRLHF < 0.8.5's step status, its ``Episode [k/N]`` bar's postfix (it logs no step
        line): ``set_postfix(status)`` redraws the bar at the count before the step (the
        count unmoved since the redraw ``before`` it, or a new episode's bar), then
        ``update()`` redraws it one on with the same postfix. So a postfix drawn without a
        move is step ``(k-1) x total + count + 1``, one drawn on a move (or with no redraw
        before it read) step ``(k-1) x total + count``. tqdm prints 3 significant digits: two
        steps' postfixes can read the same, so the text cannot tell the redraws apart. That
        bar counts rollout batches, one a step (``episode_progress``)."""
        episode = episode_number(bar.desc)
        raw = bar_postfix(body) if episode is not None else None
        if raw is None or episode is None or self._skimming:
            return
        base = self.episode_base(episode, bar.total)[0]
        if base is None:  # a resumed episode's bar, not placed: its count keeps the order
            self.episode_unanchored, base = True, 0
        step = base + bar.current
        if before is not None and bar.current <= before and bar.current < bar.total:
            step += 1  # (a full bar has no step left: its unmoved redraw is close()'s)
        if step > 0:
            self._mark("openrlhf")
            self._record(step, raw, line_no, None)

    def _episode_count(self) -> int | None:
        """The count of the ``Episode [k/N]`` bar's last redraw (any episode's), None if none
        was read."""
        tracks = [(track.seen, key) for key, track in self.bars.items() if key[0] == EPISODE_BAR]
        return self._episode_before(max(tracks)[1][1]) if tracks else None

    def _on_global_step(self, step: int, text: str, line_no: int, at: datetime | None) -> None:
        """OpenRLHF's ``Global step N: {status}``: the status dict's metrics at step N (a flat
        dict; its stamp, ``INFO MM-DD HH:MM:SS file.py:N]``, is the step's time)."""
        if text.count("{") > 1:
            return
        pairs = quoted_pairs(text)
        if pairs is None:
            pairs = parse_pairs(text)
        if pairs:
            self._mark("openrlhf")
            self._record(step, pairs, line_no, at)
            if "dynamic_filtering_pass_rate" in pairs:  # its Episode bar counts batches
                self.skyrl_batches = self.skyrl_batches._replace(regenerated=True)
            if not self.episode_ahead:
                self.episode_ahead = self._episode_count() == step + 1

    def _postfix_step(self, body: str, line_no: int) -> None:
        """OpenRLHF's SFT/DPO/RM trainers' bars (``Train epoch``, ``Train step of epoch E``),
        else a script's postfix bar (``StepScan._postfix_step``)."""
        if OPENRLHF_EPOCHS_BAR in body:
            self._openrlhf_epochs(body)
        if not self._skimming and "loss=" in body:
            bar = self._bar(body)
            if bar is not None and (epoch := openrlhf_epoch(bar.desc)) is not None:
                self._openrlhf_step(bar, epoch, body, line_no)
                return
        super()._postfix_step(body, line_no)

    def _openrlhf_start(self) -> int:
        """The epoch the run's ``Train epoch`` bar starts from: ``tqdm(range(start_epoch,
        epochs))`` counts only the epochs left after a resume (0 for a fresh run, or while the
        resumed epoch's bar is not drawn yet)."""
        return (self.resume.epoch or 0) if self.resume is not None else 0

    def _openrlhf_epochs(self, body: str) -> None:
        """OpenRLHF's ``Train epoch`` bar (SFT, DPO, RM trainers): its total and the epoch it
        starts from, the run's epochs (read while skimming too: it is drawn once before the
        first step bar)."""
        bar = self._bar(body)
        if bar is not None and bar.desc == OPENRLHF_EPOCHS_BAR and bar.total > 0:
            self.epochs_planned = bar.total + self._openrlhf_start()

    def _openrlhf_step(self, bar: TqdmBar, epoch: int, body: str, line_no: int) -> None:
        """OpenRLHF's ``Train step of epoch E`` bar: its count is the epoch's micro-batches and
        its postfix the last one's ``logs_dict``. The trainer's ``global_step`` is the run's
        micro-batches over DeepSpeed's ``gradient_accumulation_steps`` G (its config dump:
        ``train_batch_size // micro_train_batch_size // world_size``), ``(E x the bar's total +
        count) // G``; its total the epochs' micro-batches over G. Without G, no step: a
        micro-batch is no optimizer step. The run is marked ``openrlhf-microbatches`` (its
        trend says the step is unknown) rather than misread. A resumed epoch's bar counts only
        the micro-batches left in it: ``_resumed_epoch``. The bar's s/it is a micro-batch's:
        G of them are a step's time (the run's rate, for an ETA)."""
        values = postfix_loss(body)
        accumulation = self.ds_accumulation
        if values is None:
            return
        if not accumulation:
            if bar.current > 0:
                self._mark(OPENRLHF_UNSTEPPED)
            return
        placed = self._resumed_epoch(epoch, bar, accumulation)
        if placed == _UNPLACED:
            if bar.current > 0:
                self._mark(OPENRLHF_UNSTEPPED)
            return
        if placed is None:
            step, per_epoch = (epoch * bar.total + bar.current) // accumulation, bar.total
        else:
            step, per_epoch = placed
        if self.epochs_planned is not None and per_epoch > 0:
            self.banner_total = self.epochs_planned * per_epoch // accumulation or None
        if step > 0:
            self._mark("openrlhf")
            self._time_step(step, bar, accumulation)
            self._record(step, values, line_no, None)

    def _resumed_epoch(self, epoch: int, bar: TqdmBar,
                       accumulation: int) -> tuple[int, int] | None:
        """(step, an epoch's micro-batches) of the bar of the epoch a resumed run restarted in
        (the first step bar after its ``consumed_samples`` line), None for any other epoch's
        bar. ``fit`` restores ``step = consumed_samples // train_batch_size x G + 1``, and the
        sampler skips the epoch's consumed samples: the bar counts on from the checkpoint's
        step, and its total is the epoch's micro-batches less those done before, so a whole
        epoch is ``(total + done) / (E + 1)``. Without DeepSpeed's ``train_batch_size`` the
        step is unknown (``_UNPLACED``): the bar's micro-batches are no count of it."""
        resume = self.resume
        if resume is None:
            return None
        if resume.epoch is None:
            self.resume = resume = resume.model_copy(update={"epoch": epoch})
            if self.epochs_planned is not None:
                self.epochs_planned += epoch  # the epoch bar drawn before counted those left
        if epoch != resume.epoch:
            return None
        if not self.ds_batch:
            return _UNPLACED
        done = resume.samples // self.ds_batch * accumulation
        step = (done + bar.current) // accumulation
        # The checkpoint's own step was the last attempt's: a redraw before this attempt's
        # first step is done shows that step's first micro-batches (a step 0 of a fresh run).
        return (step if bar.current >= accumulation else 0), (bar.total + done) // (epoch + 1)

    def _time_step(self, step: int, bar: TqdmBar, accumulation: int) -> None:
        """A step's time from the step bar's rate (a micro-batch's, tqdm-smoothed): G
        micro-batches, the run's rate when no training bar gives one."""
        per_micro = sec_per_it(bar.rate)
        times = self.iter_times
        if per_micro is None:
            return
        if times and step < times[-1][0]:
            times.clear()  # a restarted run counts again from its resume point
        if not times or step > times[-1][0]:  # a redraw of the same step adds no time
            times.append((step, per_micro * accumulation))
            del times[:-ITER_TIMES_KEPT]
