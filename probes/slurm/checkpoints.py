"""Banked checkpoint steps from the collector's bounded search of the checkpoint roots.

Policy (seed: "banked steps come from durable evidence, not a progress line"): a step is
banked when a step directory exists under any root the launcher may have written to, in the
nested layouts trainers really write (searched by ``probes.remote.tree`` to a bounded depth,
plus the checkpoint directories the log prints): verl
``checkpoints/<project>/<experiment>/global_step_N``, SkyRL ``global_step_N``, Hugging Face
``checkpoint-N``, DeepSpeed ``global_stepN``, Megatron ``iter_0000N``, ``step_N``, NeMo's
Lightning saves ``...-step=N-...`` (not while NeMo's ``<save>-unfinished`` marker lies beside
them); temporary
names (``global_step_12.tmp``, ``checkpoint-5-tmp``) are not. The trackers are written after
the save completes (verl's and Megatron's ``latest_checkpointed_iteration.txt``: the number;
DeepSpeed's ``latest``: the tag ``global_stepN``; SkyRL's ``latest_ckpt_global_step.txt``),
so in a directory that has one, a step directory above it is a save still in flight and is
not banked (verl skips the tracker under ``async_save``; a stale tracker from an earlier
synchronous run would then hold the banked step back, which errs on the safe side for
salvage; Megatron's ``release`` names no step and holds nothing back). Hugging Face writes
no tracker, but ``trainer_state.json`` comes last in each ``checkpoint-N``: the collector
leaves out those above the newest holding it
(``probes.remote.checkpoint_steps._finished_hf``). Exports
(``exports/global_step_N``) are reported separately and never bank a step: they mean
completion only for a finished run, since a running job also writes periodic saves there.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from probes.models import CheckpointListing
from probes.remote.guard import Guard

# Re-exported (the template rules live with the path code shipped to login nodes); the
# redundant alias is how mypy --strict is told the re-export is meant.
from probes.remote.stdio_pattern import expand_roots as expand_roots  # noqa: PLC0414
from probes.remote.tree import collect_checkpoints

_STEP_NAME = re.compile(
    r"global_step_?(?P<a>\d{1,12})|checkpoint-(?P<b>\d{1,12})|step_(?P<c>\d{1,12})"
    r"|iter_(?P<d>\d{1,12})(?:\.pth)?|(?:.{0,200}[-_])?step=(?P<e>\d{1,12})(?:[-_.].{0,200})?"
    r"|(?:(?:ckpt|snapshot)-)?step-(?P<f>\d{1,12})|ep\d{1,9}-ba(?P<g>\d{1,12})(?:-rank0\.pt)?"
    r"|(?P<h>\d{1,12})"
)
_MARKER_TEXT = re.compile(r"\s*(?:global_step_?|iter_)?(\d{1,12})(?:\.pth)?\s*")


def step_of(name: str) -> int | None:
    """The step a checkpoint directory name stands for, or ``None`` (temp names included)."""
    match = _STEP_NAME.fullmatch(name)
    if match is None:
        return None
    return int(next(g for g in match.groups() if g is not None))


def steps_from_names(names: Iterable[str]) -> list[int]:
    """Sorted distinct steps among directory entry names."""
    return sorted({s for n in names if (s := step_of(n)) is not None})


def marker_step(text: str | None) -> int | None:
    """The step a ``latest_*`` marker file names, or ``None`` when it holds something else.
    mmengine's ``last_checkpoint`` holds its newest save's path: its last component counts
    (``iter_500.pth``; an ``epoch_1.pth`` names no step)."""
    text = (text or "").strip()
    match = _MARKER_TEXT.fullmatch(text.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def build_listing(
    listings: Mapping[str, Sequence[str]],
    *,
    export_listings: Mapping[str, Sequence[str]] | None = None,
    latest_markers: Mapping[str, str] | None = None,
    logged: Sequence[str] | None = None,
    unreadable: Sequence[str] = (),
    written: Mapping[str, Any] | None = None,
) -> CheckpointListing:
    """Combine per-root listings (root -> entry names) into one ``CheckpointListing``.

    ``logged`` are the save folders the run's log names: when one of them holds step
    directories, only those folders bank steps. Runs launched from one repo share a default
    root (verl's ``checkpoints/<project>/<experiment>``), and another experiment's steps there
    are not this run's; a run whose log names no folder (or only empty ones) is read from
    every root, as the rulebook's "search every location" asks."""
    own = {os.path.normpath(d) for d in logged or () if isinstance(d, str)}
    mine = {root: names for root, names in listings.items()
            if os.path.normpath(root) in own and steps_from_names(names)}
    steps: set[int] = set()
    dirs: list[tuple[str, tuple[int, ...]]] = []
    for root, names in (mine or listings).items():
        found = steps_from_names(names)
        marker = marker_step((latest_markers or {}).get(root))
        kept = sorted(s for s in found if marker is None or s <= marker)
        steps.update(kept)
        if kept:
            dirs.append((root, tuple(kept)))
    exports = {s for names in (export_listings or {}).values() for s in steps_from_names(names)}
    return CheckpointListing(
        roots=tuple(listings),
        steps=tuple(sorted(steps)),
        export_steps=tuple(sorted(exports)),
        unreadable=tuple(unreadable),
        dirs=tuple(dirs),
        logged=bool(mine),
        written=_written(written),
    )


def _written(raw: Mapping[str, Any] | None) -> tuple[tuple[int, datetime], ...]:
    """Step -> its newest directory mtime, from the collector's ``{dir: {name: mtime}}``
    maps (malformed entries dropped)."""
    newest: dict[int, float] = {}
    for names in (raw or {}).values():
        if not isinstance(names, Mapping):
            continue
        for name, mtime in names.items():
            step = step_of(name) if isinstance(name, str) else None
            if step is None or isinstance(mtime, bool) or not isinstance(
                    mtime, int | float) or not math.isfinite(mtime) or abs(mtime) > 1e11:
                continue
            newest[step] = max(newest.get(step, mtime), mtime)
    return tuple((step, datetime.fromtimestamp(at, UTC)) for step, at in sorted(newest.items()))


UNREADABLE_KEPT = 4
"""Unreadable directories named per job at most (the first ones the search met)."""
_ERRNO = re.compile(r"^\[Errno \d+\] (?P<why>[^:]*)(?::\s*'.*')?$", re.DOTALL)


def unreadable_dirs(errors: Mapping[str, object]) -> list[str]:
    """``<directory>: <why>`` for the collector's search errors (``probes.remote.tree``'s
    ``errors``) that say a directory could not be read; a search cut at its visit cap is no
    unreadable directory. ``os.open``'s ``[Errno 13] Permission denied: '<path>'`` is told as
    ``Permission denied``; the guard's refusals already start with their path."""
    out: list[str] = []
    for path, raw in errors.items():
        if not isinstance(path, str) or not isinstance(raw, str) or "search stopped" in raw:
            continue
        match = _ERRNO.match(raw)
        why = match.group("why") if match else raw
        if why.startswith(path + ":"):
            why = why[len(path) + 1:].strip()
        out.append(f"{path[:200]}: {why[:200]}")
        if len(out) >= UNREADABLE_KEPT:
            break
    return out


def read_checkpoints_local(roots: Sequence[str]) -> CheckpointListing:
    """The collector's own search of ``roots`` (same depth, guard and rules), run in process
    on files the caller owns; missing roots are fine."""
    raw = collect_checkpoints(list(roots), Guard(os.geteuid(), 5.0), memo=False)
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports") or None,
                         latest_markers=raw.get("markers") or None, logged=raw.get("logged"))
