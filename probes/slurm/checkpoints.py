"""Banked checkpoint steps from directory listings of the configured checkpoint roots.

Policy (seed: "banked steps come from durable evidence, not a progress line"): a step is
banked when a ``global_step_N`` (SkyRL, verl, DeepSpeed ``global_stepN``), ``checkpoint-N``
(Hugging Face), ``step_N`` or ``iter_NNNNNNN`` (Megatron) directory exists under any root the
launcher may have written to; temporary names (``global_step_12.tmp``, ``checkpoint-5-tmp``)
are not. SkyRL's ``latest_ckpt_global_step.txt`` and verl's
``latest_checkpointed_iteration.txt`` are written after the save completes, so in a root
that has one, a step directory above the marker is a save still in flight and is not banked
(verl skips the marker under ``async_save``; a stale marker from an earlier synchronous run
would then hold the banked step back, which errs on the safe side for salvage). Exports
(``exports/global_step_N``) are reported separately: they mean completion only for a
finished run. Listings are single-level (one ``os.scandir`` per root), never recursive.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

from probes.models import CheckpointListing

# Re-exported (the template rules live with the path code shipped to login nodes); the
# redundant alias is how mypy --strict is told the re-export is meant.
from probes.remote.stdio_pattern import expand_roots as expand_roots  # noqa: PLC0414

_STEP_NAME = re.compile(
    r"global_step_?(?P<a>\d{1,12})|checkpoint-(?P<b>\d{1,12})|step_(?P<c>\d{1,12})"
    r"|iter_(?P<d>\d{1,12})"
)
_MARKER_FILES = ("latest_ckpt_global_step.txt", "latest_checkpointed_iteration.txt")
_MARKER_TEXT = re.compile(r"\s*(?:global_step_)?(\d{1,12})\s*")
_MARKER_BYTES = 64


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
    """The step a ``latest_*`` marker file names, or ``None`` when it holds something else."""
    match = _MARKER_TEXT.fullmatch(text or "")
    return int(match.group(1)) if match else None


def build_listing(
    listings: Mapping[str, Sequence[str]],
    *,
    export_listings: Mapping[str, Sequence[str]] | None = None,
    latest_markers: Mapping[str, str] | None = None,
) -> CheckpointListing:
    """Combine per-root listings (root -> entry names) into one ``CheckpointListing``."""
    steps: set[int] = set()
    for root, names in listings.items():
        found = steps_from_names(names)
        marker = marker_step((latest_markers or {}).get(root))
        steps.update(s for s in found if marker is None or s <= marker)
    exports = {s for names in (export_listings or {}).values() for s in steps_from_names(names)}
    return CheckpointListing(
        roots=tuple(listings),
        steps=tuple(sorted(steps)),
        export_steps=tuple(sorted(exports)),
    )


def _names(path: str) -> list[str] | None:
    """One listing; ``None`` when the directory is absent or unreadable (no evidence there)."""
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries]
    except OSError:
        return None


def _marker(root: str, names: Sequence[str]) -> str | None:
    for marker in _MARKER_FILES:
        if marker in names:
            try:
                with open(os.path.join(root, marker), encoding="utf-8", errors="replace") as fh:
                    return fh.read(_MARKER_BYTES)
            except OSError:
                return None
    return None


def read_checkpoints_local(roots: Sequence[str]) -> CheckpointListing:
    """List each root once (plus its ``exports/`` child or sibling); missing roots are fine."""
    listings: dict[str, list[str]] = {}
    exports: dict[str, list[str]] = {}
    markers: dict[str, str] = {}
    for root in roots:
        names = _names(root)
        if names is None:
            continue
        listings[root] = names
        if (text := _marker(root, names)) is not None:
            markers[root] = text
        # SkyRL's defaults put exports beside the checkpoints (~/ckpts, ~/exports); others nest.
        child = os.path.join(root, "exports") if "exports" in names else None
        sibling = os.path.join(os.path.dirname(os.path.normpath(root)), "exports")
        for candidate in (child, sibling):
            found = _names(candidate) if candidate else None
            if found is not None:
                exports.setdefault(root, []).extend(found)
    return build_listing(listings, export_listings=exports, latest_markers=markers)
