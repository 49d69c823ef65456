"""A banked step is the job's own: step directories another user owns are not counted.

Replayed on the real SLURM: a jtuser RL job submitted with ``--chdir`` into a jobtables run's
workdir (readable by all) read ``banked_step`` 5 from jobtables' ``checkpoints/checkpoint-5``:
the guard checks the owner of every file it reads, but a step directory's name was taken
from any listing. A job's saves are written as its user, so only those count.
"""

from __future__ import annotations

import os
from pathlib import Path

from probes.remote.guard import Guard
from probes.remote.tree import collect_checkpoints


def _tree(tmp_path: Path) -> Path:
    workdir = tmp_path / "run"
    for name in ("checkpoints/checkpoint-5", "checkpoints/exports/global_step_9",
                 "output/checkpoint-7"):
        (workdir / name).mkdir(parents=True)
    return workdir


def _found(workdir: Path, uid: int) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    roots = [str(workdir / "checkpoints"), str(workdir / "output")]
    out = collect_checkpoints(roots, Guard(uid, 5.0, user="u"), memo=False)
    return out["listings"], out["exports"]


def test_the_owners_step_directories_are_listed(tmp_path: Path) -> None:
    """The job's user's own saves are found, exports apart."""
    workdir = _tree(tmp_path)
    listings, exports = _found(workdir, os.geteuid())
    assert listings == {str(workdir / "checkpoints"): ["checkpoint-5"],
                        str(workdir / "output"): ["checkpoint-7"]}
    assert exports == {str(workdir / "checkpoints"): ["global_step_9"]}


def test_another_users_step_directories_are_not(tmp_path: Path) -> None:
    """The same tree read for a job of another uid lists no step and no export."""
    listings, exports = _found(_tree(tmp_path), os.geteuid() + 4242)
    assert listings == {}
    assert not any(exports.values())
