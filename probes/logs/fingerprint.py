"""What a run runs: model, image, config and geometry, read from the dump its trainer printed.

Policy: the fingerprint is what the launcher or trainer printed about itself, never the job's
name. Four dump shapes cover the trainers we read, and each is recognised by its own form:

- a Python-literal dict (verl's ``pprint(OmegaConf.to_container(config, resolve=True))``, one
  Ray-prefixed line after another): joined until its brackets balance, read with
  ``ast.literal_eval`` and flattened to dotted keys; flat dicts (metric lines) are not configs;
- ``  key ........ value`` lines: Megatron's ``arguments`` block and DeepSpeed's
  ``DeepSpeedEngine configuration:`` (``DeepSpeedConfig.print``);
- ``key=value,`` lines inside ``SomeConfig(`` ... ``)``: ``TrainingArguments.__str__`` (HF
  Trainer, TRL configs) as example scripts log it;
- a YAML dump (``OmegaConf.to_yaml``, the form Hydra apps such as SkyRL's print): indented
  ``key: value`` runs with at least one nested section;
- one-line reprs: a dataclass ``ModelConfig(model_name_or_path='...', ...)`` or argparse
  ``Namespace(...)``, and the Hydra overrides (``a.b.c=value``) of a launch line that a batch
  script echoes with ``set -x`` (``+ python3 -m verl.trainer.main_ppo data.train_batch_size=...``).

Known keys (``probes.logs.fingerprint_fields``) then give the model, the container image,
nodes x GPUs, TP/PP/DP and the rollouts per step (prompts x samples per prompt: verl
``data.train_batch_size`` x ``actor_rollout_ref.rollout.n``, SkyRL ``trainer.train_batch_size``
x ``generator.n_samples_per_prompt``, OpenRLHF ``rollout_batch_size`` x ``n_samples_per_prompt``
(>= 0.10: ``rollout.batch_size`` x ``rollout.n_samples_per_prompt``, its ``namespace(...)``);
TRL: the completions of one optimizer step, HF's ``Total train batch size`` banner or
``per_device_train_batch_size`` x ``gradient_accumulation_steps`` x ``world_size``, with
``num_generations`` samples per prompt). Nothing is guessed: a value not printed stays ``None``.
Bounded: at most :data:`MAX_KEYS` keys, values cut to :data:`MAX_VALUE` characters, a dump of
more than :data:`MAX_DUMP_LINES` lines is dropped. Never raises.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterable, Mapping, Sequence

from probes.logs.fingerprint_fields import _build, _image_key, _int, _trainer_of
from probes.logs.fingerprint_lines import HEADERS as _HEADERS
from probes.logs.fingerprint_lines import ReadLines
from probes.logs.namespace_dump import namespace_entries
from probes.models import RunFingerprint

_log = logging.getLogger(__name__)

MAX_KEYS = 4000
MAX_VALUE = 200
MAX_DUMP_LINES = 20000

_DOTS_RE = re.compile(r"(?:^|\] )\s{1,8}([A-Za-z_][\w]{0,80}) \.{2,} (.{0,300})$")
_ARGS_OPEN_RE = re.compile(r"\b([A-Z]\w{0,60}(?:Config|Arguments|Args))\($")
_ARG_RE = re.compile(r"^([A-Za-z_]\w{0,80})=(.{0,300}),$")
_YAML_RE = re.compile(r"^( {0,40})([A-Za-z_][\w\-]{0,80}):(?: (.{0,300}))?$")
_QUOTED_RE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_BRACKETS = frozenset("{}[]()")
_PASS_AT_RE = re.compile(r"reward/avg_pass_at_(\d{1,4})\b")
_BARE_FLOAT_RE = re.compile(r"([:\[,(]\s*)(-?inf|nan)(?=\s*[,}\])])")
_ONE_LINE_ARGS_RE = re.compile(
    r"\b(?:[A-Z]\w{0,60}(?:Config|Arguments|Args)|Namespace)\((.{1,20000})\)"
)
_ARG_PAIR_RE = re.compile(
    r"(?:^|,\s?)([A-Za-z_]\w{0,80})=('(?:[^'\\]|\\.){0,300}'|\"(?:[^\"\\]|\\.){0,300}\"|"
    r"\[[^\]]{0,300}\]|[^,()\[\]]{0,300})"
)
_OVERRIDE_RE = re.compile(r"(?:^|\s)\+{0,2}([A-Za-z_]\w{0,60}(?:\.\w{1,60}){1,8})=(\S{1,300})")
_LAUNCH_WORDS = ("python", "torchrun", "srun", "ray job", "uv run", "deepspeed", "accelerate")
_YAML_ITEM_RE = re.compile(r"^ {0,42}- ")
_BANNER_BATCH_RE = re.compile(
    r"Total train batch size \(w\. parallel, distributed & accumulation\) = ([\d,]{1,12})"
)
_IMAGE_RES = (
    re.compile(r"pyxis: importing docker image: (\S{1,300})"),
    re.compile(r"--container-image[= ](\S{1,300})"),
    re.compile(r"\b(?:singularity|apptainer) (?:exec|run)\b.{0,200}?\s(\S{1,300}\.sif)\b"),
    # a launcher's own echo: "image: X", "IMAGE=X", "container_image = 'X'", "--image X"
    re.compile(r"(?i)(?:^|[\s'\"{,+])(?:container[_-]?|docker[_-]?)?image['\"]?\s{0,3}[:=]\s{0,3}"
               r"['\"]?([A-Za-z0-9][\w.\-/:@#]{2,200})"),
    re.compile(r"(?:^|\s)--image[= ]([A-Za-z0-9][\w.\-/:@#]{2,200})"),
)


def read_fingerprint(lines: Sequence[str]) -> RunFingerprint | None:
    """The fingerprint printed in ``lines`` (ANSI already stripped), or None if none was."""
    try:
        return _read(lines)
    except (ValueError, RecursionError, MemoryError, SyntaxError, TypeError):
        return None  # a malformed dump is no fingerprint
    except Exception:
        # A reader bug must not cost the sweep the rest of the log: logged with its trace.
        _log.exception("read_fingerprint failed on %d lines", len(lines))
        return None


def _read(lines: Sequence[str], *, gated: bool = True) -> RunFingerprint | None:
    """The fingerprint; ``gated``: the readers see only the lines ``ReadLines`` keeps (the
    lines it drops change nothing, which the property tests check against ``gated=False``)."""
    gates = ReadLines(lines, gated)
    bodies = gates.bodies
    config: dict[str, str] = {}
    trainer = _collect(bodies, config, gates.starts)
    image = _image(bodies[i] for i in gates.images)
    banner = next((m for i in gates.banners if "Total train batch" in bodies[i]
                   if (m := _BANNER_BATCH_RE.search(bodies[i]))), None)
    pass_at = next((m for i in reversed(gates.passes) if "pass_at_" in bodies[i]
                    if (m := _PASS_AT_RE.search(bodies[i]))), None)
    if not config and image is None and banner is None and pass_at is None:
        return None
    if trainer is None:
        trainer = _trainer_of(config)
    built = _build(config, trainer, image or _image_key(config),
                   _int(banner.group(1)) if banner else None)
    if pass_at is None:
        return built
    return built.model_copy(update={"pass_at_k": _int(pass_at.group(1))})


def _collect(bodies: Sequence[str], config: dict[str, str], starts: Sequence[int]) -> str | None:
    """Fill ``config`` from every dump in ``bodies``; return the trainer a header named.

    Only the lines in ``starts`` can start a dump: any other line is stepped over."""
    trainer: str | None = None
    index = 0
    flat_until = 0  # a 'key: value' run already read and found flat ends here
    pending = iter(starts)
    memo: dict[str, list[tuple[str, str]] | None] = {}
    while True:
        start = next(pending, None)
        while start is not None and start < index:
            start = next(pending, None)
        if start is None:
            break
        index = start
        body = bodies[index]
        stripped = body.strip()
        for mark, name in _HEADERS:
            if mark in body:
                trainer = trainer or name
        if stripped.startswith("{") and ("'" in stripped or '"' in stripped):
            index = _literal_dump(bodies, index, config, memo)
            continue
        if stripped.endswith("(") and _ARGS_OPEN_RE.search(stripped):
            trainer = trainer or "hf"
            index = _args_dump(bodies, index + 1, config)
            continue
        if "=" in body and _one_line(body, config):
            index += 1
            continue
        dots = _DOTS_RE.search(body) if " .." in body else None
        if dots is not None:
            _put(config, dots.group(1), dots.group(2).strip())
        elif index >= flat_until and _YAML_RE.match(body):
            # A flat run read from a later line of it is flatter still (tqdm's '\r' redraws,
            # 'Generating: 5%|...', are thousands of such lines): it is read once, not per line.
            index, flat_until = _yaml_dump(bodies, index, config)
            continue
        index += 1
    return trainer


def _one_line(body: str, config: dict[str, str]) -> bool:
    """A one-line dataclass/argparse repr, a nested ``namespace(...)`` (``namespace_dump``), or
    a launch line's Hydra overrides (``set -x``)."""
    nested = namespace_entries(body) if "namespace(" in body else None
    if nested is not None:
        for key, value in nested.items():
            _put(config, key, _show(value))
        return True
    found = _ONE_LINE_ARGS_RE.search(body)
    if found is not None:
        pairs = _ARG_PAIR_RE.findall(found.group(1))
        for key, value in pairs:
            _put(config, key, _unquote(value.strip()))
        return bool(pairs)
    if any(word in body for word in _LAUNCH_WORDS):
        overrides = _OVERRIDE_RE.findall(body)
        for key, value in overrides:
            _put(config, key, _unquote(value))
        return bool(overrides)
    return False


