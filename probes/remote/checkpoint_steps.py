"""Which directories of a checkpoint tree are a run's saved steps, and which of those finished.

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped inside the
collector script, see ``probes.remote.script``). A step directory is named as a known trainer
names its saves (``_STEP_DIR``); it counts when the job's user owns it (another owner's in a
folder the run names, ``_owned``) and when nothing says it is still being written: a Hugging
Face ``checkpoint-N`` above the newest holding ``trainer_state.json``, a torchtitan DCP
``step-N`` without its ``.metadata``, a NeMo save beside its ``-unfinished`` marker. Every
stat runs under the guard's deadline.
"""

from __future__ import annotations

import contextlib
import os
import re

# In-process these are imported; when shipped, their sources are prepended to the script and
# each import line below is replaced by ``pass`` (probes.remote.script).
with contextlib.suppress(ImportError):
    from probes.remote.guard import Guard, deadline

_STEP_DIR = re.compile(
    r"^(global_step_?\d+|checkpoint-\d+|iter_\d+(?:\.pth)?|step[_-]\d+|(?:ckpt|snapshot)-step-\d+"
    r"|(?:.*[-_])?step=\d+(?:[-_.].*)?|ep\d+-ba\d+)$")
"""Step directory names: verl/SkyRL, HF, DeepSpeed, Megatron, NeMo-RL/prime-rl, torchtitan's
``step-N``, Lightning's (NeMo's) ``{...}-step={step}-{...}`` saves
(``model_name=0--val_loss=0.00-step=49-...-last``), Composer's sharded ``ep{E}-ba{B}``, an
mmengine runner's DeepSpeed save (XTuner's ``iter_{N}.pth`` directory) and XTuner v1's
``ckpt-step-{N}`` and ``snapshot-step-{N}``."""
_STEP_FILE = re.compile(r"^(?:ep\d{1,9}-ba\d{1,12}-rank0\.pt|iter_\d{1,12}\.pth)$")
"""A save that is a file: Composer's (``save_filename``'s default
``ep{epoch}-ba{batch}-rank{rank}.pt``, not sharded: rank 0's holds the whole state; other
ranks' are parts of it) and an mmengine runner's by iterations (``CheckpointHook``'s
``iter_{N}.pth``, XTuner's)."""
_UNFINISHED = "-unfinished"
"""NeMo's marker file beside a save still being written (``UNFINISHED_CHECKPOINT_SUFFIX``)."""
_MARKERS = ("latest_ckpt_global_step.txt", "latest_checkpointed_iteration.txt", "latest",
            "last_checkpoint")
"""The trackers a trainer writes once a save is done: SkyRL's, verl's and Megatron's,
DeepSpeed's, and an mmengine runner's (``CheckpointHook``: the path of its newest save)."""
MARKER_BYTES = 4096
"""A tracker's bytes read: a step, a tag, or (mmengine's) an absolute path."""


def _owned(fd: int, path: str, names: list[str], guard: Guard, logged: bool = False) -> list[str]:
    """The step directories of ``names`` (in the open directory ``fd``) the job's user owns.

    A job's saves are its user's: a step directory of another user's tree (a job run with
    ``--chdir`` into a teammate's workdir) is not this job's banked step. But the owner the
    login node sees is not always the uid that wrote (an object-store FUSE mount owns every
    file as its own uid; a launcher's service account; a chain attempt a teammate submitted):
    in a folder the run's log names as its save folder, or a configured root specific to the
    run (``logged``), another owner's steps count when none there is the job user's. The
    stats run under the guard's deadline (a hung NFS ``getattr`` is interrupted like a hung
    listing)."""
    if guard.uid is None or not names:
        return names
    owned = []
    with deadline(guard._seconds(), f"stat in {path}"):
        for name in names:
            try:
                if os.stat(name, dir_fd=fd, follow_symlinks=False).st_uid == guard.uid:
                    owned.append(name)
            except OSError:
                continue
    if owned or not logged:
        return owned
    # Another owner's steps: only where the job's user could list them too (a workdir that
    # is a symlink into a teammate's private tree is no window onto it).
    return names if guard.may_list(fd, path) else []


def _mtimes(fd: int, path: str, names: list[str], guard: Guard) -> dict[str, float]:
    """Each step directory's mtime (its entries' last change: the save's writing), under the
    guard's deadline: a save written before the job started is an earlier run's, which the
    completion check does not take for this run's getting to its total."""
    found: dict[str, float] = {}
    if not names:
        return found
    with deadline(guard._seconds(), f"stat in {path}"):
        for name in names:
            try:
                mtime = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime
            except OSError:
                continue
            if mtime >= MTIME_KNOWN:
                found[name] = mtime
    return found


MTIME_KNOWN = 946684800.0
"""2000-01-01 UTC: an earlier mtime is none (an object-store FUSE mount reports the epoch for
what it does not track), not a write long before the job started."""


_HF_STEP = re.compile(r"^checkpoint-(\d+)$")
HF_STATE = "trainer_state.json"
HF_ARGS = "training_args.bin"
_HF_CHECKS = 8
"""Newest ``checkpoint-N`` directories looked into for their ``trainer_state.json``."""


