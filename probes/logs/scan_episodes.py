"""``MetricScan``'s OpenRLHF layer: the step status its ``Episode [k/N]`` bar's postfix prints,
its resume from a checkpoint (``EpisodeResume``) and its ``Global step N: {...}`` line.
"""

from __future__ import annotations

from datetime import datetime

from probes.logs.bar_lines import TqdmBar, bar_postfix
from probes.logs.lines import parse_pairs, quoted_pairs
from probes.logs.progress import EPISODE_BAR, episode_number
from probes.logs.scan_patterns import CONSUMED_RE, ROLLOUT_BATCH_RE
from probes.logs.scan_steps import StepScan
from probes.models import Frozen


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
            if not self.episode_ahead:
                self.episode_ahead = self._episode_count() == step + 1
