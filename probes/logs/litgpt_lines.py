"""LitGPT's console line: an iteration's optimizer step, running loss and time.

``litgpt/finetune/{lora,adapter,full}.py`` and ``litgpt/pretrain.py`` (Lightning-AI/litgpt,
``fit``) print every ``train.log_interval`` iterations (micro-batches)::

    Epoch 1 | iter 4 step 1 | loss train: 1.950, val: n/a | iter time: 731.12 ms (step)

``step`` counts optimizer steps (the iteration that stepped is marked `` (step)``), ``loss
train`` is the running mean over the accumulation window, ``iter time`` one micro-batch's;
pretraining appends ``remaining time: H:MM:SS``. No stamp, no bar: a step takes ``iter /
step`` iterations, so ``sec_per_step`` is the iteration's time that many times (the report
averages it over its window). Once a `` (step)`` line is read, only those are points: the lines
between them are the next step's micro-batches, printed with the step before it (their
``iter / step`` is no accumulation count, their loss a partial window); before one, every line
is (a log_interval that never lands on a step still reads).
"""

from __future__ import annotations

import re
from contextlib import suppress

LITGPT_GATE = " | iter "
"""What every LitGPT step line holds (and the prefilter's needle for it)."""

_LINE_RE = re.compile(
    r"(?:^|\s)Epoch \d{1,9} \| iter (\d{1,12}) step (\d{1,12}) \| loss train: "
    r"([-+\w.]{1,32}), val: ([-+\w./]{1,32}) \| iter time: (\d{1,9}(?:\.\d{1,6})?) ms")


def parse_litgpt(body: str) -> tuple[int, dict[str, float], bool] | None:
    """(the optimizer step, the line's metrics by LitGPT's names, whether it is the step's own
    `` (step)`` line) of a LitGPT step line."""
    found = _LINE_RE.search(body)
    if found is None:
        return None
    iteration, step, loss, val, millis = found.groups()
    try:
        values = {"loss": float(loss)}
    except ValueError:
        return None
    if step != "0":
        values["sec_per_step"] = float(millis) / 1000.0 * int(iteration) / int(step)
    with suppress(ValueError):
        values["val_loss"] = float(val)
    return int(step), values, body[found.end():].startswith(" (step)")
