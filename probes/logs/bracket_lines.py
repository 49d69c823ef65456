"""A bracketed progress header, then the step's metrics one per indented line.

Two trainers print their console this way:

- MosaicML Composer's ``ConsoleLogger`` (``composer/loggers/console_logger.py``; every
  llm-foundry run): ``[batch=N/T]:`` (``max_duration`` in batches; ``[sample=..]``,
  ``[token=..]`` in samples or tokens) or ``[epoch=E][batch=b/L]:`` (in epochs: the batch in
  the epoch, of the dataloader's L), then ``\\n\\t Train <name>: <value>`` per metric, floats
  ``.4f``, ints plain (``format_log_data_value``), strings quoted. The trainer logs
  ``time/batch``, the batches done before this one, among them.
- AI2's OLMo (``olmo/train.py`` ``log_metrics_to_console``): ``[step=N/T]``,
  ``[step=N/T,epoch=E]`` or ``[step=N/T, eta=...]`` at the end of a logged line, then
  ``    <name>=<value>`` per metric (``1,234`` above 1000, ``str()`` below 1e-4).

Policy (as EasyR1's block, ``probes.logs.easyr1_lines``): a block is read only after its
header, one line after another; the first line that is not the next one or no metric line
(the next header, a log line, Composer's ``Eval`` lines) ends it, and only then is it the
step's point; a block still open where the text ends is no point yet. The step is the
header's N when its unit is steps or batches of the run, else ``time/batch`` + 1 (an
epoch's batch, a sample or token count is no step); the run's total is the header's T only
then, or for an epoch header the epochs of the printed ``max_duration: Nep`` (llm-foundry's
``log_config`` YAML, Composer's hparams) times the header's L. A value that is no number is
skipped; the block goes on. Composer prints every float
``.4f``, so a learning rate below 5e-5 reads ``0.0000``: that is no value (left out, never 0).
"""

from __future__ import annotations

import re
from datetime import datetime

from probes.logs.easyr1_lines import YamlStep

BRACKET_GATES = ("[batch=", "[step=", "[epoch=", "[sample=", "[token=")
"""The prefilter's needles for a header (no digit: the skeleton has none)."""
BLOCK_SHAPE = (
    rb"^(?:\t |    )(?:train )?[\w./@+\-() ]*(?:: |=)(?:-?[.,]*(?:e[-+])?|nan|-?inf)$"
)
"""A block's metric line as a prefilter skeleton (ASCII lower-cased, digits deleted):
Composer's tab and space, or OLMo's four spaces, an optional ``Train``, a name, and a number
(``0.3120`` is ``.``, ``1,234`` is ``,``, ``1e-05`` is ``e-``, ``11`` is empty)."""

_HEADER_RE = re.compile(
    r"\[(?:epoch=(\d{1,9})\]\[)?(batch|step|sample|token)=(\d{1,15})/(\d{1,15})"
    r"(?:[, ][^\[\]]{0,120})?\]:?\s*$")
_LINE_RE = re.compile(
    r"(?:\t |    )(?:Train )?([\w./@+\-()][\w./@+\-() ]{0,120}?)(?:: |=)(\S{1,64})$")
DURATION_GATE = "max_duration: "
"""llm-foundry's printed config line giving a run by epochs its total (``duration_epochs``)."""
_DURATION_RE = re.compile(r"\s{0,8}max_duration: ['\"]?(\d{1,6})ep['\"]?\s*$")
_RATE_KEYS = ("throughput/batches_per_sec",)
"""Composer's SpeedMonitor batches per second (its window's average): the step time."""


def bracket_header(body: str) -> tuple[int, int | None, bool, int | None] | None:
    """(the header's step, the run's total or None, whether the step must come from the
    block's ``time/batch``, an epoch header's batches an epoch) of a header line, else None."""
    found = _HEADER_RE.search(body)
    if found is None:
        return None
    epoch, unit, done, total = found.groups()
    if epoch is None and unit in ("batch", "step"):
        return int(done), int(total) or None, False, None
    per_epoch = int(total) if epoch is not None and unit == "batch" and int(total) else None
    return -1, None, True, per_epoch


def duration_epochs(body: str) -> int | None:
    """The epochs of a printed ``max_duration: Nep`` (llm-foundry's config, Composer's
    hparams), else None (a duration in batches, samples or tokens: the header says it)."""
    found = _DURATION_RE.match(body)
    return int(found.group(1)) if found is not None and int(found.group(1)) > 0 else None


class BracketStep(YamlStep):
    """One step's block after a bracketed header: ``step`` is -1 until ``time/batch`` gives
    it (``by_batch``); ``values`` are the metrics by their printed names."""

    __slots__ = ("at", "by_batch")
    fmt = "bracket"

    def __init__(self, step: int, line_no: int, last: int | None = None,
                 values: dict[str, float] | None = None, *, by_batch: bool = False,
                 at: datetime | None = None) -> None:
        super().__init__(step, line_no, last, None, values)
        self.by_batch, self.at = by_batch, at

    def read(self, body: str, line_no: int) -> bool:
        """Read ``body`` at ``line_no`` into the block; False when it ends the block."""
        if line_no != self.last + 1:
            return False
        found = _LINE_RE.match(body)
        if found is None:
            return False
        self.last = line_no
        key, text = found.groups()
        if text == "0.0000" and key.startswith("lr-"):
            return True  # Composer's .4f of a learning rate below 5e-5: not known, not 0
        try:
            number = float(text.replace(",", ""))
        except ValueError:
            return True
        self.values[key] = number
        if key == "time/batch" and self.by_batch and number >= 0:
            self.step = int(number) + 1
        elif key in _RATE_KEYS and number > 0:
            self.values["sec_per_step"] = 1.0 / number
        return True
