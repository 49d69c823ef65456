"""A save folder the run's own log names keeps its steps whoever the file system says owns them.

41ac31e counts only step directories the job's user owns (a job run with ``--chdir`` into a
teammate's workdir banks none of theirs). But the owner the login node sees is not always the
uid that wrote: checkpoints on an object-store FUSE mount (gcsfuse, s3fs, blobfuse: every
file owned by the mount's uid), written by a launcher's service account, or left by the chain
attempt a teammate submitted. There the run's log still names its folder (verl's
``local_global_step_folder: <dir>``), and the banked step was lost: banked_step null, and a
running run's Trend read "No durable checkpoint on disk ... banking nothing". In a folder the
log names, another owner's steps count when none there is the job user's; elsewhere, and
beside the user's own saves, only the user's count as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.remote.guard import Guard
from probes.remote.tree import collect_checkpoints

OTHER = os.geteuid() + 4242  # the job's uid as the login node sees it; the tree is not its


@pytest.fixture
def tmp_path(reachable_tmp: Path) -> Path:
    """The trees below are reachable by the job's user (OTHER), as a shared mount is."""
    return reachable_tmp


def _verl(workdir: Path, *experiments: str) -> None:
    for exp in experiments:
        for step in (10, 20):
            (workdir / "checkpoints" / "gsm8k" / exp / f"global_step_{step}").mkdir(parents=True)


def _collect(workdir: Path, log: str, uid: int) -> dict[str, list[str]]:
    roots = [str(workdir / "checkpoints")]
    out = collect_checkpoints(roots, Guard(uid, 5.0, user="u"), log, str(workdir), memo=False)
    return dict(out["listings"])


def test_the_logged_folder_banks_under_another_owner(tmp_path: Path) -> None:
    """The folder the log names: its steps count though the mount says another uid owns them."""
    _verl(tmp_path, "qwen7b-exp")
    folder = tmp_path / "checkpoints" / "gsm8k" / "qwen7b-exp"
    log = f"local_global_step_folder: {folder}/global_step_20\n"
    assert _collect(tmp_path, log, OTHER) == {str(folder): ["global_step_10", "global_step_20"]}


def test_an_unlogged_folder_of_another_owner_still_banks_nothing(tmp_path: Path) -> None:
    """Beside it, another experiment's folder the log does not name stays out (41ac31e)."""
    _verl(tmp_path, "qwen7b-exp", "llama8b-other")
    folder = tmp_path / "checkpoints" / "gsm8k" / "qwen7b-exp"
    log = f"local_global_step_folder: {folder}/global_step_20\n"
    assert list(_collect(tmp_path, log, OTHER)) == [str(folder)]
    assert _collect(tmp_path, "step:3 - reward:0.2\n", OTHER) == {}


def test_beside_the_users_own_saves_only_those_count(tmp_path: Path) -> None:
    """A logged folder shared with another user: the job user's saves alone bank."""
    if os.geteuid() != 0:
        pytest.fail("needs root to give a directory to another uid (run the suite as root)")
    _verl(tmp_path, "qwen7b-exp")
    folder = tmp_path / "checkpoints" / "gsm8k" / "qwen7b-exp"
    os.chown(folder / "global_step_10", OTHER, -1)
    os.chown(folder / "global_step_20", OTHER + 1, -1)
    log = f"local_global_step_folder: {folder}/global_step_10\n"
    assert _collect(tmp_path, log, OTHER) == {str(folder): ["global_step_10"]}



def _teammates_tree(tmp_path: Path, mode: int) -> Path:
    """A verl save tree under ``tmp_path/teammate`` owned by another uid, its root ``mode``."""
    private = tmp_path / "teammate"
    _verl(private, "qwen7b-exp")
    for path in [private, *private.rglob("*")]:
        os.chown(path, OTHER + 1, OTHER + 1)
    os.chmod(private, mode)
    return private

def test_a_logged_folder_the_job_user_cannot_reach_banks_nothing(tmp_path: Path) -> None:
    """A workdir symlinked into a teammate's private (0700) tree, its log naming a save
    folder there: the bot's account can list it, the job's user could not, so no step of it
    is reported (a jtuser job read a jobtables run's banked_step 777 on the real SLURM)."""
    if os.geteuid() != 0:
        pytest.fail("needs root to give a directory to another uid (run the suite as root)")
    private = _teammates_tree(tmp_path, 0o700)
    workdir = tmp_path / "job"
    workdir.symlink_to(private)
    folder = workdir / "checkpoints" / "gsm8k" / "qwen7b-exp"
    log = f"local_global_step_folder: {folder}/global_step_20\n"
    assert _collect(workdir, log, OTHER) == {}
    os.chmod(private, 0o755)  # the same tree open to all: the teammate's mount, shared
    assert _collect(workdir, log, OTHER) == {str(folder): ["global_step_10", "global_step_20"]}


def _acl(path: Path, *entries: tuple[int, int, int]) -> None:
    """Set the POSIX access ACL of ``path`` (``setfacl``'s xattr: version 2, then per entry
    tag, permission bits, qualifier; sorted by tag, as the kernel requires)."""
    import struct

    none = 0xFFFFFFFF
    blob = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, none if qualifier is None else qualifier)
        for tag, perm, qualifier in entries)
    os.setxattr(path, "system.posix_acl_access", blob)


USER_OBJ, USER, GROUP_OBJ, MASK, OTHERS = 0x01, 0x02, 0x04, 0x10, 0x20


def test_a_logged_folder_shared_or_closed_by_an_acl_is_judged_by_it(tmp_path: Path) -> None:
    """A teammate's 0750 tree shared with the job's user by an ACL (``setfacl -m u:bob:rx``,
    common on project storage) is one the job's user can list: its steps count. The same
    tree open to all by its mode but closed to that user by an ACL entry is not."""
    if os.geteuid() != 0:
        pytest.fail("needs root to give a directory to another uid (run the suite as root)")
    private = _teammates_tree(tmp_path, 0o750)
    _acl(private, (USER_OBJ, 7, None), (USER, 5, OTHER), (GROUP_OBJ, 5, None), (MASK, 5, None),
         (OTHERS, 0, None))
    folder = private / "checkpoints" / "gsm8k" / "qwen7b-exp"
    log = f"local_global_step_folder: {folder}/global_step_20\n"
    assert _collect(private, log, OTHER) == {str(folder): ["global_step_10", "global_step_20"]}
    _acl(private, (USER_OBJ, 7, None), (USER, 0, OTHER), (GROUP_OBJ, 5, None), (MASK, 5, None),
         (OTHERS, 5, None))
    assert _collect(private, log, OTHER) == {}