def _finished_hf(fd: int, path: str, names: list[str], guard: Guard,
                 seen: list[str] | None = None) -> list[str]:
    """``names`` without Hugging Face saves still in flight or cut off: the ``checkpoint-N``
    directories above the newest one holding its ``trainer_state.json`` (transformers'
    ``Trainer._save_checkpoint`` writes it after the weights, optimizer and RNG state, and a
    resume reads the step from it alone). With no such save among the newest few, only those
    holding the Trainer's ``training_args.bin`` (written right after the weights) are the
    Trainer's, cut off; any other layout keeps its steps (two stats per directory looked at;
    none is listed). The directories looked into are added to ``seen``."""
    hf = sorted(((int(m.group(1)), n) for n in names for m in [_HF_STEP.match(n)] if m),
                reverse=True)
    unfinished: list[str] = []
    unknown: list[str] = []
    with deadline(guard._seconds(), f"stat in {path}"):
        for _, name in hf[:_HF_CHECKS]:
            if seen is not None:
                seen.append(name)
            if _holds(fd, name, HF_STATE):
                return [n for n in names if n not in unfinished and n not in unknown]
            (unfinished if _holds(fd, name, HF_ARGS) else unknown).append(name)
    return [n for n in names if n not in unfinished]


_DCP_STEP = re.compile(r"^(?:(ckpt|snapshot)-)?step-(\d+)$")
_DCP_DONE = (".metadata", "model.safetensors.index.json", "metadata.json", "train_state.json")
"""What a finished ``step-N`` save holds: DCP writes ``.metadata`` once every shard is
written (torchtitan's own resume only takes a ``step-N`` holding it); a last save in HF format
(``last_save_in_hf``) writes its safetensors index; Levanter writes ``metadata.json`` in its
commit callback, once every array is written (its resume takes only a directory holding it);
XTuner v1 writes ``train_state.json`` after its DCP ``model/`` and ``optimizer/``."""
_DCP_SHARD = "__0_0.distcp"
"""Rank 0's first shard file (DCP's ``__{rank}_{i}.distcp``): a ``step-N`` directory holding
it is a distributed checkpoint; one without it is another tool's save (LitGPT's
``step-00001000/lit_model.pth``), finished when it is there."""
_XTUNER_PART = "model"
"""XTuner v1's DCP model directory in a ``ckpt-step-N``, written first."""
_LEVANTER_LEAF = "training_key"
"""A Levanter save's ``TrainerState.training_key`` array (each saveable leaf is a tensorstore
array under its key path): a ``step-N`` holding it is Levanter's, in flight until its
``metadata.json`` is written."""


def _finished_dcp(fd: int, path: str, names: list[str], guard: Guard,
                  seen: list[str] | None = None) -> list[str]:
    """``names`` without torchtitan, Levanter or XTuner v1 saves still in flight: the
    ``step-N`` directories holding DCP shards or Levanter's arrays (XTuner v1's ``ckpt-step-N``
    its ``model``) but not yet what a finished save holds (``_DCP_DONE``), above the newest
    finished one (an async save of the newest step is written while training goes on; the
    ones below it were finished before it started). The newest ``_HF_CHECKS`` are looked at;
    older ones are kept (six stats each at most).
    The directories looked into are added to ``seen``."""
    dcp = sorted(((int(m.group(2)), bool(m.group(1)), n) for n in names
                  for m in [_DCP_STEP.match(n)] if m), reverse=True)
    unfinished: list[str] = []
    with deadline(guard._seconds(), f"stat in {path}"):
        for _, xtuner, name in dcp[:_HF_CHECKS]:
            if seen is not None:
                seen.append(name)
            parts = (_XTUNER_PART,) if xtuner else (_DCP_SHARD, _LEVANTER_LEAF)
            if any(_holds(fd, name, done) for done in _DCP_DONE) or not any(
                    _holds(fd, name, part) for part in parts):
                break
            unfinished.append(name)
    return [n for n in names if n not in unfinished]


_NUMBERED = re.compile(r"^\d{1,12}$")


def numbered_saves(fd: int, path: str, names: list[str], guard: Guard,
                   seen: list[str] | None = None) -> list[str]:
    """InternEvo's finished saves among the directories ``names``: ``{save_ckpt_folder}/{N}``
    holding ``{N}.step``, which its ``save_checkpoint`` writes last (its resume takes only a
    directory holding it). A numbered directory without it (a save in flight, a job id's or a
    seed's directory) is none. The newest ``_HF_CHECKS`` numbers are looked into (one stat
    each) and added to ``seen``."""
    numbered = sorted(((int(n), n) for n in names if _NUMBERED.match(n)), reverse=True)
    found: list[str] = []
    with deadline(guard._seconds(), f"stat in {path}"):
        for _, name in numbered[:_HF_CHECKS]:
            if seen is not None:
                seen.append(name)
            if _holds(fd, name, name + ".step"):
                found.append(name)
    return found


def _holds(fd: int, directory: str, name: str) -> bool:
    try:
        os.stat(os.path.join(directory, name), dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _unfinished_marker(name: str) -> str:
    """The name of NeMo's in-flight marker for the save ``name`` (its
    ``format_checkpoint_unfinished_marker_path``: ``.ckpt`` and ``-EMA`` dropped)."""
    for suffix in (".nemo", ".ckpt", "-EMA"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return name + _UNFINISHED
