"""Recognisers for single trainer log lines: pure, stateless, bounded in cost.

Policy: every function here takes one already-split line and returns ``None`` when the line
is not its kind; none of them raises on any input. Regexes are precompiled and length-capped
(a value longer than 64 characters is not a number), so a pathological line costs linear
time. The stateful pass that joins these into a history lives in ``probes.logs.parse``;
line timestamps are read by ``probes.logs.clock``, tqdm progress bars by
``probes.logs.bar_lines``.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

ANSI_RE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"
    r"|[\]PX^_][^\x07\x1b\n]{0,2048}(?:\x07|\x1b\\)"
    r"|[!-/]*[0-~])?|\x07"
)
"""A terminal escape whole (ECMA-48): CSI (colours, cursor, ``\x1b[2J``), a string sequence
to its BEL or ST (OSC titles ``\x1b]0;title\x07`` and hyperlinks, DCS/APC), a two-byte or
charset escape (``\x1b(B``, ``\x1b7``, ``\x1b=``), else a stray ESC; and a lone BEL. Taking
only the ESC of an OSC left ``]0;title`` glued to the line's text (a Traceback header after
it was no header)."""
NESTED_BAR_MARK = "\x1b[A"
"""tqdm writes cursor-up after a bar at position >= 1 (eval/inner bars), never after the main."""

_RAY_HEAD_RE = re.compile(
    r"\([A-Za-z_][\w.:<>\-]{0,120}(?: pid=\d{1,10}(?:, ip=[^)\s]{1,64})?)?\)"
)
_ray_heads: dict[str, bool] = {}
_RAY_HEADS_CAP = 4096
_REPEATED_RE = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")

_NUMBER_CAP = 64
_CALL_RE = re.compile(r"^[A-Za-z_][\w.]{0,40}\(\s*([^,()]{1,64})")
_PAIR_RE = re.compile(
    r"""['"]([^'"\\\n]{1,256})['"]\s*:\s*"""
    r"""([A-Za-z_][\w.]{0,40}\([^()]{0,128}\)|'[^']{0,80}'|"[^"]{0,80}"|[^,{}()\s]{1,80})"""
)
_VERL_RE = re.compile(r"(?:^|\s)step:(\d{1,12}) - ")
_ITERATION_RE = re.compile(
    r"(?:^|[\s\]:|])iteration\s{1,40}(\d{1,12})\s{0,40}/\s{0,40}(\d{1,12})\s{0,40}\|"
)
_MMENGINE_RE = re.compile(r"(?:^|\s)Iter\(train\) \[\s{0,20}(\d{1,12})/(\d{1,12})\]")
_MMENGINE_PAIR_RE = re.compile(r"(?:^|\s)([A-Za-z_][\w.()/-]{0,64}): (\S{1,40})")
MMENGINE_GATE = "Iter(train) ["
"""What an mmengine runner's training log line holds (``Iter(train) [ 320/2748]  lr: ...``)."""
_MMENGINE_EPOCH_RE = re.compile(
    r"(?:^|\s)Epoch\(train\) {0,20}\[(\d{1,9})\]\[\s{0,20}(\d{1,12})/(\d{1,12})\]")
MMENGINE_EPOCH_GATE = "Epoch(train)"
"""What an mmengine runner's line holds when it logs by epochs (``Epoch(train) [2][120/500]``)."""
_XTUNER_RE = re.compile(r"(?:^|\s)Epoch \d{1,9} Step (\d{1,12})/(\d{1,12}) (?=\w{1,64}: )")
XTUNER_GATE = "data_time: "
"""What XTuner v1's step line holds (``Epoch 1 Step 320/916 data_time: 0.0123 lr: ...``)
besides ``Step ``."""
_ZERO_BASED_ITERATION_RE = re.compile(r"epoch \d{1,12},\s?$")
"""What NeMo 2's progress printer puts before its ``iteration``: ``Training epoch E, `` (its
iteration and total are zero-based: ``iteration {n-1}/{max_steps-1}``)."""
_REWARD_PAIR_RE = re.compile(r"([\w/@.\-]{1,256}): ([^,\s]{1,64})")


