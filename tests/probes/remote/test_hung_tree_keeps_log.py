"""A job whose checkpoint or trial tree lies on a hung mount keeps its log.

Found after 495f73d: a job whose log sat on a working file system but whose
``{workdir}/checkpoints`` (or trials root) was a mount that stopped answering was given up
whole: ``fetch-failed``, its readable log's metrics lost with it. The log is read first and
kept; only the tree that gave no answer is said unreadable, with the reason. Here the shipped
collector runs as a ``local = true`` cluster runs it, on a real hung FUSE mount
(``tests/probes/remote/hung_mount.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from probes.config import SlurmCluster
from probes.remote.job_files import _keep, given_up
from probes.remote.script import build_collector_script
from probes.slurm.answer import AnswerReader, stream_answer
from probes.slurm.transport import LocalRunner
from tests.probes.remote.hung_mount import hung_mount

LOG = "".join(f"{{'loss': 1.1, 'grad_norm': 0.4, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n"
              for i in range(1, 9))


def _job(tmp: Path, key: str, ckpt: list[str], trials: list[str]) -> dict[str, Any]:
    work = tmp / key
    work.mkdir()
    (work / "out.log").write_text(LOG)
    return {"id": key, "stdout": str(work / "out.log"), "workdir": str(work), "offset": 0,
            "checkpoint_roots": ckpt, "trial_roots": trials}


async def _collect(tmp: Path, ckpt: list[str], trials: list[str]) -> AnswerReader:
    request = {"tail_bytes": 1 << 16, "min_lines": 1, "read_timeout_s": 1.0,
               "deadline_s": 40.0, "trial_budget_s": 5.0, "stream": True,
               "jobs": [_job(tmp, "201", ckpt, trials), _job(tmp, "202", [], [])]}
    runner = LocalRunner(SlurmCluster(name="hung", local=True, command_timeout_s=50))
    reader = AnswerReader()
    async with asyncio.timeout(45):
        await stream_answer(runner, build_collector_script(request), reader)
    return reader


@pytest.mark.parametrize("tree", ["checkpoints", "trials"])
async def test_a_hung_tree_keeps_the_jobs_log_and_says_the_tree_hung(
        tmp_path: Path, tree: str) -> None:
    """The log is read and sent; the tree on the hung mount is unreadable with the reason;
    the next job is read."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        roots = [str(mount)]
        reader = await _collect(tmp_path, roots if tree == "checkpoints" else [],
                                roots if tree == "trials" else [])
    assert reader.ended
    entry = reader.jobs["201"]
    assert entry["log"]["status"] == "ok"
    assert entry["log"]["text"] == LOG
    if tree == "checkpoints":
        why = entry["checkpoints"]["errors"][str(mount)]
    else:
        assert entry["trials"][str(mount)]["exists"] is False
        why = entry["trials"][str(mount)]["error"]
    assert "no answer" in why and "hung mount" in why
    assert reader.jobs["202"]["log"]["text"] == LOG


def test_only_the_root_that_hung_is_said_unreadable() -> None:
    """Of a job's roots, the one the stuck operation names is unreadable; the log stands."""
    kept: dict[str, Any] = {}
    _keep(kept, "checkpoints", {"log": {"status": "ok", "text": LOG}, "trials": {}},
          ["/w/checkpoints", "/w/ckpt", "/scratch/u/run"])
    entry = given_up({"id": "7", "stdout": "/w/out.log", "workdir": "/w"}, kept,
                     "open /w/ckpt: no answer within 5s (a read stuck in the kernel: a hung"
                     " mount?)")
    assert entry["log"]["text"] == LOG
    assert list(entry["checkpoints"]["errors"]) == ["/w/ckpt"]
    assert given_up({"id": "8"}, {}, "open /w/out.log: no answer")["log"]["status"] == "failed"
