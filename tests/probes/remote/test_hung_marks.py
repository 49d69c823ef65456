"""A path a stuck read waits on is not touched again while that read waits.

Found live: with a real sbatch job's ``{workdir}/checkpoints`` on a hung mount, each
``jobtables job`` or sweep left one more collector process on the login node, stuck in the
kernel (state D, ``request_wait_answer``) for as long as the mount hung: two runs, two
processes; a bot sweeping every 30 minutes would add 48 a day. Here the shipped collector runs
as a ``local = true`` cluster runs it, twice, on a real hung FUSE mount
(``tests/probes/remote/hung_mount.py``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from probes.config import SlurmCluster
from probes.remote import hung_marks
from probes.remote.hung_marks import hung_at, mark_hung
from probes.remote.script import build_collector_script, build_rollouts_script
from probes.slurm.answer import AnswerReader, stream_answer
from probes.slurm.transport import LocalRunner
from tests.probes.remote.hung_mount import hung_mount

LOG = "".join(f"{{'loss': 1.1, 'grad_norm': 0.4, 'epoch': 0.{i}}}\n" for i in range(1, 9))


def _job(tmp: Path, key: str, roots: list[str]) -> dict[str, Any]:
    work = tmp / key
    work.mkdir(exist_ok=True)
    (work / "out.log").write_text(LOG)
    return {"id": key, "stdout": str(work / "out.log"), "workdir": str(work), "offset": 0,
            "checkpoint_roots": roots, "trial_roots": []}


async def _collect(jobs: list[dict[str, Any]]) -> AnswerReader:
    request = {"tail_bytes": 1 << 16, "min_lines": 1, "read_timeout_s": 1.0,
               "deadline_s": 40.0, "trial_budget_s": 5.0, "stream": True, "jobs": jobs}
    runner = LocalRunner(SlurmCluster(name="hung", local=True, command_timeout_s=50))
    reader = AnswerReader()
    async with asyncio.timeout(45):
        await stream_answer(runner, build_collector_script(request), reader)
    assert reader.ended
    return reader


def _stuck_children() -> int:
    """This process's children with a thread waiting in the kernel (state D)."""
    stuck = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            states = [Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0]
                      for t in os.listdir(f"/proc/{pid}/task")]
        except (OSError, IndexError, ValueError):
            continue
        stuck += "D" in states
    return stuck


async def test_a_second_collector_leaves_a_hung_root_alone(tmp_path: Path) -> None:
    """The first run leaves one process stuck on the hung root; the second, and a second job
    of the first on the same root, do not touch it (its log still read) and say why."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        first = await _collect([_job(tmp_path, "301", [str(mount)]),
                                _job(tmp_path, "302", [str(mount)])])
        assert "no answer" in first.jobs["301"]["checkpoints"]["errors"][str(mount)]
        assert "still stuck" in first.jobs["302"]["checkpoints"]["errors"][str(mount)]
        assert _stuck_children() == 1
        second = await _collect([_job(tmp_path, "301", [str(mount)])])
        entry = second.jobs["301"]
        assert entry["log"]["text"] == LOG
        assert "still stuck" in entry["checkpoints"]["errors"][str(mount)]
        assert _stuck_children() == 1


async def test_a_second_job_on_the_same_hung_mount_is_not_read_there(tmp_path: Path) -> None:
    """Two jobs whose roots are different directories on one hung mount: the first is given
    up and marks the mount, the second is refused at once (one stuck read, not two)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        reader = await _collect([_job(tmp_path, "501", [str(mount / "run-a")]),
                                 _job(tmp_path, "502", [str(mount / "run-b")])])
        assert "no answer" in reader.jobs["501"]["checkpoints"]["errors"][str(mount / "run-a")]
        why = reader.jobs["502"]["checkpoints"]["errors"][str(mount / "run-b")]
        assert f"an earlier read of {mount} is still stuck" in why
        assert reader.jobs["502"]["log"]["text"] == LOG
        assert _stuck_children() == 1


async def test_a_root_the_deep_probe_left_stuck_is_left_alone_by_the_collector(
        tmp_path: Path) -> None:
    """The deep probe's reader (``jobtables probe``) gives its hung trials root up and marks
    it: the next collector does not touch it, and one process waits there, not two."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with hung_mount(mount, release_after=90):
        request = {"trial_roots": [str(mount)], "dump_dirs": [], "read_timeout_s": 1.0,
                   "deadline_s": 30.0}
        runner = LocalRunner(SlurmCluster(name="hung", local=True, command_timeout_s=50))
        async with asyncio.timeout(45):
            await runner.run(["python3", "-"], stdin=build_rollouts_script(request), check=False)
        assert _stuck_children() == 1
        reader = await _collect([_job(tmp_path, "401", [str(mount)])])
        assert "still stuck" in reader.jobs["401"]["checkpoints"]["errors"][str(mount)]
        assert _stuck_children() == 1


def test_a_mark_covers_the_paths_below_it_for_this_process_only(tmp_path: Path) -> None:
    """A marked path and what lies below it are hung; its parent and siblings are not (the
    root file system's mount point, "/", is never marked)."""
    root = str(tmp_path / "hung")
    assert hung_at(root + "/ckpt/global_step_5") is None
    mark_hung(root)
    try:
        assert hung_at(root + "/ckpt/global_step_5") == root
        assert hung_at(root) == root
        assert hung_at(str(tmp_path)) is None
        assert hung_at(str(tmp_path / "hungry")) is None
    finally:
        hung_marks.forget_marks()  # (a tmp_path on a tmpfs /tmp would mark all of /tmp)
    assert hung_at(root) is None


def _fresh() -> None:
    """Forget what this process read of the marks, as a new collector process starts."""
    hung_marks._MARKS_LOADED[0] = False
    hung_marks._MARKS_KNOWN.clear()


def test_a_mark_holds_for_every_later_check_and_ends_with_its_process(tmp_path: Path) -> None:
    """A mark held by another live process is seen by 300 later checks (a bot's sweeps
    for days; the first design, abstract sockets, failed every check after the 128th: each
    left a connection queued that nothing accepted), and is gone once that process ends."""
    root = str(tmp_path / "hung-elsewhere")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from probes.remote.hung_marks import mark_hung;"
         f" mark_hung({root!r}); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for _ in range(300):
            _fresh()
            assert hung_at(root + "/ckpt") == root
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    _fresh()
    assert hung_at(root + "/ckpt") is None


def test_the_mount_of_a_path_is_read_from_mountinfo(tmp_path: Path) -> None:
    """The longest mount point above a path; "/" for one on the root file system."""
    assert hung_marks.mount_of("/proc/self/status") == "/proc"
    assert hung_marks.mount_of("/proc") == "/proc"
    assert hung_marks.mount_of("/procx/y") != "/proc"