def strip_ansi(segment: str) -> str:
    """Remove terminal escapes (:data:`ANSI_RE`), stray ESC and BEL bytes."""
    return ANSI_RE.sub("", segment) if "\x1b" in segment or "\x07" in segment else segment


def split_lines(text: str, max_line_chars: int) -> tuple[list[str], list[str]]:
    """(lines cut to ``max_line_chars``, the same ANSI-stripped), split on ``\\r\\n``, ``\\r``
    and ``\\n`` (tqdm redraws end in ``\\r``).

    Done by ``str.replace``/``str.split`` in C: ``\\r\\n`` pairs never overlap, so turning them
    and then lone ``\\r`` into ``\\n`` gives the separators of ``re.split(r"\\r\\n?|\\n")``.
    """
    raws = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(text) > max_line_chars:
        raws = [r[:max_line_chars] if len(r) > max_line_chars else r for r in raws]
    if "\x1b" not in text and "\x07" not in text:
        return raws, raws
    return raws, [strip_ansi(r) for r in raws]


_LAUNCHER_PREFIX_RE = re.compile(
    r"(?:\[(?:default|rank)0\]:|\s{0,6}0:"
    r"|(?=[\w.-]*[\d.])(?=[\w.-]*[A-Za-z.])[A-Za-z0-9][\w.-]{0,62}:) ?(?=\{)")
"""What a launcher puts before each line of a rank's output, where a metric dict follows it:
torchrun's ``--tee`` (``[default0]:``, ``[rank0]:``) and ``srun -l`` (``0: ``) for rank 0
only (the rank that logs; another rank's dicts would interleave as steps), and pdsh and
DeepSpeed's multi-node runner's ``<host>: `` for a host-like name (a digit or a dot, and a
letter or a dot, in it: ``val: {...}`` is a labelled dict and ``3: `` another rank)."""


def strip_ray_prefix(line: str) -> str:
    """Drop a leading ``(Name pid=N[, ip=...])`` and a trailing ``[repeated Nx ...]``; and a
    launcher's rank or host prefix before a metric dict (:data:`_LAUNCHER_PREFIX_RE`: a
    multi-node DeepSpeed or ``torchrun --tee`` run's every step was read as no metric)."""
    if ": {" in line or "]:{" in line:
        launched = _LAUNCHER_PREFIX_RE.match(line)
        if launched is not None:
            line = line[launched.end():]
    if line.startswith("("):
        # No class of the prefix regex admits ")", so it can only end at the first one: whether
        # the text up to there is a prefix is looked up once per distinct actor name.
        end = line.find(")") + 1
        head = line[:end]
        known = _ray_heads.get(head)
        if known is None:
            known = _learn_ray_head(head)
        if known:
            line = line[end + 1 :] if line[end : end + 1] == " " else line[end:]
    if line.endswith("]") and "repeated" in line:
        line = _REPEATED_RE.sub("", line)
    return line


def _learn_ray_head(head: str) -> bool:
    """Whether ``head`` (a line up to its first ``)``) is a whole Ray actor prefix."""
    if len(_ray_heads) >= _RAY_HEADS_CAP:
        _ray_heads.clear()  # a log inventing actor names without end must not grow memory
    known = _ray_heads[head] = _RAY_HEAD_RE.fullmatch(head) is not None
    return known


def parse_number(text: str) -> float | None:
    """Read one printed value: int, float, quoted string, ``np.float64(x)``, nan/inf; else None."""
    value = text.strip()
    if not value or len(value) > _NUMBER_CAP + 48:
        return None
    if value[0] in "'\"" and value[-1] == value[0] and len(value) >= 2:
        value = value[1:-1].strip()
    if value.endswith(")"):
        call = _CALL_RE.match(value)
        if call is None:
            return None
        value = call.group(1).strip()
    if not value or len(value) > _NUMBER_CAP or value[0] in "_TF":
        return None
    try:
        return float(value)
    except ValueError:
        return None


_DIGIT_LEAD = frozenset("0123456789+-.")
_DIGIT_END = frozenset("0123456789.")