def _literal_dump(bodies: Sequence[str], start: int, config: dict[str, str],
                  memo: dict[str, list[tuple[str, str]] | None] | None = None) -> int:
    """Join a pprint'ed dict until its brackets balance; keep it if it is a nested config.
    ``memo``: the entries of each dump text read before (``_literal_entries``), for a log
    printing the same nested dict over and over (literal_eval cost 0.2 ms a line)."""
    depth = 0
    parts: list[str] = []
    end = start
    for end in range(start, min(len(bodies), start + MAX_DUMP_LINES)):
        text = bodies[end]
        parts.append(text)
        depth += _depth(text)
        if depth <= 0:
            break
    else:
        return end + 1
    if depth > 0:
        return end + 1
    if sum(part.count("{") for part in parts) < 2:
        return end + 1  # a flat dict (a metric line) is never a config: skip the parse
    joined = "\n".join(parts)
    if memo is None or len(joined) > _MEMO_CHARS:
        entries = _literal_entries(joined)
    elif joined in memo:
        entries = memo[joined]
    else:
        entries = memo[joined] = _literal_entries(joined)
    if entries is None:
        return start + 1  # not a literal: let the other readers see these lines
    for key, value in entries:
        _put(config, key, value)
    return end + 1


_MEMO_CHARS = 4096
"""The longest dump text ``_literal_dump`` remembers (a config dump is printed once)."""


