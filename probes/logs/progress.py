"""Training progress from tqdm redraws: which bar is the trainer's, and its trailing rate.

Policy: the training bar has no desc (Hugging Face) or a trainer's own desc and counts
iterations; tokenizer, packing, dataset and eval bars are never it, nor is a desc-less bar that
neither the banner's total nor a step dict vouches for when it runs faster than any optimizer
step (``MIN_STEP_SECONDS``: a script's own ``tqdm(examples)`` loop) or is first drawn after the
trainer's finish line (``MetricScan._training_bar``). The rate is a trailing
window that one checkpoint-save spike does not move, and a restarted bar starts its clock again.
On a whole-second clock too coarse for the last ``_RATE_WINDOW`` steps the window widens to the
last ``WIDE_WINDOW`` events: a fixed depth, so a pass over the end of a tail reads the same rate
as one over the whole tail (``probes.logs.recent``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from math import isfinite
from statistics import median

from probes.logs.bar_lines import TqdmBar, epoch_step_label, loss_desc
from probes.logs.lines import parse_number

TRAIN_DESCS = frozenset(
    {"", "Training Progress", "Training Batches Processed", "Training Step Progress", "Training",
     "Train", "Steps", "Running step", "Training steps"}
)
"""Training bars' descs. ``Training steps`` is NeMo-Aligner's SFT/DPO/SPIN bar (``tqdm(...,
initial=step, total=max_steps, desc="Training steps")``, its metrics in the postfix); its
``Validation steps`` bar counts batches and is none."""
_RATE_WINDOW = 10
_BAR_EVENTS_KEPT = 64
BAR_EVENTS_KEPT = _BAR_EVENTS_KEPT
"""(step, elapsed) events a track keeps: past it, the newest half (``BarTrack.see``)."""
TRAINING_RATES = ("s/it", "it/s", "?it/s")
"""How a training bar's rate field ends (iterations, never examples or bytes)."""
WIDE_WINDOW = _BAR_EVENTS_KEPT // 2
"""Events the widened window reads: never more than a track keeps after trimming."""
_CLOCK_FLOOR_S = 5.0
MIN_STEP_SECONDS = 0.01
"""No optimizer step runs faster (100 a second): a desc-less bar that does, advancing several
iterations a redraw, counts a script's items (a tokenizer loop at thousands a second)."""