def parse_pairs(text: str) -> dict[str, float]:
    """Every numeric ``'key': value`` pair of a Python/JSON dict repr (non-numbers dropped).

    A value that starts with a digit, sign or point and ends with a digit or point, bare or
    in one pair of quotes, within the length cap, is what ``parse_number`` would read
    (nothing to strip, no call, no ``_TF`` lead): ``float`` reads it at once."""
    out: dict[str, float] = {}
    for key, raw in _PAIR_RE.findall(text):
        lead, end = raw[0], raw[-1]
        if lead in _DIGIT_LEAD and end in _DIGIT_END and len(raw) <= _NUMBER_CAP:
            body = raw
        elif (lead == end and lead in "'\"" and 3 <= len(raw) <= _NUMBER_CAP + 2
              and raw[1] in _DIGIT_LEAD and raw[-2] in _DIGIT_END):
            body = raw[1:-1]
        else:
            number = parse_number(raw)
            if number is not None:
                out[key] = number
            continue
        try:
            number = float(body)
        except ValueError:
            if key in _STEP_OF_KEYS and "global_step" not in out:
                done, slash, _ = body.partition("/")
                if slash and done.isdigit() and len(done) <= 12:
                    out["global_step"] = float(done)
            continue
        out[key] = number
    return out


_STEP_OF_KEYS = frozenset({"global_step/max_steps", "iteration"})
"""ms-swift's step in its printed dict, a ``'N/T'`` string (swift/trainers/patcher.py
``add_train_message``: ``'global_step/max_steps'``; its Megatron callback: ``'iteration'``),
read as ``global_step`` N: the dict otherwise carries no step, and one printed every
``logging_steps`` is not the Nth step."""


_KEY_BARS = frozenset("\"\\\n{")
"""What a plain key of ``quoted_pairs`` never holds: what ``_PAIR_RE``'s key stops at, and the
brace that makes ``MetricScan`` take a dict for a nested config."""
_plain_keys: dict[tuple[str, ...], int | None] = {}
_PLAIN_KEYS_CAP = 1024
_last_plain: tuple[tuple[str, ...], int] = ((), 0)
"""The plain keys ``quoted_pairs`` read last and their characters (a trainer repeats its keys
every step: compared, not hashed)."""
_FRAMES = {count: ["{", *[": ", ", "] * (count - 1), ": ", "}"] for count in range(1, 65)}
"""``quoted_pairs``' frame of a dict of ``count`` pairs: the text around its quoted parts."""


def quoted_pairs(text: str) -> dict[str, float] | None:
    """``parse_pairs(text)`` of a one-line dict printed ``{'k': v, ...}`` (HF Trainer's every
    step) whose keys are plain and values numbers, read by ``str.split`` and ``float`` in C;
    None for any other text (the caller asks ``parse_pairs``). A text it reads holds one ``{``.

    Two shapes, keys in single quotes, framed exactly by ``{``, ``: ``, ``, `` and ``}``: every
    value quoted (``'1.9'``, transformers >= 4.46) or none (``1.9``). There ``_PAIR_RE`` meets
    each key in turn and the whole of a value ``float`` reads (``'v'`` by its quote arm; a bare
    ``v`` but its blank ends by the last arm, the arms before it needing a parenthesis or a
    quote, which ``float`` refuses), and ``parse_pairs`` reads such a value of at most
    ``_NUMBER_CAP`` characters as ``float`` reads it: directly, or through ``parse_number``,
    whose stripping and checks change nothing ``float`` accepts."""
    if text[:2] != "{'" or text[-1:] != "}":
        return None
    parts = text.split("'")
    if text[-2:] == "'}":  # every value quoted: {'k': 'v', ...}, 8 characters a pair
        count, rest = divmod(len(parts), 4)
        frame = _FRAMES.get(count)
        if rest != 1 or frame is None or parts[::2] != frame:
            return None
        keys, values = tuple(parts[1::4]), parts[3::4]
        framing = 8 * count
    else:  # {'k': v, ...}: 6 characters a pair
        keys, gaps = tuple(parts[1::2]), parts[2::2]
        if len(parts) % 2 != 1 or not gaps or not all(map(str.startswith, gaps, repeat(": "))):
            return None
        last = gaps.pop()
        if not all(map(str.endswith, gaps, repeat(", "))):
            return None
        values = [gap[2:-2] for gap in gaps]
        values.append(last[2:-1])
        framing = 6 * len(keys)
    global _last_plain  # noqa: PLW0603 (a memo of a pure answer)
    known = _last_plain
    if keys == known[0]:
        key_chars = known[1]
    else:
        learned = _plain_keys[keys] if keys in _plain_keys else _learn_plain_keys(keys)
        if learned is None:
            return None
        key_chars = learned
        _last_plain = (keys, key_chars)
    if len(text) - framing - key_chars > _NUMBER_CAP and max(map(len, values)) > _NUMBER_CAP:
        return None  # (the values' characters, all of them within the cap, else the longest)
    try:
        numbers = list(map(float, values))
    except ValueError:
        return None
    return dict(zip(keys, numbers))  # noqa: B905 (a key and a value per pair, by the split)


