"""Recognisers for tqdm progress bars in trainer logs: pure, stateless, bounded in cost.

Policy: as :mod:`probes.logs.lines` (every function takes one already-split line, or the lines
of a log, and returns ``None`` or an empty reading when it is not its kind; none raises;
regexes are precompiled and length-capped, so a pathological line costs linear time). These
read the bars trainers redraw on ``\\r``: the training bar's count and total, its elapsed time
and rate (HF Trainer, TRL, accelerate and diffusers scripts), the postfix values a loop sets
(``set_postfix``), a PyTorch Lightning or NeMo bar's step status, torchtune's ``E|S|Loss``
label, and what a redraw with no newline has glued after it (a dict, a rank's traceback).
:func:`own_bars` reads hundreds of redraws in a few regex passes (by digit shape).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import call, contains, itemgetter
from typing import NamedTuple, cast

from probes.logs.lines import interval_seconds, parse_number

_TQDM_RE = re.compile(
    r"\s*(?:(?P<desc>\d{1,6}\|\d{1,12}(?:\|[^|\r]{0,200}?)?|[^|\r]{0,200}?):\s*)?"
    r"(?P<pct>\d{1,3})%\|[^|]{0,200}\|\s*"
    r"(?P<cur>\d{1,12})/(?P<tot>\d{1,12})\s*\[(?P<elapsed>[\d:]{1,16}|[\dd, :]{1,24})"
    r"<(?P<remain>[^,\]]{0,24})(?:,\s*(?P<rate>[^,\]]{0,40})(?:,(?P<post>[^\]]{0,500}))?)?\]"
)
"""A tqdm redraw. Its rate ends at the first comma: what follows is ``set_postfix``'s text
(accelerate and diffusers loops print ``1.00s/it, lr=0.0001, step_loss=0.0612``), which is
no part of the rate (the bar was refused as no training bar, or not read at all)."""
_S = r"[^\S\n]"
_TQDM_LINE = (
    # _TQDM_RE at the start of a line of "\n"-joined lines, never crossing a "\n" (which no
    # split line holds, so each line's match is _TQDM_RE's).
    rf"{_S}*(?:(\d{{1,6}}\|\d{{1,12}}(?:\|[^|\r\n]{{0,200}}?)?|[^|\r\n]{{0,200}}?):{_S}*)?"
    rf"\d{{1,3}}%\|[^|\n]{{0,200}}\|{_S}*"
    rf"(\d{{1,12}})/(\d{{1,12}}){_S}*\[([\d:]{{1,16}}|[\dd, :]{{1,24}})"
    rf"<[^,\]\n]{{0,24}}(?:,{_S}*([^,\]\n]{{0,40}})(?:,[^\]\n]{{0,500}})?)?\]"
)
# An optional group, so every line yields one match (empty groups: not a bar).
_TQDM_LINES_RE = re.compile(rf"^(?:{_TQDM_LINE})?.*$", re.MULTILINE)
_OWN_BAR_LINES_RE = re.compile(
    # ... and only on a line led by neither "(" (a Ray prefix's), "{" nor a quote after its
    # blanks. Those are taken whole (possessive): the desc may hold blanks too, so one it
    # could start with cannot help a match the desc without them missed.
    rf"^(?:(?!\(){_S}*+(?!['\"{{]){_TQDM_LINE.removeprefix(_S + '*')})?.*$", re.MULTILINE)
_NO_BAR = ("", "", "", "", "")
BAR_SHAPE = rb"^(?>[^\n]*?%\|)[^|\n]*+\|[^/\n]*+/[^\[\n]*+\[[^<\n]*+<[^\]\n]*+\]"
"""What a line that may hold a bar shows in a prefilter's skeleton (``probes.logs.prefilter``:
digits deleted; a multi-line regex over ``\\n``-joined lines): ``%|``, then ``|``, ``/``,
``[``, ``<`` and ``]`` in that order. Every reader of a bar (``_TQDM_RE``, its line forms,
``_LIGHTNING_POSTFIX_RE``) needs that much, so a line with ``%|`` but not this shape is no bar
(a job printing ``x%|`` a million times): a prefilter keeping only this shape keeps every bar.
Each character is found first after the one before (possessive), from the line's first
``%|`` (atomic): one pass along the line, however many ``%|`` it holds."""


class TqdmBar(NamedTuple):
    """One tqdm redraw: ``desc: pct%|bar| cur/tot [elapsed<remain, rate]``."""

    desc: str
    current: int
    total: int
    elapsed_s: float | None
    rate: str


_EPOCH_STEP_LABEL_RE = re.compile(
    r"\s{0,8}(\d{1,6})\|(\d{1,12})(?:\|Loss: ([-+]?(?:\d{1,32}(?:\.\d{0,32})?(?:[eE][-+]?\d{1,4})?"
    r"|nan|inf)))?\s{0,8}")


class EpochStepLabel(NamedTuple):
    """torchtune's bar label: ``{epoch}|{global_step}`` before the epoch's first step, then
    ``{curr_epoch + 1}|{global_step}|Loss: {loss}`` after each optimizer step."""

    epoch: int
    step: int
    loss: float | None


_NUMBER = r"[-+]?(?:\d{1,32}(?:\.\d{0,32})?(?:[eE][-+]?\d{1,4})?|nan|inf)"
_LOSS_DESC_RE = re.compile(rf"Epoch \d{{1,6}}, Loss ({_NUMBER})(?:, LR ({_NUMBER}))?")


def loss_desc(desc: str) -> dict[str, float] | None:
    """The loss (and learning rate) a run-long training bar's desc carries, AnswerDotAI
    fsdp_qlora's ``f"Epoch {epoch}, Loss {log_loss:.3f}, LR {log_lr:.2e}"`` (its LR part
    left out when there is no scheduler), set after each optimizer step; else None. The bar
    counts the run's optimizer steps."""
    if ", Loss " not in desc:
        return None
    found = _LOSS_DESC_RE.fullmatch(desc)
    if found is None:
        return None
    values = {"loss": float(found.group(1))}
    if found.group(2) is not None:
        values["learning_rate"] = float(found.group(2))
    return values


