"""A directory a job's log names outside its workdir is read only if the job's user could list
it. The log is the job owner's text: a trials dir it names outside the workdir and roots
(717c4e1), or a rollout dump dir (b5a2542), is a root of its own, and the guard reads only
that user's own files there; but the probe account may reach a tree the job's user cannot (a
teammate's 0700 home), and what is listed there is not the job's to report
(``Guard.may_list``). Before, a root that was no link was opened with no such check: a log
naming ``/home/alice/private/trials`` had it listed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.remote import collector
from probes.remote.rollouts import collect_rollouts
from tests.probes.remote.test_checkpoint_root_symlink import _jtuser
from tests.probes.remote.test_rollouts import dumps_module
from tests.probes.test_logged_trials_dir import SKYRL, _config_dump, _counted, _request, _trials


def _chown_tree(top: Path, uid: int) -> None:
    for path in [top, *top.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)


@pytest.mark.parametrize(("mode", "counted"), [(0o700, None), (0o755, 3)])
def test_a_logged_trials_dir_the_jobs_user_cannot_reach_is_not_read(
        reachable_tmp: Path, mode: int, counted: int | None) -> None:
    """The trials sit in a directory of another owner (uid 65534): private, the job's user
    could not reach them and nothing is counted; open (the near miss), they are counted."""
    uid = _jtuser()
    work = reachable_tmp / "run"
    work.mkdir()
    private = reachable_tmp / "teammate"
    _trials(private / "trials", 3)
    _chown_tree(private / "trials", uid)  # even the user's own files, out of their reach
    os.chown(private, 65534, 65534)
    os.chmod(private, mode)
    request = _request(work, _config_dump(str(private / "trials")) + SKYRL, user="jtuser")
    _chown_tree(work, uid)
    answer = collector.collect(request)
    assert _counted(answer).get(str(private / "trials")) == counted, answer["jobs"]["7001"]


@pytest.mark.parametrize(("mode", "read"), [(0o700, False), (0o755, True)])
def test_a_dump_dir_the_jobs_user_cannot_reach_is_not_read(reachable_tmp: Path, mode: int,
                                                            read: bool) -> None:
    """The deep probe's reader, a verl dump dir the log names (b5a2542) in another owner's
    directory: private, not listed (said in ``skipped``); open (the near miss), read."""
    uid = _jtuser()
    private = reachable_tmp / "teammate"
    dumps_module().write_verl_dump(str(private / "rollouts"), 2, ["q"], ["an answer"], [1.0])
    _chown_tree(private, uid)
    os.chown(private, 65534, 65534)
    os.chmod(private, mode)
    answer = collect_rollouts({"dump_dirs": [str(private / "rollouts")], "owner": "jtuser"})
    outputs = [s["output"] for d in answer["dumps"] for st in d["steps"] for s in st["samples"]]
    assert (outputs == ["an answer"]) is read, answer
    if not read:
        assert any("cannot list" in s for s in answer["skipped"]), answer["skipped"]