class BarTrack:
    """Redraws of one (desc, total) bar: how often seen, the last one, (step, elapsed) events."""

    def __init__(self) -> None:
        self.count = 0
        self.last: TqdmBar | None = None
        self.events: list[tuple[int, float]] = []
        self.seen = 0
        """The ordinal of its last redraw among every training-kind redraw of the log."""
        self.first = 0
        """The ordinal of its first redraw, on ``seen``'s count (0: unknown, a carry made
        before it was kept)."""
        self.anchored = 0
        """HF step dicts numbered from this bar's count (the trainer's bar is the one they
        follow; a script's own desc-less loop, a tokenizer pass, has none)."""

    def counts_items(self) -> bool:
        """Whether it runs faster than any optimizer step (``MIN_STEP_SECONDS``): by tqdm's
        own rate at its last redraw, and advancing more than one iteration a redraw (the
        median over its recent events: a resumed HF bar's one jump to its global step is not
        that). Both read the same on a cold parse and a fold: the last redraw, and the last
        ``WIDE_WINDOW`` events, which each keeps."""
        per_it = sec_per_it(self.last.rate) if self.last is not None else None
        if per_it is None or per_it >= MIN_STEP_SECONDS:
            return False
        moves = [s1 - s0 for (s0, _), (s1, _) in pairwise(self.events[-WIDE_WINDOW:]) if s1 > s0]
        return not moves or median(moves) > 1

    def add(self, bar: TqdmBar) -> None:
        self.last = bar
        self.see(bar.current, bar.elapsed_s)

    def see(self, current: int, elapsed_s: float | None) -> None:
        """``add`` but for ``last``, which the caller sets (to the last redraw it saw)."""
        self.count += 1
        if elapsed_s is None:
            return
        events = self.events
        if events and current <= events[-1][0]:
            if current < events[-1][0]:
                events.clear()  # a new bar (restart): its elapsed clock starts again
            else:
                return  # a refresh of the same step keeps the first sighting
        events.append((current, elapsed_s))
        if len(events) > _BAR_EVENTS_KEPT:
            del events[: -_BAR_EVENTS_KEPT // 2]


    def extend_back(self, newest: list[tuple[int, float]], first: tuple[int, float] | None,
                    *, reached: bool) -> None:
        """``see`` of a run of redraws (but ``count``), given the events it appends walked back
        from its end (``newest``, newest first: back to a restart, or the newest
        ``WIDE_WINDOW``) and, when that walk ``reached`` the run's first event without either,
        that event, undecided (``first``; None: no event). At least the last ``WIDE_WINDOW``
        events ``see`` would keep are kept, all that ``trailing_rate`` reads."""
        if reached:
            before = self.events
            if first is not None and (not before or first[0] != before[-1][0]):
                if before and first[0] < before[-1][0]:
                    before = []  # a restart at the run's first event
                newest.append(first)
            newest.extend(reversed(before))
        newest.reverse()
        self.events = newest[-_BAR_EVENTS_KEPT:]


EPOCH_STEP_BAR = "E|S|Loss"
"""The track desc of every bar labelled ``E|S[|Loss: X]`` (torchtune's,
``bar_lines.epoch_step_label``): one bar a epoch, its label changing at every step, one track
per epoch length."""


LOSS_DESC_BAR = "Epoch E, Loss X"
"""The track desc of a run-long training bar whose desc carries the step's loss
(``bar_lines.loss_desc``: fsdp_qlora's ``Epoch 0, Loss 1.234, LR 2.00e-05``): one track, its
desc changing at every step."""


EPISODE_BAR = "Episode [k/N]"
"""The track desc of OpenRLHF's PPO bar, ``tqdm(range(len(prompts_dataloader)), desc=f"Episode
[{episode + 1}/{num_episodes}]")``: one bar a episode (``episode_progress``)."""
_EPISODE_RE = re.compile(r"^Episode \[(\d{1,6})/(\d{1,6})\]$")


def training_desc(desc: str) -> str | None:
    """The track desc of a training bar's (stripped) desc: itself if a trainer's own
    (``TRAIN_DESCS``), ``EPOCH_STEP_BAR`` for torchtune's ``E|S[|Loss: X]`` label,
    ``EPISODE_BAR`` for OpenRLHF's ``Episode [k/N]``, ``LOSS_DESC_BAR`` for fsdp_qlora's
    ``Epoch E, Loss X[, LR Y]``, else None."""
    if desc in TRAIN_DESCS:
        return desc
    if desc.startswith("Episode [") and _EPISODE_RE.match(desc) is not None:
        return EPISODE_BAR
    if desc.startswith("Epoch ") and loss_desc(desc) is not None:
        return LOSS_DESC_BAR
    return EPOCH_STEP_BAR if epoch_step_label(desc) is not None else None


def episode_number(desc: str) -> int | None:
    """k of OpenRLHF's ``Episode [k/N]`` bar desc (stripped), None for any other desc."""
    found = _EPISODE_RE.match(desc)
    return int(found.group(1)) if found is not None and int(found.group(1)) > 0 else None


def episode_progress(
    track: BarTrack,
    base: Callable[[int, int], tuple[int | None, int | None]] | None = None,
    *,
    ahead: bool = False,
) -> tuple[int, int, int, bool] | None:
    """(global step, run's total steps, bar counts a step, the last episode's bar is full) of
    OpenRLHF's ``Episode [k/N]`` bar at its last redraw; None until the bar has moved (what
    one count is is unknown).

    Up to 0.9.4 the bar counts rollout batches (one a step); from 0.9.5 its dataloader yields
    single prompts and it advances by the prompts a step consumed (``rollout_batch_size``;
    more under dynamic filtering). One step is the median move of its recent redraws; the
    episode's steps its total over that (a last, partial batch is a step too), the run's that
    times the N episodes (an estimate when a step's prompts vary: dynamic filtering redraws
    filtered ones; the caller takes the steps logged once the last episode's bar is full).
    The bar's total alone is never the run's (an example count).

    OpenRLHF 0.8.11 and 0.9.0 start each episode's bar at the run's next step
    (``initial=steps``, ppo_trainer.py ``fit``; 0.9.1 moved to consumed prompts) and
    ``update()`` it before the step's ``Global step N`` line, so the bar counts the run's steps
    plus one, no episode's: a bar past its total shows it, and ``ahead`` (a ``Global step N``
    line read with the bar at N + 1: ``MetricScan.episode_ahead``) tells the first episode's
    bar, 1/N on a fresh run, apart too (read as an in-episode count it was one step ahead).

    ``base(k, total)``: (steps before the count 0 of episode k's bar, steps a episode), where
    a resumed run's first bar counts only the batches left in its episode (before 0.8.1:
    ``history.EpisodeResume``); (None, None) when the log cannot place it: no progress."""
    last = track.last
    found = _EPISODE_RE.match(last.desc) if last is not None else None
    if last is None or found is None:
        return None
    unit = _step_unit(track.events, last)
    if unit is None:
        return None
    episode, episodes = int(found.group(1)), int(found.group(2))
    per_episode = -(-last.total // unit)
    if per_episode <= 0 or episodes <= 0:
        return None
    episode = min(episode, episodes)
    if unit == 1 and (ahead or last.current > last.total):  # 0.8.11-0.9.0: initial=steps
        steps = per_episode * episodes
        return last.current - 1, steps, 1, episode >= episodes and last.current > steps
    before = (episode - 1) * per_episode
    if base is not None and unit == 1:  # a batches bar (before 0.9.5): maybe a resumed one
        before_or_none, whole = base(episode, last.total)
        if before_or_none is None or whole is None:
            return None
        before, per_episode = before_or_none, whole
    done = before + last.current // unit
    return done, per_episode * episodes, unit, episode >= episodes and last.current >= last.total



def _step_unit(events: Sequence[tuple[int, float]], last: TqdmBar) -> int | None:
    """What one step moves an episode bar: the median move of its recent redraws (``events``,
    its (count, time) draws); None until it has moved."""
    if len(events) == 2 and last.current >= last.total > events[0][0]:
        return None  # the old bar's close() after the new one's first redraw: no move yet
    moves = [s1 - s0 for (s0, _), (s1, _) in pairwise(events[-WIDE_WINDOW:]) if s1 > s0]
    if not moves:
        return None
    return max(1, round(median(moves)))

def is_training_bar(bar: TqdmBar, nested: bool) -> bool:
    """Training bars have no desc (HF) or a trainer's own desc, and count iterations."""
    return is_training(bar.desc, bar.rate, nested)


def drawn_training_desc(desc: str, nested: bool) -> str | None:
    """``training_desc`` of a bar drawn ``nested`` (at a tqdm position below the first: an inner
    loop's, never a training bar) or not. OpenRLHF's ``Episode [k/N]`` bar is a training bar at
    any position: each episode's bar is made while the last one's is still alive (``pbar =
    tqdm(...)`` in the episode loop), so tqdm draws every other episode's at position 1."""
    found = training_desc(desc)
    return found if not nested or found == EPISODE_BAR else None


def is_training(desc: str, rate: str, nested: bool) -> bool:
    """``is_training_bar`` of a bar's (stripped) desc and rate fields."""
    if drawn_training_desc(desc, nested) is None:
        return False
    return not rate or rate.endswith(TRAINING_RATES)


def trailing_rate(events: Sequence[tuple[int, float]], window: int = _RATE_WINDOW) -> float | None:
    """Seconds per step over the last ``window`` steps, ignoring one pair far slower than typical.

    Pairs slower than 3x the median per-step time (a checkpoint save) are left out, then the
    rate is total time over total steps, which keeps the resolution of whole-second clocks.
    Saves that recur (two or more such pairs in the last :data:`WIDE_WINDOW` events: a save
    every few steps) are part of the run's pace, not a spike: the rate is then total time over
    total steps across those events, every pair kept, so an ETA counts the saves still to come.
    """
    recent = list(events)[-(window + 1) :]
    if len(recent) >= 2 and recent[-1][1] - recent[0][1] < _CLOCK_FLOOR_S:
        recent = list(events)[-WIDE_WINDOW:]  # sub-second steps on a whole-second clock: widen
    pairs = _without_jump(_pairs(recent))
    if not pairs:
        return None
    typical = median(dt / ds for ds, dt in pairs)
    kept = [(ds, dt) for ds, dt in pairs if typical == 0 or dt / ds <= 3 * typical]
    if len(kept) < len(pairs) and typical > 0:
        wide = _without_jump(_pairs(list(events)[-WIDE_WINDOW:]))
        if sum(1 for ds, dt in wide if dt / ds > 3 * typical) >= 2:  # a save cadence
            kept = wide
    steps = sum(ds for ds, _ in kept)
    seconds = sum(dt for _, dt in kept)
    return seconds / steps if steps and seconds > 0 else None


def _without_jump(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``pairs`` but a count jump: a pair moving over 10x the steps of the smallest move, at
    under a third of the median time a step. A resumed HF Trainer's bar jumps so from 0 to
    its saved step + 1 in one step's time (``ProgressCallback.on_step_end`` updates by
    ``global_step - current_step``); as pace it made the rate 301 steps in 6 s. A run whose
    redraws all cover many steps (sub-0.1 s steps) moves alike between them: none is left out."""
    if len(pairs) < 2:
        return pairs
    least = min(ds for ds, _ in pairs)
    typical = median(dt / ds for ds, dt in pairs)
    return [(ds, dt) for ds, dt in pairs if ds <= 10 * least or dt / ds >= typical / 3]


def _pairs(events: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(steps, seconds) between consecutive events that move forward."""
    return [(s1 - s0, t1 - t0) for (s0, t0), (s1, t1) in pairwise(events) if s1 > s0 and t1 >= t0]


def sec_per_it(rate: str) -> float | None:
    """tqdm's rate field (``2.35s/it`` or ``12.9it/s``) as seconds per iteration."""
    if rate.endswith("s/it"):
        return parse_number(rate[:-4])
    if rate.endswith("it/s"):
        per_second = parse_number(rate[:-4])
        return 1.0 / per_second if per_second else None
    return None


def iteration_seconds(values: Mapping[str, float]) -> float | None:
    """Megatron's ``elapsed time per iteration (ms)`` (or ``(s)``, older forks), or NeMo 2's
    ``train_step_timing in s``, in seconds."""
    for key, scale in (("elapsed time per iteration (ms)", 1e-3),
                       ("elapsed time per iteration (s)", 1.0),
                       ("train_step_timing in s", 1.0)):
        value = values.get(key)
        if value is not None and isfinite(value) and value >= 0:
            return value * scale
    return None


def iteration_clock(times: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(step, seconds per iteration averaged since the previous line) -> (step, elapsed)."""
    clock = [(times[0][0], 0.0)]
    for (previous, _), (step, per_iter) in pairwise(times):
        clock.append((step, clock[-1][1] + (step - previous) * per_iter))
    return clock


