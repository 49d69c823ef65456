"""Which cell of an SFT grid a job is: its name without the suffixes of restart-chain copies.

Policy (seed §SFT: "strip to the cell name, sort -u, then subtract running cells' own resume
backups"): a restart word (``-resume``, ``_restart2``, ``-retry``, ``.requeue``) always marks a
copy. A suffix that a copy and a cell's own token can share (``-r2`` / LoRA ``-r16``, ``-2`` /
``-seed-2``, ``.2``, ``-part3``) marks a copy only when the name without it is another SFT job
of the sweep (or a copy's cell): ``sft-q-lr1e5-r2`` beside ``sft-q-lr1e5`` is its copy, while
``sft-lora-r8`` / ``-r16`` / ``-r64`` are three cells. A job that waits on another SFT job of its
cluster (a SLURM dependency: the restart chain's afterany) as its next attempt (a restart word
added, a first ``-r2`` / ``-2`` added, or its number plus one) is that job's copy: the chain
``-r2`` running, ``-r3`` waiting on it, after the first job left the report. Another cell run
after one (``sft-g-lr2`` afterok ``sft-g-lr1``; a rank grid throttled with dependencies,
``sft-lora-r32`` after ``sft-lora-r16``) is no copy. Known limit: a seed grid throttled the same
way (``-seed-3`` after ``-seed-2``) reads as a chain, its numbers being consecutive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from report.chain import name_stem, strip_attempt
from report.models import JobReport

Key = tuple[str, str]
"""(cluster, job id)."""

_RESTART_WORD = re.compile(
    r"[-_.](?:re|retry|try|attempt|restart|resume|resumed|requeue|cont|continue)\d*$",
    re.IGNORECASE,
)


def cell_stems(jobs: Sequence[JobReport],
               waits_for: Mapping[Key, Sequence[str]] | None = None) -> list[str]:
    """Each job's cell name (lower case), told by the other jobs given (``waits_for``: the job
    ids each (cluster, job id) waits on)."""
    lowered = [job.name.strip().lower() for job in jobs]
    known = set(lowered) | {_without_words(name) for name in lowered}
    stems = [_stem(name, known) for name in lowered]
    if not waits_for:
        return stems
    index = {(job.cluster, job.job_id): at for at, job in enumerate(jobs)}
    resolved = list(stems)
    for at, job in enumerate(jobs):
        seen, current = {at}, at
        while True:  # up the chain to the first job that waits on none of these
            waiting = jobs[current]
            ahead = [index[(job.cluster, target)]
                     for target in waits_for.get((waiting.cluster, waiting.job_id), ())
                     if (job.cluster, target) in index
                     and _next_attempt(waiting.name, jobs[index[(job.cluster, target)]].name)]
            if not ahead or ahead[0] in seen:
                break
            current = ahead[0]
            seen.add(current)
        resolved[at] = stems[current]
    return resolved


_NUMBERED = re.compile(r"^(?P<base>.+?)(?P<mark>[-_.](?:r|part)?)(?P<n>\d+)$", re.IGNORECASE)
"""A name ending in a number a copy and a cell's own token can share (``-r3``, ``-2``, ``.2``)."""


def _next_attempt(name: str, ahead: str) -> bool:
    """Whether ``name``, waiting on ``ahead``, is its restart-chain copy: the same name, a
    restart word added (``-resume``), ``ahead`` with a first number added (``sft-x`` ->
    ``sft-x-r2``), or ``ahead``'s number plus one under the same mark (``-r2`` -> ``-r3``).
    A cell run after another of a rank or seed grid (``sft-lora-r32`` after ``sft-lora-r16``,
    throttled with a dependency) is no copy of it."""
    name, ahead = name.strip().lower(), ahead.strip().lower()
    if name == ahead:
        return True
    if name_stem(name) != name_stem(ahead):
        return False
    plain, before = _without_words(name), _without_words(ahead)
    theirs = _NUMBERED.match(before)
    if plain != name:  # ends in a restart word: a copy of the run it names
        return plain == before or (theirs is not None and theirs["base"] == plain)
    mine = _NUMBERED.match(name)
    if mine is None:
        return theirs is not None and theirs["base"] == name
    if mine["base"] == before:
        return True
    return (theirs is not None and (theirs["base"], theirs["mark"]) == (mine["base"], mine["mark"])
            and int(mine["n"]) == int(theirs["n"]) + 1)


def _without_words(name: str) -> str:
    """``name`` without its trailing restart words (``-resume``, ``_restart2``)."""
    while True:
        shorter = _RESTART_WORD.sub("", name)
        if shorter == name or not shorter:
            return name
        name = shorter


def _stem(name: str, known: set[str]) -> str:
    """``name`` without each trailing suffix that is a restart word or leaves a known name."""
    while True:
        shorter = strip_attempt(name)
        if shorter == name or not shorter:
            return name
        if _RESTART_WORD.search(name) is None and shorter not in known:
            return name
        name = shorter