def epoch_step_label(desc: str) -> EpochStepLabel | None:
    """A bar label of torchtune's ``E|S[|Loss: X]`` shape (its finetune recipes'
    ``pbar.set_description(f"{curr_epoch + 1}|{self.global_step}|Loss: {loss_to_log}")``),
    else None: the bar counts the epoch's steps, the label the run's global step."""
    if "|" not in desc:
        return None
    found = _EPOCH_STEP_LABEL_RE.fullmatch(desc)
    if found is None:
        return None
    loss = found.group(3)
    return EpochStepLabel(int(found.group(1)), int(found.group(2)),
                          None if loss is None else float(loss))


def tqdm_groups(lines: Sequence[str]) -> list[tuple[str, str, str, str, str]] | None:
    """``(desc, current, total, elapsed, rate)`` of ``parse_tqdm``'s match of each line, read
    by one regex pass in C (``current`` empty: not a bar; ``desc``/``rate`` unstripped), or
    ``None`` if the lines cannot be joined on ``\\n`` (one holds it: never a split line)."""
    if not lines:
        return []
    joined = "\n".join(lines)
    found = _TQDM_LINES_RE.findall(joined)
    return found if len(found) == len(lines) else None


def own_bars(lines: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
    """``tqdm_groups`` of each line that is its own body (``strip_ray_prefix`` leaves it
    whole) led by neither ``{`` nor a quote, and holds ``%|``; every other line, and one
    holding a ``\\n``, reads as no bar.

    The regex runs once per digit shape (the line with each ASCII digit made ``0``): none of
    its parts tells one ASCII digit from another (each class holds all ten or none, no
    literal is one), so lines of one shape match alike, at the same places, and each line's
    groups are sliced where its shape's first line had them. A trainer redraws a bar with new
    numbers of the same widths: a few shapes for hundreds of lines."""
    found = [_NO_BAR] * len(lines)
    marked = list(compress(range(len(lines)), map(contains, lines, repeat("%|"))))
    if not marked:
        return found
    picked = [lines[at] for at in marked]
    shapes = ("\n".join(picked).encode("utf-8", "surrogatepass").translate(_ZERO_DIGITS)
              .split(b"\n"))
    if len(shapes) != len(marked):
        return found  # a line holds a "\n": never a split line
    first = dict(zip(reversed(shapes), reversed(picked), strict=True))  # each shape's first
    readers = {shape: _bar_reader(line) for shape, line in first.items()}
    deque(map(found.__setitem__, marked, map(call, map(readers.__getitem__, shapes), picked)),
          maxlen=0)  # each line's groups, in C
    return found


def _bar_reader(line: str) -> _BarReader:
    """What reads ``own_bars``' groups from a line of ``line``'s digit shape: the five
    slices where they lie in ``line`` (an unmatched group's empty), or five empty slices
    for no bar: no count, or a ``[repeated ...]`` tail (a Ray line's, cut)."""
    match = _OWN_BAR_LINES_RE.match(line)
    if match is None or match.start(2) < 0 or (line[-1:] == "]" and "repeated" in line):
        return _NOT_A_BAR
    return cast(_BarReader, itemgetter(*(slice(*match.span(group)) if match.start(group) >= 0
                                         else _EMPTY for group in range(1, 6))))


_BarReader = Callable[[str], tuple[str, str, str, str, str]]
_EMPTY = slice(0, 0)
_NOT_A_BAR = cast(_BarReader, itemgetter(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY))
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
"""A digit shape's table: UTF-8 is one byte per ASCII digit, so shapes are equal exactly when
the lines' digit shapes are."""


def glued_dict(line: str) -> str | None:
    """The one-line dict printed on a tqdm redraw's line, right after its ``]``, or None.

    A ``print(logs)`` (HF's ``PrinterCallback``, a script's own) while a bar is drawn in a
    file: the bar's redraw ends in no newline, so ``" 10%|█  | 10/100 [00:05<00:45,
    2.00it/s]{'loss': 1.2, ...}"`` is one line, the dict after the bar's end."""
    if "}" not in line or "%|" not in line:
        return None
    bar = _TQDM_RE.match(line)
    if bar is None:
        return None
    rest = line[bar.end():].strip()
    return rest if rest[:1] == "{" and rest[-1:] == "}" else None


def after_bar(line: str) -> str | None:
    """What a tqdm redraw's line holds after the bar's ``]``, or None (no bar opens the line,
    or nothing follows it). The redraw ends in no newline, so the next thing written to the
    stream lands on its line: a print, or a rank's ``[rank1]: Traceback ...`` when the
    process dies mid-step. A redraw glued to another redraw is skipped as well."""
    rest = line
    for _ in range(4):
        if "%|" not in rest:
            break
        bar = _TQDM_RE.match(rest)
        if bar is None:
            break
        rest = rest[bar.end():]
    return rest if rest is not line and rest.strip() else None


_POSTFIX_PAIR_RE = re.compile(r"^([A-Za-z_][\w/.\-]{0,63})=([^,\s]{1,40})$")


def bar_postfix(line: str) -> dict[str, float] | None:
    """The numeric ``key=value`` pairs of a tqdm redraw's ``set_postfix`` text (``[00:10<01:00,
    95.00s/it, policy_loss=0.0185, reward=0.47]``), None if it is no bar or has none."""
    bar = _TQDM_RE.match(line) if "%|" in line else None
    post = bar.group("post") if bar is not None else None
    if not post:
        return None
    values: dict[str, float] = {}
    for part in post.split(","):
        pair = _POSTFIX_PAIR_RE.match(part.strip())
        number = parse_number(pair.group(2)) if pair is not None else None
        if pair is not None and number is not None:
            values[pair.group(1)] = number
    return values or None


_LIGHTNING_POSTFIX_RE = re.compile(
    r"%\|[^|\n]{0,200}\|\s*(\d{1,12})/\d{1,12}\s*\[[^\]<\n]{0,24}<[^,\]\n]{0,24},"
    r"([^\]\n]{1,800})\]")
_FIRST_EPOCH_RE = re.compile(r"\s{0,8}Epoch 0\b")


_LIGHTNING_EPOCH_RE = re.compile(r"Epoch (\d{1,6})")
_LIGHTNING_LOSS_KEYS = ("train_loss", "train_loss_step")
"""The names a LightningModule's step loss takes in the bar (``self.log("train_loss", ...,
prog_bar=True)``; ``on_step`` and ``on_epoch`` both true add ``_step`` / ``_epoch``), read as
its ``loss`` when the bar shows no ``loss`` itself."""


def may_be_lightning(line: str) -> bool:
    """Whether a bar line may hold a Lightning bar's step status (:func:`lightning_status`):
    NeMo's ``global_step``, or a plain Lightning run's ``Epoch N`` bar; or another training
    bar's ``set_postfix`` loss (:func:`postfix_loss`), or OpenRLHF's ``Train epoch`` bar (its
    epochs: :func:`openrlhf_epoch`)."""
    return ("global_step=" in line or line.lstrip().startswith("Epoch ") or "loss=" in line
            or OPENRLHF_EPOCHS_BAR in line)


POSTFIX_LOSS_KEYS = ("loss", "step_loss", "train_loss", "avg_loss", "gpt_loss")
"""The names a script's training bar gives its step loss in ``set_postfix`` (accelerate and
diffusers scripts' ``progress_bar.set_postfix(**logs)`` with ``step_loss``, or ``loss=``;
OpenRLHF's SFT trainer's ``gpt_loss``)."""

OPENRLHF_EPOCHS_BAR = "Train epoch"
"""The desc of OpenRLHF's SFT, DPO and reward-model trainers' bar over the run's epochs
(``tqdm(range(start_epoch, self.epochs), desc="Train epoch")``): its total is the epochs."""
_OPENRLHF_STEP_BAR_RE = re.compile(r"Train step of epoch (\d{1,6})")


def openrlhf_epoch(desc: str) -> int | None:
    """The epoch (from 0) of OpenRLHF's SFT/DPO/RM trainers' per-epoch bar, ``tqdm(range(
    len(train_dataloader)), desc="Train step of epoch %d" % epoch)``, from its (stripped)
    desc; None for any other desc. The bar counts the epoch's micro-batches, not steps."""
    found = _OPENRLHF_STEP_BAR_RE.fullmatch(desc) if desc.startswith("Train step") else None
    return int(found.group(1)) if found is not None else None
_POSTFIX_LOSS_NEEDLES = tuple(f", {key}=" for key in POSTFIX_LOSS_KEYS)
"""A postfix pair follows the rate or another pair: ``, key=``."""


def postfix_loss(line: str) -> dict[str, float] | None:
    """A training bar's ``set_postfix`` values when they name its loss (``Steps:  10%|...|
    100/1000 [01:40<15:00,  1.00s/it, step_loss=0.123, lr=1e-05]``), the first of
    :data:`POSTFIX_LOSS_KEYS` as ``loss``; None otherwise."""
    if not any(needle in line for needle in _POSTFIX_LOSS_NEEDLES):
        return None  # cheap: an RL bar's policy_loss= is redrawn thousands of times
    values = bar_postfix(line)
    if values is None:
        return None
    for key in POSTFIX_LOSS_KEYS:
        if key in values:
            values["loss"] = values.pop(key)
            return values
    return None


def lightning_status(line: str) -> tuple[int, dict[str, float]] | None:
    """The step status in a PyTorch Lightning training bar's postfix: NeMo's (below), else a
    plain Lightning run's ``TQDMProgressBar`` (``Epoch 1:  30%|...| 300/1000 [05:00<11:40,
    1.00it/s, v_num=0, train_loss=1.230]``): the metrics logged with ``prog_bar=True`` at batch
    ``epoch x the bar's total + n`` (the bar counts the epoch's batches), ``v_num`` left out
    and ``train_loss`` read as the loss; None when nothing was logged to the bar."""
    if "global_step=" in line:
        return _nemo_status(line)
    if not line.lstrip().startswith("Epoch "):
        return None  # no Lightning bar (``may_be_lightning`` lets other postfix losses by)
    bar = parse_tqdm(line) if "%|" in line else None
    epoch = _LIGHTNING_EPOCH_RE.fullmatch(bar.desc) if bar is not None else None
    values = bar_postfix(line) if epoch is not None else None
    if bar is None or epoch is None or values is None:
        return None
    values.pop("v_num", None)
    for key in _LIGHTNING_LOSS_KEYS:
        if key in values and "loss" not in values:
            values["loss"] = values.pop(key)
    return (int(epoch.group(1)) * bar.total + bar.current, values) if values else None


def _nemo_status(line: str) -> tuple[int, dict[str, float]] | None:
    """NeMo 1.x's step status, its (PyTorch Lightning) bar's postfix: ``Epoch 0: :  47%|...|
    7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000, consumed_samples=12288.0,
    train_step_timing in s=49.50]`` (older Lightning puts a rate and its smoothed ``loss=``
    first). ``(step done, the numeric pairs)``: in epoch 0 of a NeMo (Megatron) run, whose bar
    counts global batches, the bar's count; else Lightning's ``global_step`` (logged before the
    step's increment, so the step done is one more; printed to 3-4 significant digits, so the
    count is exact where it applies). The smoothed ``loss`` is dropped beside NeMo's
    ``reduced_train_loss`` (the step's own). None without a ``global_step``."""
    if "global_step=" not in line:
        return None
    found = _LIGHTNING_POSTFIX_RE.search(line)
    if found is None:
        return None
    values: dict[str, float] = {}
    for part in found.group(2).split(","):
        key, sep, raw = part.rpartition("=")
        key = " ".join(key.split())
        if sep and key and (number := parse_number(raw.strip())) is not None:
            values[key] = number
    step = values.pop("global_step", None)
    if step is None or not math.isfinite(step) or step < 0 or step >= 1e12:
        return None
    if "reduced_train_loss" in values:
        values.pop("loss", None)
        if _FIRST_EPOCH_RE.match(line) is not None:
            return int(found.group(1)), values
    return int(step) + 1, values


def parse_tqdm(line: str) -> TqdmBar | None:
    """A tqdm redraw at the start of a line (lines are already split on ``\\r``)."""
    if "%|" not in line:
        return None
    last = _TQDM_RE.match(line)
    if last is None:
        return None
    desc, current, total, elapsed, rate = last.group("desc", "cur", "tot", "elapsed", "rate")
    return TqdmBar(
        desc=(desc or "").strip(),
        current=int(current),
        total=int(total),
        elapsed_s=interval_seconds(elapsed),
        rate=(rate or "").strip(),
    )