def _learn_plain_keys(keys: tuple[str, ...]) -> int | None:
    """The characters of ``keys`` if every key is ``_PAIR_RE``'s whole key (1 to 256
    characters, none it stops at), none holds a brace and none repeats, else None
    (remembered: a trainer repeats its keys every step)."""
    if len(_plain_keys) >= _PLAIN_KEYS_CAP:
        _plain_keys.clear()  # a log inventing key sets without end must not grow memory
    plain = len(set(keys)) == len(keys) and all(
        0 < len(key) <= 256 and _KEY_BARS.isdisjoint(key) for key in keys)
    chars = _plain_keys[keys] = sum(map(len, keys)) if plain else None
    return chars


def parse_verl(line: str) -> tuple[int, dict[str, float]] | None:
    """A verl console line ``step:N - key:value - ...`` -> (step, numeric values)."""
    found = _VERL_RE.search(line)
    if found is None:
        return None
    return int(found.group(1)), _key_values(line[found.end() :], " - ")


class IterationLine(NamedTuple):
    """A Megatron-style ``iteration N/ T | key: value | ...`` line (or mmengine's)."""

    step: int
    total: int
    values: dict[str, float]
    seconds: float | None = None
    """Seconds an iteration when the line says so under a name of its own (mmengine's
    ``time``); else ``progress.iteration_seconds`` of ``values``."""
    fmt: str = "megatron"
    epoch_length: int | None = None
    """For a line counting an epoch's batches (mmengine by epochs): the batches of an epoch;
    ``step`` then counts the epochs before, and ``total`` is 0 (the run's epochs are not on
    the line: the scan multiplies them in)."""


def parse_iteration(line: str) -> IterationLine | None:
    """Megatron-LM / Megatron-DeepSpeed / GPT-NeoX ``iteration N/ T | key: value | ...`` lines.

    ``T`` is ``--train-iters`` (optimizer steps, never an example count); the pairs are read
    generally, so ``lm loss``, ``grad norm``, ``learning rate`` and any other counter come along.
    NeMo 2's ``Training epoch E, iteration N/T | ...`` (nemo/lightning/pytorch/callbacks/
    progress_printer.py) counts from 0: ``N + 1`` steps are done of ``T + 1`` (max_steps).
    """
    found = _ITERATION_RE.search(line) if "iteration" in line else None
    if found is None:
        if MMENGINE_GATE in line or MMENGINE_EPOCH_GATE in line:
            return parse_mmengine(line)
        return parse_xtuner(line) if XTUNER_GATE in line and "Step " in line else None
    step, total = int(found.group(1)), int(found.group(2))
    if _ZERO_BASED_ITERATION_RE.search(line, max(0, found.start() - 24), found.start() + 1):
        step, total = step + 1, total + 1
    values = _key_values(line[found.end() :], "|")
    grad = values.get("grad norm")
    if grad is not None and not math.isfinite(grad) and not _ITERATION_LOSSES & values.keys():
        # Megatron prints a loss only ``if avg > 0.0``: a NaN loss is left out of the line,
        # and its NaN ``grad norm`` is what is printed. Read it as the NaN it was, not as the
        # loss of the last line that had one.
        values["lm loss"] = math.nan
    return IterationLine(step, total, values)


