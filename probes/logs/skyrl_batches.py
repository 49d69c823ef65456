"""SkyRL's training bar under dynamic sampling: a count of batches, not of global steps.

SkyRL's trainer (``skyrl/train/trainer.py``; ``skyrl_train`` v0.1 to v0.4 the same) draws
``tqdm(total=total_training_steps, initial=global_step, desc="Training Batches Processed")``
and updates it once a step, after the step's ``Step N:`` dict and ``global_step_N`` save. With
``trainer.algorithm.dynamic_sampling.type=filter`` (DAPO) a batch whose kept prompts fall short
is logged by ``handle_filter_sampling`` (``Resample batch K, continue sampling...``), and the
trainer then calls ``pbar.update(1)`` and goes on to the next batch without a step ("update
progress bar for current batch (but not global step)"). So after R such batches the bar reads
``global_step + R``: its count, read as the step, put a run at global step 45 at step 60, and
its newest checkpoint (``global_step_45``) 15 steps behind it.

Policy: the bar's lead (``lag``) grows by one at each redraw after a resample line; an anchor
sets it exactly: the global step a ``Step N:`` header or a ``saved checkpoint for
global_step_N`` line names is the step of the bar's next redraw (both are printed before the
step's ``pbar.update``). Before the first anchor of a tail cut from a longer log the lag is
counted from 0; the steps placed by the bar since (the wandb logger's reward lines, which
carry no step) move down by what the anchor corrects. Only the sync trainer's bar is read so:
the fully-async trainer's ``Training Step Progress`` counts steps (and updates before its
save).

verl's DAPO recipe (``recipe/dapo/dapo_ray_trainer.py``, v0.3-v0.5) does the same with its
``Training Progress`` bar: a batch that leaves too few kept prompts prints
``num_gen_batches=K. Keep generating...`` and ``progress_bar.update(1)``s with no step. verl
prints a ``step:N`` line every step, before the update, so once such a line is read the bar
counts for no more than the last step line. So does OpenRLHF's Episode bar with
``--algo.dynamic_filtering_enable`` (``ppo_trainer.py``: ``pbar.update(prompts_consumed)``,
more than one batch a step when too few groups pass), its status's
``dynamic_filtering_pass_rate`` the sign.
"""

from __future__ import annotations

import re
from typing import NamedTuple

BATCHES_BAR = "Training Batches Processed"
"""The sync trainer's bar (``probes.logs.scan_patterns.SKYRL_BARS`` holds both SkyRL bars)."""
RESAMPLE_GATE = "continue sampling"
"""``handle_filter_sampling``'s ``Resample batch K, continue sampling...`` (a marker needle)."""
REGENERATE_GATE = "Keep generating"
"""verl's DAPO recipe's ``num_gen_batches=K. Keep generating...`` (a marker needle)."""
VERL_BAR = "Training Progress"
_SAVED_RE = re.compile(r"saved checkpoint for global_step_(\d{1,12})")
"""``save_checkpoints``' ``Successfully saved checkpoint for global_step_N to: <folder>``."""
PLACED_MAX = 64
"""Steps placed by the bar since the last anchor kept to move (a run with no save and no
``Step N:`` dict places all its steps so; an anchor moves the newest)."""


class SkyrlBatches(NamedTuple):
    """The batches bar's lead over the global step, and what the next redraw settles."""

    lag: int = 0
    anchor: int | None = None
    """The global step a header or save line named, the step of the bar's next redraw."""
    resampled: bool = False
    """A resample line since the last redraw: that redraw trained nothing."""
    placed: tuple[int, ...] = ()
    """Steps placed by the bar since the last anchor (at most ``PLACED_MAX``, oldest first)."""
    bar: int = -1
    """The count of the bar's last redraw: one below it is a new run's bar (``initial`` its
    resumed step: no lead yet)."""
    seen: bool = False
    """A resample line was read (a skim's too): the bar may lead the step."""
    anchored: bool = False
    """An anchor set the lead at a redraw of this pass: from there on the lead is exact."""
    regenerated: bool = False
    """verl's DAPO recipe generated a batch again (a skim's too), or OpenRLHF's status
    carried ``dynamic_filtering_pass_rate``: its bar (``Training Progress``, ``Episode``)
    leads its step lines (``step:N``, ``Global step N``), which give the step."""

    @property
    def unsettled(self) -> bool:
        """The bar may lead by resampled batches no anchor of this pass has measured: a pass
        begun mid-log cannot know the lead (``probes.logs.recent`` reads deeper)."""
        return self.seen and not self.anchored


def is_resample(body: str) -> bool:
    """Whether ``body`` is ``handle_filter_sampling``'s resample line."""
    return RESAMPLE_GATE in body and "Resample batch" in body


def is_regenerate(body: str) -> bool:
    """Whether ``body`` is verl's DAPO recipe's ``num_gen_batches=K. Keep generating...``."""
    return REGENERATE_GATE in body and "num_gen_batches=" in body


def saved_step(body: str) -> int | None:
    """The global step of SkyRL's checkpoint save line, else None."""
    found = _SAVED_RE.search(body) if "global_step_" in body else None
    return int(found.group(1)) if found is not None else None


def at_redraw(state: SkyrlBatches, current: int) -> tuple[SkyrlBatches, int, int]:
    """A redraw of the batches bar at ``current``: the state after it, the global step it
    stands for, and how far the steps in ``state.placed`` move down (0: they stay)."""
    if current < state.bar:  # a new run: its bar starts at the step it resumed from
        state = SkyrlBatches(anchor=state.anchor, resampled=state.resampled, seen=state.seen,
                             anchored=state.anchored)
    lag = state.lag + (1 if state.resampled else 0)
    if state.anchor is None:
        return state._replace(lag=lag, resampled=False, bar=current), current - lag, 0
    anchored = max(0, current - state.anchor)
    after = state._replace(lag=anchored, anchor=None, resampled=False, placed=(), bar=current,
                           anchored=True)
    return after, current - anchored, anchored - lag


def with_placed(state: SkyrlBatches, step: int) -> SkyrlBatches:
    """``state`` with ``step`` placed by the bar."""
    return state._replace(placed=(*state.placed, step)[-PLACED_MAX:])
