"""A job whose files lie on a hung mount costs that job its reading, never the request's.

Found attacking the real SLURM as an unprivileged user: a job whose ``{workdir}/checkpoints``
was a mount that stopped answering (a hard NFS or Lustre mount whose server went away; here a
real FUSE mount, ``tests/probes/remote/hung_mount.py``) made ``jobtables sweep`` report the
whole cluster ``unreachable`` ("`python3` timed out after 30s"), with none of its other jobs,
every sweep: the collector's listing of that directory waited in the kernel where the guard's
SIGALRM deadline cannot reach (state D), so it answered nothing more, and each sweep left
three more such collector processes on the login node.

Here the shipped collector runs as a ``local = true`` cluster runs it, streaming, over three
jobs: the one in the middle has its checkpoint root on a hung mount.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from probes.config import SlurmCluster
from probes.remote.guard import Hung, deadline, supervised
from probes.remote.script import build_collector_script, build_rollouts_script
from probes.slurm.answer import AnswerReader, stream_answer
from probes.slurm.transport import LocalRunner
from tests.probes.remote.hung_mount import hung_mount

LOG = "".join(f"{{'loss': 1.1, 'grad_norm': 0.4, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n"
              for i in range(1, 9))


def _job(tmp: Path, key: str, roots: list[str]) -> dict[str, Any]:
    work = tmp / key
    work.mkdir()
    (work / "out.log").write_text(LOG)
    return {"id": key, "stdout": str(work / "out.log"), "workdir": str(work), "offset": 0,
            "checkpoint_roots": roots, "trial_roots": []}


async def test_a_hung_mount_fails_its_job_and_the_others_are_read(tmp_path: Path) -> None:
    """The job's tree on the hung mount is unreadable with a reason (its log, elsewhere, is
    read: tests/probes/remote/test_hung_tree_keeps_log.py); the jobs before and after it are
    read, the answer ends, and the command returns well within its timeout."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        request = {"tail_bytes": 1 << 16, "min_lines": 1, "read_timeout_s": 1.0,
                   "deadline_s": 40.0, "trial_budget_s": 5.0, "stream": True,
                   "jobs": [_job(tmp_path, "101", []), _job(tmp_path, "102", [str(mount)]),
                            _job(tmp_path, "103", [])]}
        runner = LocalRunner(SlurmCluster(name="hung", local=True, command_timeout_s=50))
        reader = AnswerReader()
        async with asyncio.timeout(45):
            await stream_answer(runner, build_collector_script(request), reader)
    assert reader.ended
    assert [reader.jobs[k]["log"]["status"] for k in ("101", "102", "103")] == \
        ["ok", "ok", "ok"]
    assert reader.jobs["103"]["log"]["text"] == LOG
    assert "no answer" in reader.jobs["102"]["checkpoints"]["errors"][str(mount)]


async def test_the_deep_probe_reader_says_which_root_hung_and_reads_the_rest(
        tmp_path: Path) -> None:
    """The deep probe's reader (``jobtables probe``) on a trials root that hangs: it answers,
    says the root gave no answer, and still reads a verl rollout dump beside it."""
    dump = tmp_path / "rollout_dump"
    dump.mkdir()
    (dump / "5.jsonl").write_text(json.dumps({"input": "2+2?", "output": "4", "score": 1.0,
                                              "step": 5}) + "\n")
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        request = {"trial_roots": [str(mount)], "dump_dirs": [str(dump)],
                   "read_timeout_s": 1.0, "deadline_s": 30.0}
        runner = LocalRunner(SlurmCluster(name="hung", local=True, command_timeout_s=50))
        async with asyncio.timeout(45):
            res = await runner.run(["python3", "-"], stdin=build_rollouts_script(request),
                                   check=False)
    answer = json.loads(res.stdout)
    assert any(s.startswith("trials: ") and "no answer" in s for s in answer["skipped"])
    assert [d["path"] for d in answer["dumps"]] == [str(dump)]
    assert answer["dumps"][0]["steps"]


def test_an_operation_past_its_time_in_a_reader_thread_fails_alone() -> None:
    """An operation that overruns its time while the thread still runs Python (a listing of
    a huge directory, slow but alive) is interrupted as the main thread's alarm would: that
    operation fails with Hung, and the read goes on with its next step."""
    def read() -> list[str]:
        said = []
        try:
            with deadline(0.3, "list /slow"):
                while True:  # a listing that would go on past its bound
                    time.sleep(0.001)
        except Hung as exc:
            said.append(str(exc))
        with deadline(5.0, "read /next"):
            said.append("next read")
        return said

    assert supervised(read, (), time.monotonic() + 30) == [
        "list /slow: no answer within 0.3s", "next read"]
