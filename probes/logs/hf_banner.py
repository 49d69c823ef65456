"""HF Trainer's training banner and logging fields (``HfBanner``), and the step an HF dict's
printed ``epoch`` gives by them (``hf_epoch_step``).

Policy: pure functions of what the log printed, so the cold pass and the bot's fold number
every dict alike; a float's printed precision (``printed_quantum``) bounds how far an epoch is
trusted.
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil, floor, isfinite, log10

from probes.models import Frozen


class HfBanner(Frozen):
    """HF Trainer's training banner and the ``TrainingArguments`` logging fields read so far:
    what gives the step of an HF dict printed with no training bar.

    HF's per-step dicts carry no step; the training bar's count gives it. With
    ``disable_tqdm=True`` there is no bar (``PrinterCallback`` prints only the dicts), and
    numbering the dicts 1, 2, 3, ... makes every step ``logging_steps`` times too small. What
    the log gives instead, in order of trust:

    - the dict's ``epoch``: the Trainer logs ``epoch + (batch + 1) / batches_in_epoch``, so
      ``epoch x optimizer steps per epoch`` is the step (within one step; transformers 5 prints
      floats to 4 significant digits, which bounds its precision: ``hf_epoch_step``). Steps
      per epoch come from the training banner: transformers 5's ``Num update steps per
      epoch``; else ``Total optimization steps / Num Epochs``, right for a run by whole epochs,
      or ``ceil(Num examples / Total train batch size)``, right for a run by ``max_steps`` (its
      ``Num Epochs`` is rounded up) or on a dataset of no length (``Num Epochs`` is
      ``sys.maxsize``), whichever the banner's numbers are consistent with
      (``steps_per_epoch``). A step near a multiple of ``logging_steps`` (if printed) is
      snapped to it.
    - no banner, but ``logging_steps`` from a printed ``TrainingArguments``: a ``Saving model
      checkpoint to .../checkpoint-N`` line anchors the dicts about it on the logging grid
      (``MetricScan._on_hf_save``); else the n-th dict of the log is step ``n x
      logging_steps`` (``1`` first under ``logging_first_step``); only the whole log numbers
      dicts so (``MetricScan.close``), as before.
    - neither: 1, 2, 3, ... as before.

    A tail cut from a longer log (the sweep reads the last 1 MiB) holds the banner and the
    arguments only if the run printed them late: they are read from the log's head
    (``MetricScan.seed_head``), and dicts it still cannot place are counted from the tail's
    first line, which is no step of the run: the summary says so (``steps_unanchored``).

    Each is a pure function of the banner state read so far, so the cold pass and the bot's
    fold (which carries this model) number every dict alike.
    """

    examples_seen: int | None = None
    """The last ``Num examples`` line (a training banner's or an eval banner's)."""
    epochs: int | None = None
    """``Num Epochs`` of the last training banner (the line that opens it)."""
    examples: int | None = None
    """``Num examples`` of that banner (the line just before its ``Num Epochs``)."""
    epoch_steps: int | None = None
    """``Num update steps per epoch`` (transformers >= 5)."""
    batch: int | None = None
    """``Total train batch size (w. parallel, distributed & accumulation)``."""
    logging_steps: float | None = None
    logging_first: bool = False
    logging_by_steps: bool = True
    """``logging_strategy`` is ``steps`` (HF's default): dicts come every ``logging_steps``."""

    def with_logging(self, name: str, raw: str) -> HfBanner:
        """This banner with one logging field as printed (``logging_steps=10``, ...)."""
        value = raw.strip().lower()
        if name == "logging_steps":
            try:
                every = float(value)
            except ValueError:
                return self
            if not isfinite(every) or every <= 0:
                return self
            return self.model_copy(update={"logging_steps": every})
        if name == "logging_first_step":
            if value in ("true", "false"):
                return self.model_copy(update={"logging_first": value == "true"})
            return self
        if value.endswith(("steps", "epoch", "no")):
            return self.model_copy(update={"logging_by_steps": value.endswith("steps")})
        return self

    def every(self, total: int | None) -> int | None:
        """Optimizer steps between two logged dicts, if the log says (a ``logging_steps``
        below 1 is a fraction of the total steps, as ``TrainerState.compute_steps`` takes it)."""
        steps = self.logging_steps
        if steps is None or not self.logging_by_steps:
            return None
        if steps < 1:
            return ceil(total * steps) if total else None
        return int(steps) if steps.is_integer() and steps < 1e12 else None

    def steps_per_epoch(self, total: int | None) -> float | None:
        """Optimizer steps per epoch by this banner and ``total`` (``Total optimization
        steps``), None if it does not say (see the class policy)."""
        if self.epoch_steps:
            return float(self.epoch_steps)
        epochs, examples, batch = self.epochs, self.examples, self.batch
        by_batch = ceil(examples / batch) if examples and batch else None
        if not epochs or not total:
            return float(by_batch) if by_batch else None
        by_total = total / epochs
        if by_batch is None or (by_total >= 1 and abs(by_total - by_batch) <= 1):
            return by_total if by_total >= 1 else None
        if epochs > total or (epochs - 1) * by_batch < total <= epochs * by_batch:
            return float(by_batch)  # a run by max_steps, or a dataset of no length
        return by_total if by_total >= 1 else None


def hf_epoch_step(banner: HfBanner, total: int | None, epoch: float | None) -> int | None:
    """The optimizer step of a dict logged at ``epoch``, by the banner; None if it cannot say."""
    return epoch_step(banner.steps_per_epoch(total), banner.every(total), epoch)


def epoch_step(per: float | None, every: int | None, epoch: float | None) -> int | None:
    """:func:`hf_epoch_step` by the banner's ``steps_per_epoch`` and ``every`` (a scan keeps
    them while its banner stands: ``ScanCore.hf_grid``)."""
    if epoch is None or per is None or not isfinite(epoch) or epoch <= 0:
        return None
    exact = epoch * per
    if exact >= 1e15:
        return None
    step = max(1, round(exact))
    if every is not None and every > 1:
        near = round(exact / every) * every
        if near >= every and abs(near - exact) <= 1 + per * printed_quantum(epoch) / 2:
            step = near
    return step


def significant_quantum(value: float) -> float:
    """The place of ``value``'s 4th significant digit (``f"{value:.4g}"``'s last: transformers'
    ``ProgressCallback`` and ``PrinterCallback`` print floats so), at most its printed one."""
    magnitude = abs(value)
    if magnitude == 0 or not isfinite(magnitude):
        return 0.0
    return min(10.0 ** (floor(log10(magnitude)) - 3), printed_quantum(value))


@lru_cache(maxsize=256)
def printed_quantum(value: float) -> float:
    """The last printed digit's place of ``value`` (``'1.084'`` -> 0.001): its shortest repr
    is what was printed, as far as a float keeps it; 0.0 for nan and the infinities. Read off
    the repr's digits, not through ``Decimal`` (a dict's epoch asks this two or three times:
    a bot's first read of a 1 MiB bar-less tail asked it ~24,000 times), and remembered for
    the last few values asked."""
    if not isfinite(value):
        return 0.0
    mantissa, _, exponent = repr(value).partition("e")
    places = len(mantissa.partition(".")[2])
    return 10.0 ** ((int(exponent) if exponent else 0) - places)

