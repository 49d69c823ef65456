"""Checkpoint and trials directories a job's log names, entered from the job's own bases.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). The log (and the job's command line) is the
job owner's text: a printed checkpoint path inside one of the bases (the workdir and the
configured roots) once normalised is entered below its base; outside them it is a root of its
own (a scratch ``default_local_dir``), which the guard opens only if the job's user could list
it, counting only that user's own steps there (``probes.remote.tree``), and only when it needs
no ``..`` to get there; a relative one is taken from the workdir; one under ``~``, in a
variable or an object store is left alone; a path given as the model to load is not a save
folder. At most ``_LOGGED_DIRS`` checkpoint and ``_LOGGED_TRIALS`` trials dirs are taken from
one log, the newest printed first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from typing import Any

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.checkpoint_steps import _STEP_DIR

_LOGGED_DIRS = 8
_LOGGED_LINE = re.compile(r"checkpoint|sav(?:e|ed|ing)\b|global_step|iter_\d", re.IGNORECASE)
_LOGGED_GATE = re.compile(
    b"checkpoint|sav|global_step|iter_|ckpt|local_dir|output_dir|output-dir|resume_|"
    + b"|".join(re.escape(c.encode()) for c in ("\u0130", "\u0131", "\u017f", "\u212a"))
)
"""A superset of ``_LOGGED_LINE`` and ``_NAMED_KEY`` on ASCII-lowered UTF-8 (see
``_logged_lines``)."""
_NAMED_KEY = re.compile(
    r"(?<![A-Za-z0-9_])(default_local_dir|ckpt[_.-](?:path|dir)|checkpoint[_-](?:path|dir)"
    r"|save[_-]dir|output[_-]dir|resume_from_path|resume_path|save_ckpt_folder"
    r"|ckpt=namespace\([^()]*?\bpath"
    r"|save(?=[ \t]+\.{3}|[ \t]+[/.\w]|=))"
    r"(['\"]?[ \t]*[:=][ \t]*|[ \t]+\.{3,}[ \t]+|[ \t]+)(?:PosixPath\()?['\"]?"
    r"([^\s'\"`,;()\[\]{}<>|]+)")
"""A save folder named by its key, where no save verb is printed: verl's config dump
(``'default_local_dir': '/scratch/u/exp'``, a ``trainer.default_local_dir=`` override),
SkyRL's (``ckpt_path: /scratch/u/ckpts``), OpenRLHF's and the HF Trainer's flags and args
(``--ckpt_path /p``, ``--save_dir=/p``, ``output_dir=/p,``; OpenRLHF >= 0.10's
``--ckpt.path /p`` and its printed ``ckpt=namespace(save_steps=10, path='/p')``), a resume's
``resume_from_path``, SkyRL's ``resume_path``, Megatron-LM's ``--save`` and its printed
arguments (``  save ........ /p``), InternEvo's ``save_ckpt_folder: local:llm_ckpts``
(its ``local:`` storage prefix dropped by ``_place``). A key and its value apart by blanks only is a
command-line flag (``--`` before it). No key here names an export or a final model
(SkyRL's ``export_path``, OpenRLHF's ``--save_path``), nor verl's profiler ``save_path``: none
holds the run's step directories."""
_NOT_A_PATH = ("None", "none", "null", "???", "False", "True")
_SAVED_TO = re.compile(r"\bto:?[ \t]+['\"]?$")
"""A save line's destination (Megatron-LM's ``saving checkpoint at iteration 20 to /p in
torch_dist format``, ``successfully saved checkpoint from iteration 20 to /p``): the save
folder itself, though no step directory is printed in it."""
_ASCII_LOWER = bytes.maketrans(bytes(range(65, 91)), bytes(range(97, 123)))
_LOGGED_PATH = re.compile(r"(?<![^\s'\"`=:(\[{,])(/(?!/)[^\s'\"`,;()\[\]{}<>|]+)")
"""An absolute path, starting a token: not the ``/mfu/actor:...`` inside a metric's name, nor
the ``//bucket/...`` of an object store's URL (``gs://bucket/...``: its scheme is cut off)."""
_LOGGED_RELATIVE = re.compile(
    r"(?:\bto|\bin|\bat|:|\b[Ss]av(?:e|ed|ing))[ \t]+['\"]?(?![/~$])"
    r"([A-Za-z0-9_.][^\s'\"`,;()\[\]{}<>|:]*/[^\s'\"`,;()\[\]{}<>|]*)")
