"""torchtitan's console: its per-step metrics line and its start line's total.

Policy: torchtitan (``torchtitan/components/metrics.py``, ``MetricsProcessor.log``) logs one
line per logged step through its logger (``[titan] <asctime> - root - INFO - ``, behind
torchrun's ``[rankN]:`` with ``--tee``), each part coloured (the ANSI codes are stripped
before this reads it) and parts two spaces apart:
``step: 10  loss:  7.9912  grad_norm:  1.2345  memory: 62.31GiB(78.77%)  tps: 6,543  ...``.
Versions differ in the parts after the step (``step_time`` for grad norm, ``loss_mean`` in the
observability logger, ``--`` for a metric missing), so every ``label: number`` part is read and
the canonical names are left to ``metric_names``; a pipeline-parallel rank's ``-1`` loss
(``PP_NO_LOSS``) is none. ``validate step: N`` (its validation line)
is no training step. Older trainers print the run's total on their start line
(``Training starts at step 1, with local batch size 8, ..., total steps 1000 (warmup 200)``);
newer ones print ``Training starts at step 1`` alone, the total on the line their
``Trainer.__init__`` ends with (``Trainer is initialized with local batch size 8, global
batch size 64, gradient accumulation steps 1, sequence length 8192, total steps 1000 (warmup
200)``, ``training.steps``; forks print tokens per step there instead of the batch sizes).
"""

from __future__ import annotations

import re

from probes.logs.lines import parse_number

__all__ = ["TITAN_FINISH", "TITAN_INIT", "TITAN_START", "parse_titan_step", "titan_total"]

_STEP_RE = re.compile(r"(?:^|[\s\]:>-])(?<!validate )step: {1,12}(\d{1,12})  (?=\S)")
"""``step: {step:2}`` then two spaces before the next part (a verl ``step:N - `` has none)."""
_PART_RE = re.compile(r"(?<!\S)([A-Za-z_][\w/()%.]{0,64}): {1,12}(\S{1,64})")
"""One ``label: value`` part (a value is right-aligned: ``loss:  7.9912``)."""
_TOTAL_RE = re.compile(
    r"(?:Training starts at step \d{1,12}, with|Trainer is initialized with) "
    r".{0,400}?\btotal steps (\d{1,12})\b")
PP_NO_LOSS = -1.0
"""The loss a pipeline-parallel rank without the last stage logs (``train.py``: ``loss = ...
if self.pp_has_last_stage else torch.tensor([-1.0])``): no loss. torchrun's default
``LOG_RANK=0`` shows only such a rank in a PP run (torchtitan warns 'Pipeline Parallel loss is
not visible'); with the last stage's rank logged too, both print each step."""
TITAN_START = "Training starts at step"
"""The trainer's start line (``Trainer.train``, every version): a second one in a log is the
run launched again into it."""
TITAN_INIT = "Trainer is initialized with"
"""The line a newer trainer's ``__init__`` ends with: the run's total (``titan_total``)."""
TITAN_FINISH = "Training completed"
"""The trainer's last line of a run trained to its steps (``Trainer.train``'s end)."""


def parse_titan_step(line: str) -> tuple[int, dict[str, float]] | None:
    """A torchtitan metrics line -> (step, its numeric parts by label); None for any other
    line, or one whose parts hold no number."""
    found = _STEP_RE.search(line)
    if found is None:
        return None
    values: dict[str, float] = {}
    for pair in _PART_RE.finditer(line, found.end()):
        number = parse_number(pair.group(2).replace(",", "").rstrip("%"))
        if number is not None:
            values[pair.group(1)] = number
    if values.get("loss") == PP_NO_LOSS:
        del values["loss"]
    if not values:
        return None
    return int(found.group(1)), values


def titan_total(line: str) -> int | None:
    """The ``total steps N`` of an older torchtitan start line or a newer one's
    ``Trainer is initialized with`` line, if ``line`` is one (N > 0)."""
    found = _TOTAL_RE.search(line)
    if found is None or int(found.group(1)) <= 0:
        return None
    return int(found.group(1))
