"""A step line of ``name: number`` pairs separated by ``, `` or `` | ``, the step among them.

- MaxText (AI-Hypercomputer/maxtext ``MetricLogger.log_metrics``) ends each training step with
  ``completed step: 12, seconds: 1.150, TFLOP/s/device: 470.000, Tokens/s/device: 57000.000,
  total_weights: 65536, loss: 7.890`` (zero-based: the step as printed), and prints its
  config one ``Config param <key>: <value>`` line a key (``steps``: the run's total).
- nanotron (huggingface/nanotron ``trainer.py`` ``train_step_logs``) logs ``iteration: 10 / 1000
  | consumed_tokens: 1.31M | elapsed_time_per_iteration_ms: 1.23K | ... | lm_loss: 10.4 | lr:
  0.0003 | ... | grad_norm: 1.23`` (``human_format``: K, M, G suffixes), behind its logger's
  ``[INFO|DP=0|PP=0|TP=0|host]: `` and torchrun's ``[default0]:``.
- LLaMA-Factory v1 (hiyouga/LLaMA-Factory ``src/llamafactory/v1/utils/callbacks/
  logging_callback.py``) logs ``epoch: 0, step: 5, loss: 1.2345, grad_norm: 0.8765,
  learning_rate: 1e-05, total_steps: 916``: the total as a pair of its own.

Policy: general, not these trainers' alone: a line holding at least three ``name: number``
pairs, one of them the step (``step``, ``<word> step``, ``iteration``, ``iter``; ``N`` or ``N /
T``, T the run's total, else a ``total_steps`` pair's), is the step's point; a ``seconds`` pair
(MaxText's) or ``elapsed_time_per_iteration_ms`` (nanotron's) is the step's time. Fewer pairs,
or no step pair, is no step line (an epoch summary, a memory report). Being general, such a line
is the run's step only where nothing else is: a line another rank's launcher label starts
(``srun -l``'s ``1: ``, torchrun's ``[rank3]:``/``[default2]:``: :func:`other_rank`; rank 0's
are the run's, as a logged dict's) is not, nor one in a log whose steps another format already
reads (a worker's ``step: 5, loss: ...`` in a verl or HF log: ``MetricScan._late_step``).
"""

from __future__ import annotations

import re

PAIRS_GATES = ("step: ", "iteration: ", "iter: ", "step=")
"""What a step-pairs line holds (``name: number`` pairs, or ``EQ_GATE``'s ``name=number``)."""
MAXTEXT_STEPS = "Config param steps: "
"""MaxText's printed ``steps``: the run's total steps."""

_PAIR_RE = re.compile(
    r"(?:^|, |\| |\] |\s)([A-Za-z][\w/.%()\-]{0,60}(?: [A-Za-z][\w/.%()\-]{0,40}){0,2}): "
    r"(-?\d{1,15}(?:\.\d{1,12})?(?:e[-+]?\d{1,3})?[KMGT]?(?: / \d{1,15})?|nan|-?inf)"
    r"(?=,| \||\s*$)")
_OTHER_RANK_RE = re.compile(r"\s{0,6}(?:[1-9]\d{0,5}: |\[(?:rank|default)[1-9]\d{0,5}\]:)")
_STEP_NAMES = ("step", "completed step", "train step", "training step", "iteration", "iter")
_TOTAL_NAMES = ("total_steps", "total steps")
"""A pair giving the run's total beside the step (LLaMA-Factory v1's ``total_steps``)."""
_TIMES = {"seconds": 1.0, "elapsed_time_per_iteration_ms": 0.001}
"""Step-time pairs: the factor to seconds."""
_SCALE = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_step_pairs(body: str) -> tuple[int, int | None, dict[str, float]] | None:
    """(the step, the run's total if the step pair gives one, the other pairs by name) of a
    step-pairs line, else None."""
    pairs = dict(_PAIR_RE.findall(body))
    if len(pairs) < 3:
        return None
    shown = next((pairs.pop(name) for name in _STEP_NAMES if name in pairs), None)
    if shown is None:
        return None
    done, _, total = shown.partition(" / ")
    if not done.isdigit():
        return None
    given = next((pairs.pop(name) for name in _TOTAL_NAMES if name in pairs), "")
    if not total and given.isdigit() and int(given) > 0:
        total = given
    values: dict[str, float] = {}
    for name, text in pairs.items():
        if " / " in text:
            continue
        scale = _SCALE.get(text[-1:], 1.0)
        number = float(text[:-1] if scale != 1.0 else text) * scale
        if name in _TIMES:
            values["sec_per_step"] = number * _TIMES[name]
        else:
            values[name] = number
    return int(done), int(total) if total else None, values


_EQ_PAIR_RE = re.compile(
    r"(?:^|[\s,\]])([A-Za-z][\w/.\-]{0,60})="
    r"(-?\d{1,15}(?:\.\d{1,12})?(?:e[-+]?\d{1,3})?(?:/\d{1,15})?|nan|-?inf)(?=[,\s]|$)")
EQ_GATE = PAIRS_GATES[-1]
_EQ_STEP_NAMES = ("step", "global_step", "iteration", "iter")


def parse_eq_pairs(body: str) -> tuple[int, int | None, dict[str, float]] | None:
    """:func:`parse_step_pairs` of a line of ``name=number`` pairs (InternEvo's ``tflops=...
    step=320 loss=1.21 ... lr=2e-05 ...``, a plain loop's ``step=320/916 loss=1.21 lr=2e-05``):
    at least three, one the step (``N`` or ``N/T``), one a loss (``=`` pairs are everywhere
    else too: a data or schedule line names no loss)."""
    pairs = dict(_EQ_PAIR_RE.findall(body))
    if len(pairs) < 3 or not any("loss" in name for name in pairs):
        return None
    shown = next((pairs.pop(name) for name in _EQ_STEP_NAMES if name in pairs), None)
    if shown is None:
        return None
    done, _, total = shown.partition("/")
    if not done.isdigit():
        return None
    values = {name: float(text) for name, text in pairs.items() if "/" not in text}
    return int(done), int(total) if total.isdigit() and int(total) > 0 else None, values


def other_rank(body: str) -> bool:
    """Whether a launcher's label for a rank other than 0 starts ``body``."""
    return _OTHER_RANK_RE.match(body) is not None


def maxtext_total(body: str) -> int | None:
    """The total of MaxText's ``Config param steps: N`` line (N > 0), else None."""
    text = body.partition(MAXTEXT_STEPS)[2].strip()
    return int(text) if text.isdigit() and 0 < int(text) < 10**12 else None