"""A relative path a save line prints after ``to``/``in``/``at``/``:`` (HF: ``Saving model
checkpoint to saves/llama3-8b/full/sft/checkpoint-400``, LLaMA-Factory's example
``output_dir``) or right after its verb (DeepSpeed's ``[Torch] Saving out/checkpoint-100/
global_step100/mp_rank_00_model_states.pt...``), taken from the workdir, quoted or not
(LitGPT's ``!r``: ``Saving LoRA weights to 'out/finetune/lora/step-000050/...'``); no scheme
(``s3://``), ``~`` or variable."""
_MODEL_KEY = re.compile(
    r"(?:(?<![A-Za-z0-9_])([A-Za-z0-9_]*(?:path|pretrain|model)))['\"]?[ \t]*[:=][ \t]*"
    r"(?:PosixPath\()?['\"]?$"
    r"|--([A-Za-z0-9_-]*(?:pretrain|model|path))[ \t=]+['\"]?$", re.IGNORECASE)
"""The key right before a printed path (``'path': '``, ``model.path=``, ``--pretrain ``)."""
_SAVE_VERB = re.compile(r"\bsav(?:e|ed|ing)\b", re.IGNORECASE)
_OWN_KEY = re.compile(r"ckpt|checkpoint|save|resume|load|output|export|dir", re.IGNORECASE)
_FILE_SUFFIX = re.compile(r"\.(?:pt|pth|bin|safetensors|json|distcp|ckpt|txt|metadata)$")
_TRIALS_NAMED = re.compile(
    r"rials[_ ]dir['\"]?[ \t]*[:=][ \t]*(?:PosixPath\()?['\"]?([^\s'\"`,;()\[\]{}<>|?\x1b]+)")
"""A trials dir the log names, after its ``T``/``t``: SkyRL's HarborGenerator line (``Trials dir:
/p``), its config dump (``trials_dir: /p``), a Hydra override echoed by ``set -x``
(``++harbor_trial_config.trials_dir=/p``), a ``TrialConfig`` repr (``trials_dir=PosixPath('/p')``).
Starts on a literal so the search skips ahead; the letter before is checked by hand."""
_LOGGED_TRIALS = 4
"""Trials dirs taken from one log at most (the newest printed first)."""


def logged_checkpoint_dirs(text: str | None, bases: list[str], workdir: str | None = None,
                           command: str | None = None,
                           head: str | None = None) -> list[tuple[str, list[str]]]:
    """Checkpoint directories the log (and ``command``, the job's command line) names, as
    ``(base, components below it)``; one outside every base is ``(path, [])``, a root of its
    own.

    The log is the job owner's text: a path inside one of ``bases`` (the workdir and the
    configured roots) once normalised is entered below it; outside them only a path that
    needs no ``..`` is taken (see ``_place``); a printed step directory (or a file inside one)
    stands for the directory holding the steps. A relative path a save line prints
    (``_LOGGED_RELATIVE``) or a save key names (``_NAMED_KEY``) is taken from ``workdir``,
    where sbatch starts the job, as the completion check and the logged trials dirs take
    theirs. The command line is read for its save keys only. ``head``: a long log's first
    bytes (the collector's), read whole before ``text``'s last lines: a trainer that names
    its folder once, at start (torchtitan's ``Checkpointing active. Checkpoints will be
    loaded from and saved to /p``), says no more of it in a tail of thousands of steps."""
    found: list[tuple[str, list[str]]] = []
    clean = [os.path.normpath(b) for b in bases if b and b.startswith("/")]
    start = workdir if workdir and workdir.startswith("/") else None
    lines = [*_logged_lines(head, None), *_logged_lines(text)]
    if command:
        lines.insert(0, command[:_COMMAND_CHARS])
    for index in range(len(lines) - 1, -1, -1):
        if len(found) >= _LOGGED_DIRS:
            break
        line = lines[index]
        # (path, named by a save key): a root of its own outside the bases needs its key, or
        # a step directory in the printed path (a save line), not any path on a line that
        # says "checkpoint" (a warning's source file, the shards of the model it loads).
        paths = [(m.group(3), True) for m in _NAMED_KEY.finditer(line)
                 if m.group(2).strip() or line[max(0, m.start() - 2):m.start()] == "--"]
        if not (command and index == 0) and _LOGGED_LINE.search(line):
            saves = _SAVE_VERB.search(line) is not None
            paths += [(m.group(1), saves and _SAVED_TO.search(line, 0, m.start(1)) is not None)
                      for m in _LOGGED_PATH.finditer(line) if not _model_source(line, m)]
            paths += [(m.group(1), False) for m in _LOGGED_RELATIVE.finditer(line)
                      if not _model_source(line, m)]
        for raw, named in paths:
            place = _place(raw, clean, start, named)
            if place is not None and place not in found and len(found) < _LOGGED_DIRS:
                found.append(place)
    return found