_ITERATION_LOSSES = frozenset({"lm loss", "lm_loss", "loss", "reduced_train_loss"})


def parse_mmengine(line: str) -> IterationLine | None:
    """An mmengine runner's training line by iterations (``LogProcessor`` with ``by_epoch=False``:
    XTuner's): ``Iter(train) [ N/T]  lr: 1.9990e-05  eta: 3:22:20  time: 5.0012  data_time:
    0.0123  memory: 61234  loss: 1.2100  grad_norm: 0.8400``. ``T`` is the runner's
    ``max_iters``; ``time`` the smoothed seconds an iteration. By epochs (``by_epoch=True``,
    ``EpochBasedTrainLoop``) the head is ``Epoch(train) [e][i/n]``: batch ``i`` of the ``n``
    of epoch ``e``, the run's step ``(e - 1) * n + i`` (every epoch runs the whole
    dataloader), its epochs not printed (``epoch_length``). ``Iter(val)``/``Iter(test)``
    and ``Epoch(val)`` (batches of an evaluation) are none."""
    found = _MMENGINE_RE.search(line) if MMENGINE_GATE in line else None
    if found is not None:
        return _timed_line(found, line, "mmengine")
    by_epoch = _MMENGINE_EPOCH_RE.search(line) if MMENGINE_EPOCH_GATE in line else None
    if by_epoch is None:
        return None
    epoch, batch, length = (int(g) for g in by_epoch.groups())
    if epoch < 1 or length < 1 or batch > length:
        return None
    timed = _timed_line(by_epoch, line, "mmengine", groups=(2, 3))
    return timed._replace(step=(epoch - 1) * length + batch, total=0, epoch_length=length)


def parse_xtuner(line: str) -> IterationLine | None:
    """XTuner v1's step line (``Trainer._log_step``): ``Epoch E Step N/T data_time: 0.0123 lr:
    1.990000e-05 time: 5.0012 ... reduced_llm_loss: 1.21000000, local_loss: 1.2 ... grad_norm:
    0.84 max_memory: 61.23 GB ... eta: 0:49:40``. ``N`` is the optimizer steps done, ``T``
    ``total_step``, ``time`` the step's seconds; a pair's trailing comma is no part of it."""
    found = _XTUNER_RE.search(line)
    return _timed_line(found, line, "xtuner") if found is not None else None


def _timed_line(found: re.Match[str], line: str, fmt: str,
                groups: tuple[int, int] = (1, 2)) -> IterationLine:
    """The step and total (``groups`` of ``found``) and ``name: value`` pairs after ``found``,
    with the ``time`` pair as the iteration's seconds."""
    values: dict[str, float] = {}
    for key, raw in _MMENGINE_PAIR_RE.findall(line, found.end()):
        number = parse_number(raw.removesuffix(","))
        if number is not None:
            values[key] = number
    seconds = values.pop("time", None)
    if seconds is not None and not (math.isfinite(seconds) and seconds >= 0):
        seconds = None
    return IterationLine(int(found.group(groups[0])), int(found.group(groups[1])), values,
                         seconds, fmt)


def may_be_iteration(body: str) -> bool:
    """The substring gate of :func:`parse_iteration` (a line failing it is none)."""
    return ("iteration" in body or MMENGINE_GATE in body or MMENGINE_EPOCH_GATE in body
            or (XTUNER_GATE in body and "Step " in body))


def _key_values(text: str, separator: str) -> dict[str, float]:
    """The numeric ``key:value`` parts of ``text`` cut on ``separator`` (verl's `` - ``,
    Megatron's ``|``); a key's runs of whitespace become one space, a blank key is no key."""
    values: dict[str, float] = {}
    for part in text.split(separator):
        key, sep, raw = part.rpartition(":")
        key = " ".join(key.split())
        if sep and key and (number := parse_number(raw)) is not None:
            values[key] = number
    return values


