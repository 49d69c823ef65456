"""A trial root that is itself a symbolic link (``{workdir}/jobs -> /scratch/$USER/jobs``, a
common way to keep Harbor's trees off a small home quota) is the job's tree.

Found replaying on the real SLURM: an eval whose workdir's ``jobs`` was a link to a scratch
directory of the same user read ``trial tree unreadable: .../jobs: a symbolic link: not
followed``, its Trials only from the log's progress row, no pass-rate, no exception, and its
stall judged on the log alone. The root is followed as the collector follows a workdir SLURM
holds as a link, and only when the job's user could list its target; nothing below the root
follows a link, and the guard still reads only the job's user's own files, so a link into
another user's tree counts none of theirs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from probes.harbor import summarize_trials
from probes.remote.guard import Guard
from probes.remote.trial_roots import collect_trials
from probes.slurm.assemble import trial_tree

JOB = (Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "jobs"
       / "2026-11-30__14-00-00")


def _linked(tmp_path: Path) -> tuple[Path, Path]:
    real = tmp_path / "scratch" / "harbor-jobs"
    shutil.copytree(JOB, real / JOB.name)
    link = tmp_path / "work" / "jobs"
    link.parent.mkdir()
    link.symlink_to(real)
    return real, link


def test_a_trial_root_that_is_a_link_to_the_users_tree_is_counted(tmp_path: Path) -> None:
    _, link = _linked(tmp_path)
    tree = trial_tree(collect_trials([str(link)]))
    assert tree is not None and tree.exists, tree
    assert summarize_trials(tree).trials == 24
    assert (tree.chunks_done, tree.chunks_total) == (1, 1)


def test_a_link_into_another_users_tree_counts_none_of_theirs(tmp_path: Path) -> None:
    """Near-miss: the target's files are another owner's (uid 65534): none is read."""
    real, link = _linked(tmp_path)
    for path in [real, *real.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    tree = trial_tree(collect_trials([str(link)], Guard(os.geteuid(), 30.0)))
    assert tree is None or (not tree.trials and not (tree.counts and tree.counts.trials))


def test_a_link_below_the_root_is_still_not_followed(tmp_path: Path) -> None:
    """Near-miss: a chunk dir that is a link (inside the root) is not entered."""
    real = tmp_path / "scratch" / "chunk"
    shutil.copytree(JOB, real)
    root = tmp_path / "work" / "jobs"
    root.mkdir(parents=True)
    (root / "chunk_000").symlink_to(real)
    tree = trial_tree(collect_trials([str(root)]))
    assert tree is None or not tree.trials