def _literal_entries(joined: str) -> list[tuple[str, str]] | None:
    """The ``(dotted key, value)`` entries of a dump's text if it is a nested dict literal
    (none for another literal); None if it is no literal."""
    # pprint writes non-finite floats bare (inf, nan), which literal_eval refuses: quote them
    text = _BARE_FLOAT_RE.sub(r"\1'\2'", joined.strip())
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    entries: list[tuple[str, str]] = []
    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        _flatten(value, "", entries)
    return entries


def _depth(text: str) -> int:
    """Net bracket depth of one line, ignoring brackets inside quoted strings."""
    if not _BRACKETS.intersection(text):
        return 0  # most lines of a pprint'ed dict: one 'key': value pair, no bracket at all
    bare = _QUOTED_RE.sub("", text) if ("'" in text or '"' in text) else text
    return sum(bare.count(c) for c in "{[(") - sum(bare.count(c) for c in "}])")


def _flatten(value: Mapping[object, object], prefix: str,
             entries: list[tuple[str, str]]) -> None:
    for key, item in value.items():
        dotted = f"{prefix}{key}"
        if isinstance(item, dict):
            _flatten(item, dotted + ".", entries)
        else:
            entries.append((dotted, _show(item)))


def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _args_dump(bodies: Sequence[str], start: int, config: dict[str, str]) -> int:
    """``key=value,`` lines up to the closing ``)`` (``TrainingArguments.__str__``)."""
    for index in range(start, min(len(bodies), start + MAX_DUMP_LINES)):
        line = bodies[index].strip()
        found = _ARG_RE.match(line)
        if found is None:
            return index + 1 if line == ")" else index
        _put(config, found.group(1), found.group(2).strip())
    return min(len(bodies), start + MAX_DUMP_LINES)


def _yaml_dump(bodies: Sequence[str], start: int, config: dict[str, str]) -> tuple[int, int]:
    """An indented ``key: value`` run; kept only if it nests (a YAML dump, not chatter).
    ``(next line, end of a flat run)``: no run starting inside a flat one can nest or hold
    more keys (its stack is the run's less a prefix), so none is read again."""
    stack: list[tuple[int, str]] = []
    found: dict[str, str] = {}
    nested = False
    index = start
    stop = min(len(bodies), start + MAX_DUMP_LINES)
    while index < stop:
        body = bodies[index]
        line = _YAML_RE.match(body)
        if line is None:
            if _YAML_ITEM_RE.match(body) and index > start:
                index += 1
                continue
            break
        indent, key, value = len(line.group(1)), line.group(2), line.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        nested = nested or bool(stack)
        dotted = ".".join([*(k for _, k in stack), key])
        if value is None or value.strip() == "":
            stack.append((indent, key))
        else:
            found[dotted] = _unquote(value.strip())
            index += 1
            while index < stop and bodies[index] == body:
                index += 1  # the same line again pops nothing and sets the same key
            continue
        index += 1
    if nested and len(found) >= 4:
        for key, value in found.items():
            _put(config, key, value)
        return index, index
    return start + 1, index


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _put(config: dict[str, str], key: str, value: str) -> None:
    """Store one entry, spelled the same whichever dump printed it (``True``/``true``,
    ``None``/``null``, ``1e-6``/``1e-06``), so two attempts compare equal when they are."""
    if len(config) >= MAX_KEYS and key not in config:
        return
    lowered = value.strip().lower()
    if lowered in ("true", "false", "null", "none", "~"):
        config[key] = "null" if lowered in ("none", "~") else lowered
        return
    config[key] = _number(value.strip()) or value[:MAX_VALUE]


def _number(text: str) -> str | None:
    if not text or len(text) > 40 or text[0] not in "+-.0123456789":
        return None
    try:
        return str(int(text))
    except ValueError:
        pass
    try:
        return repr(float(text))
    except ValueError:
        return None


def _image(bodies: Iterable[str]) -> str | None:
    for body in bodies:
        if "mage" not in body and "MAGE" not in body and ".sif" not in body:
            continue
        for pattern in _IMAGE_RES:
            found = pattern.search(body)
            if found is not None:
                return found.group(1).strip("'\",")
    return None