def parse_reward_line(line: str) -> dict[str, float] | None:
    """SkyRL's per-step ``reward/avg_pass_at_8: 0.625, reward/avg_raw_reward: 0.40625`` line."""
    if "reward/" not in line or "{" in line:
        return None
    values: dict[str, float] = {}
    for key, raw in _REWARD_PAIR_RE.findall(line):
        number = parse_number(raw)
        if number is not None and key.startswith("reward/"):
            values[key] = number
    return values or None


SKYRL_STATUS_KEYS = frozenset(("policy_loss", "final_loss"))
"""A SkyRL policy-status dict holds one of these (the worker's reduced status, unprefixed)."""


def parse_status_line(line: str) -> dict[str, float] | None:
    """SkyRL's per-step ``logger.info(status)``: ``... trainer:train:284 - {'policy_loss': ...}``.

    The worker's reduced status, its keys without the ``policy/`` prefix the tracker adds; with
    ``trainer.logger=wandb`` (SkyRL's default) it is the only line holding the step's loss,
    entropy and grad norm. Returned with the prefix, so it reads as the tracker's names."""
    head, sep, text = line.partition(" - {")
    if not sep or "{" in text or "{" in head or not text.rstrip().endswith("}"):
        return None
    text = "{" + text
    pairs = quoted_pairs(text)
    if pairs is None:
        pairs = parse_pairs(text)
    if not pairs or SKYRL_STATUS_KEYS.isdisjoint(pairs):
        return None
    return {f"policy/{key}": value for key, value in pairs.items()}


@lru_cache(maxsize=4096)
def interval_seconds(text: str) -> float | None:
    """tqdm's ``[D d, ]H:MM:SS`` or ``MM:SS`` elapsed field in seconds (pure: remembered, as
    a bar's elapsed field repeats across redraws and bars)."""
    days = 0
    if "d" in text:
        head, _, text = text.partition("d")
        text = text.lstrip(", ")
        if not head.strip().isdigit():
            return None
        days = int(head.strip())
    parts = text.strip().split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(days * 86400 + seconds)


_DS_PROGRESS_RE = re.compile(
    r"\[Rank (?:0|-1)\] step=(\d{1,12}), skipped=(\d{1,12}), lr=\[\s{0,4}([^\],\s]{1,64})")
"""DeepSpeed's engine progress, logged by rank 0 every ``steps_per_print`` optimizer steps
(deepspeed/runtime/engine.py ``_report_progress``: ``log_dist(f"step={step},
skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])``; ``[Rank -1]`` before
``torch.distributed`` is set up): the step and its param groups' learning rates (the first)."""
_DS_CHAT_LOSS_RE = re.compile(
    r"(?:^|\s)Epoch: \d{1,6}, Step: \d{1,12}, Rank: 0, loss = (.{1,160})$")
"""DeepSpeed-Chat's per-micro-batch loss (``--print_loss``; each rank prints its own, the loss
a tensor: ``Epoch: 0, Step: 39, Rank: 0, loss = tensor(2.1875, device='cuda:0',
grad_fn=<NllLossBackward0>)``): rank 0's."""


def parse_ds_progress(line: str) -> tuple[int, dict[str, float]] | None:
    """DeepSpeed's engine line (:data:`_DS_PROGRESS_RE`) -> (optimizer step, ``{"lr": first
    group's learning rate}``), else None."""
    if "] step=" not in line:
        return None
    found = _DS_PROGRESS_RE.search(line)
    if found is None:
        return None
    lr = parse_number(found.group(3))
    return int(found.group(1)), ({} if lr is None else {"lr": lr})


def parse_ds_chat_loss(line: str) -> float | None:
    """Rank 0's micro-batch loss in a DeepSpeed-Chat line (:data:`_DS_CHAT_LOSS_RE`), else
    None (another rank's, or no number)."""
    if ", Rank: 0, loss = " not in line:
        return None
    found = _DS_CHAT_LOSS_RE.search(line)
    return None if found is None else parse_number(found.group(1))