_COMMAND_CHARS = 16384
"""Characters of the job's command line read for save keys (SLURM's ``Command=``)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LOCAL_PREFIX = "local:"
"""InternEvo's prefix of a folder on the local filesystem (``local:llm_ckpts``; its object
stores' are ``boto3:s3://...``, ``volc:...``, ``oss2:...``)."""


def _place(raw: str, bases: list[str], workdir: str | None,
           named: bool = False) -> tuple[str, list[str]] | None:
    """Where a printed path lies: ``(base, components)`` inside a base, ``(path, [])`` for a
    root of its own outside them (only a path a save key names, or one through a step
    directory), or ``None``. The path is the cluster's text: a relative one is taken from
    ``workdir`` (none: not used); one that needs ``..`` to leave the bases, one under ``~`` or
    in a variable (a shell would expand it; this reads it as it is), in an object store or
    holding a control character, is not used."""
    raw = raw.rstrip(".:")
    if raw.startswith(_LOCAL_PREFIX) and "://" not in raw:
        raw = raw[len(_LOCAL_PREFIX):]  # InternEvo's storage prefix for the local filesystem
    if (not raw or raw in _NOT_A_PATH or raw.startswith(("~", "$")) or "://" in raw
            or "\\" in raw or _CONTROL.search(raw)):
        return None
    if not raw.startswith("/"):
        if workdir is None:
            return None
        raw = os.path.join(workdir, raw)
    path = os.path.normpath(raw)
    target = _step_holder(path)
    place = _inside_base(target, bases)
    if place is not None:
        return place
    if ".." in raw.split("/") or target.count("/") < 2:
        return None  # climbs out with '..', or a top directory ('/', '/scratch') itself
    if not named and not any(_STEP_DIR.match(p) for p in path.split("/")):
        return None
    return target, []


def resumed_checkpoint_dirs(carried: list[str], text: str | None, bases: list[str],
                            workdir: str | None = None, command: str | None = None, *,
                            known: bool = False,
                            head: str | None = None) -> tuple[list[tuple[str, list[str]]], bool]:
    """:func:`logged_checkpoint_dirs` of a tracked read: the folders ``text`` (only the bytes
    appended since the last read) names, newest first, then the ones earlier reads found
    (``carried``, as the cursor holds them: newest first), then ``command``'s, at most
    ``_LOGGED_DIRS``; and whether every folder ``command`` names is among them. A carried
    folder is the cluster's text again: it is placed as a folder a save key names
    (``_place``: a root of its own found in a config dump or the command line, neither read
    again, stays one), whole: put back into a line of text, a folder under a workdir holding
    a blank was cut there, and its stump carried as a root of its own. ``known``: the
    carried folders were found with every one ``command`` names, against these bases
    (:func:`command_mark`); the command line is then not read again, unless a carried folder
    no longer places."""
    found = logged_checkpoint_dirs(text, bases, workdir, head=head)
    clean = [os.path.normpath(b) for b in bases if b and b.startswith("/")]
    start = workdir if workdir and workdir.startswith("/") else None
    later = [_place(d, clean, start, True) for d in carried]
    named = [] if known and None not in later else logged_checkpoint_dirs(
        None, bases, workdir, command)
    for place in [*later, *named]:
        if place is not None and place not in found and len(found) < _LOGGED_DIRS:
            found.append(place)
    return found, all(place in found for place in named)


def command_mark(command: str, bases: list[str], workdir: str | None) -> str:
    """What a cursor notes of the command line its folders hold every folder of (see
    :func:`resumed_checkpoint_dirs`): a digest of it and of what it is placed against."""
    facts = json.dumps([command[:_COMMAND_CHARS], bases, workdir])
    return hashlib.sha256(facts.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _model_source(line: str, match: Any) -> bool:
    """The path ``match`` found is given as the model to load (verl/SkyRL ``model.path``,
    HF/TRL ``model_name_or_path``, OpenRLHF ``--pretrain``): an init checkpoint, maybe another
    run's ``global_step_500``, not a folder this run saves to. A key naming a checkpoint, a
    save, a resume or an output dir (``ckpt_path``, ``resume_from_path``) is the run's own."""
    start = max(0, match.start(1) - 80)
    key = _MODEL_KEY.search(line, start, match.start(1))
    return (key is not None and not _OWN_KEY.search(key.group(1) or key.group(2))
            and not _SAVE_VERB.search(line, start, key.start()))  # 'Saved model: <dir>'


def _logged_lines(text: str | None, last: int | None = 5000) -> list[str]:
    """The lines among the ``last`` (None: all) that ``_LOGGED_LINE`` or ``_NAMED_KEY``
    matches, in order.

    ``_LOGGED_LINE`` ignores case, which leaves sre no literal to skip ahead on, so it (and
    ``_NAMED_KEY``) runs only on the lines a case-sensitive search of the ASCII-lowered UTF-8
    text meets: every match holds one of ``_LOGGED_GATE``'s words once ASCII letters are
    lowered, or one of the four non-ASCII characters that match an ASCII letter without case.
    ``splitlines`` leaves no ``\\n`` in a line, so a hit names its line and the search goes on
    after that line."""
    lines = (text or "").splitlines()
    if last is not None:
        lines = lines[-last:]
    skeleton = "\n".join(lines).encode("utf-8", "surrogatepass").translate(_ASCII_LOWER)
    hits: list[str] = []
    index, position = 0, 0
    found = _LOGGED_GATE.search(skeleton)
    while found is not None:
        index += skeleton.count(b"\n", position, found.start())
        if _LOGGED_LINE.search(lines[index]) or _NAMED_KEY.search(lines[index]):
            hits.append(lines[index])
        end = skeleton.find(b"\n", found.end())
        if end < 0:
            break
        index, position = index + 1, end + 1
        found = _LOGGED_GATE.search(skeleton, position)
    return hits


def _step_holder(path: str) -> str:
    """The directory that holds the step directories a printed path points into."""
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if _STEP_DIR.match(parts[i]):
            return "/".join(parts[:i]) or "/"
    return os.path.dirname(path) if _FILE_SUFFIX.search(path) else path


def logged_trials_dirs(text: str | None, workdir: str | None,
                       bases: list[str]) -> list[tuple[str, list[str]]]:
    """Trials dirs the log names (newest first), as ``(base, components below it)``.

    The log is the job owner's text: inside one of ``bases`` (the workdir and the configured
    roots) once normalised, a path is entered below its base component by component, never
    through a link; outside them it is a root of its own (``(path, [])``), which the guard
    opens only if the job's user could list it, reading only their own files; a relative one
    (Harbor's default ``trials``) is taken from the workdir, where sbatch starts the job; one
    under ``~``, in a variable or an object store, or holding a control character, is left
    alone."""
    found: list[tuple[str, list[str]]] = []
    clean = [os.path.normpath(b) for b in bases if b and b.startswith("/")]
    text = text or ""
    for match in reversed(list(_TRIALS_NAMED.finditer(text))):
        if len(found) >= _LOGGED_TRIALS:
            break
        if match.start() == 0 or text[match.start() - 1] not in "Tt":
            continue
        raw = match.group(1).rstrip(".:")
        if raw.startswith(("~", "$")) or "://" in raw or "\\" in raw or _CONTROL.search(raw):
            continue
        if not raw.startswith("/"):
            if not workdir or not workdir.startswith("/"):
                continue
            raw = os.path.join(workdir, raw)
        place = _inside_base(os.path.normpath(raw), clean)
        if place is None:
            # Outside the workdir and roots (a scratch dir; SkyRL's default is ~/trials): its
            # own root, opened as the guard opens a root (a directory the job's user could
            # list, nothing on /proc, /sys or /dev), only that user's own files read there.
            place = (os.path.normpath(raw), [])
        if place not in found:
            found.append(place)
    return found


def _inside_base(path: str, bases: list[str]) -> tuple[str, list[str]] | None:
    for base in sorted(bases, key=len, reverse=True):
        if path == base or path.startswith(base.rstrip("/") + "/"):
            rest = [p for p in path[len(base):].split("/") if p]
            if any(p in (".", "..") for p in rest):
                return None
            return base, rest
    return None
