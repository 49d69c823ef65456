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
import fcntl
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


# The races a reviewer found between processes marking and clearing the same path. Each test
# stops one real process between two of its steps (a profile hook on the real call) and runs
# another real process there, on the same real files in a test's own marks directory.

_MARKER = """
import fcntl, sys
from probes.remote import hung_marks
hung_marks.MARK_DIR = sys.argv[1]
hung_marks.hung_at("/")  # a collector reads the marks as it starts (none then)
print("ready", flush=True)
sys.stdin.readline()
def report(frame, event, arg):
    if event == "c_exception" and arg is fcntl.flock:
        print("refused", flush=True)
sys.setprofile(report)
hung_marks.mark_hung(sys.argv[2])
sys.setprofile(None)
print("held", flush=True)
sys.stdin.read()
"""

_LATER = """
import sys
from probes.remote import hung_marks
hung_marks.MARK_DIR = sys.argv[1]
print(hung_marks.hung_at(sys.argv[2]))
"""


def _later_process_sees(marks: Path, path: str) -> str:
    """What a later collector process reads of ``path`` (it also clears marks none holds)."""
    run = subprocess.run([sys.executable, "-c", _LATER, str(marks), path],
                         capture_output=True, text=True, timeout=30, check=True)
    return run.stdout.strip()


def _hung_root(tmp_path: Path) -> str:
    """A path on the root file system (so only the path is marked, not its mount)."""
    return f"/jobtables-hung-test-{tmp_path.name}-{os.getpid()}/checkpoints"


def _once_after(calls: tuple[Any, ...], when: Any, action: Any) -> None:
    """Run ``action`` once, in this thread, right after a call of one of the C functions
    ``calls`` returns while ``when()`` holds."""
    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_return" and any(arg is call for call in calls) and when():
            sys.setprofile(None)
            action()
    sys.setprofile(hook)


def test_a_mark_cleared_between_its_open_and_its_lock_is_taken_again(
        tmp_path: Path, monkeypatch: Any) -> None:
    """A later process clears the new mark file after its marker opened it but before it
    locked it (a mark none held, to that process): the marker must not hold a lock on the
    removed file, which marks nothing, but mark the path anew."""
    marks = tmp_path / "marks"
    root = _hung_root(tmp_path)
    monkeypatch.setattr(hung_marks, "MARK_DIR", str(marks))
    _fresh()
    cleared: list[str] = []

    def clear() -> None:
        cleared.append(_later_process_sees(marks, root))
        cleared.append(",".join(os.listdir(marks)))

    _once_after((os.open,), lambda: marks.is_dir() and bool(os.listdir(marks)), clear)
    try:
        mark_hung(root)
    finally:
        sys.setprofile(None)
    try:
        assert cleared == ["None", ""]  # the other process did clear it, between the steps
        assert _later_process_sees(marks, root + "/global_step_5") == root
    finally:
        hung_marks.forget_marks()
    assert _later_process_sees(marks, root) == "None"


def test_a_mark_taken_while_its_stale_mark_is_removed_holds(
        tmp_path: Path, monkeypatch: Any) -> None:
    """A process clearing a stale mark (its stuck read ended) has locked it and is about to
    remove it when another process gives the same path up again and marks it: that lock is
    refused only for an instant, and the new mark must outlive the removal."""
    marks = tmp_path / "marks"
    root = _hung_root(tmp_path)
    marker = subprocess.Popen([sys.executable, "-c", _MARKER, str(marks), root],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert marker.stdin is not None and marker.stdout is not None
    try:
        assert marker.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, "-c", "import sys; from probes.remote import hung_marks;"
                        " hung_marks.MARK_DIR = sys.argv[1]; hung_marks.mark_hung(sys.argv[2])",
                        str(marks), root], check=True, timeout=30)  # a mark, its process gone
        assert len(os.listdir(marks)) == 1
        monkeypatch.setattr(hung_marks, "MARK_DIR", str(marks))
        _fresh()
        seen: list[str] = []

        def mark_meanwhile() -> None:  # this process holds the stale mark's lock here
            assert marker.stdin is not None and marker.stdout is not None
            marker.stdin.write("\n")
            marker.stdin.flush()
            seen.append(marker.stdout.readline().strip())

        _once_after((fcntl.flock,), lambda: not seen, mark_meanwhile)
        try:
            assert hung_at(root) is None  # the stale mark, cleared
        finally:
            sys.setprofile(None)
        assert seen == ["refused"]  # the marker did try while the lock was held
        assert marker.stdout.readline().strip() == "held"
        assert _later_process_sees(marks, root + "/global_step_5") == root
    finally:
        marker.stdin.close()
        marker.wait(timeout=30)
    assert _later_process_sees(marks, root) == "None"


@pytest.mark.parametrize("spoil", ["another user's", "writable by others", "a link"])
def test_a_marks_directory_not_the_accounts_own_is_not_used(
        tmp_path: Path, monkeypatch: Any, spoil: str) -> None:
    """Marks held by a live process in a directory another user owns, or can write in, or
    reached by a link: none counts (another user could plant them to hide a path, or remove
    the account's), and nothing is marked or removed there."""
    marks = tmp_path / "marks"
    root = _hung_root(tmp_path)
    marker = subprocess.Popen([sys.executable, "-c", _MARKER, str(marks), root],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert marker.stdin is not None and marker.stdout is not None
    try:
        assert marker.stdout.readline().strip() == "ready"
        marker.stdin.write("\n")
        marker.stdin.flush()
        assert marker.stdout.readline().strip() == "held"
        planted = sorted(os.listdir(marks))
        assert len(planted) == 1
        used = marks
        if spoil == "another user's":
            os.chown(marks, pwd.getpwnam("jtuser").pw_uid, -1)
        elif spoil == "writable by others":
            marks.chmod(0o733)
        else:
            used = tmp_path / "link"
            used.symlink_to(marks)
        monkeypatch.setattr(hung_marks, "MARK_DIR", str(used))
        _fresh()
        try:
            assert hung_at(root + "/global_step_5") is None
            mark_hung(root + "-other")
        finally:
            hung_marks.forget_marks()
        assert sorted(os.listdir(marks)) == planted
    finally:
        marker.stdin.close()
        marker.wait(timeout=30)


def test_a_marks_directory_swapped_after_its_check_is_not_read(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The account's marks directory is checked, then another user with write access to its
    parent puts one of their own, holding a live mark, in its place: the marks read are the
    checked directory's (none), not the planted one's, which would hide the path."""
    marks = tmp_path / "marks"
    planted = tmp_path / "planted"
    root = _hung_root(tmp_path)
    marker = subprocess.Popen([sys.executable, "-c", _MARKER, str(planted), root],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert marker.stdin is not None and marker.stdout is not None
    try:
        assert marker.stdout.readline().strip() == "ready"
        marker.stdin.write("\n")
        marker.stdin.flush()
        assert marker.stdout.readline().strip() == "held"
        os.chown(planted, pwd.getpwnam("jtuser").pw_uid, -1)
        marks.mkdir(mode=0o700)
        monkeypatch.setattr(hung_marks, "MARK_DIR", str(marks))
        _fresh()
        swapped: list[bool] = []

        def swap() -> None:
            marks.rename(tmp_path / "marks-away")
            planted.rename(marks)
            swapped.append(True)

        _once_after((os.lstat, os.fstat), lambda: not swapped, swap)  # the check, either way
        try:
            seen = hung_at(root + "/global_step_5")
        finally:
            sys.setprofile(None)
        assert swapped == [True]
        assert seen is None
    finally:
        marker.stdin.close()
        marker.wait(timeout=30)


def _opens(path: Path) -> bool:
    """Whether this process has ``path`` open."""
    fds = Path("/proc/self/fd")
    return any(os.path.realpath(fds / fd) == str(path) for fd in os.listdir(fds))


def test_a_stale_mark_cleared_twice_does_not_take_a_new_mark_with_it(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Two processes find the same stale mark: the first has it open when the second removes
    it and the path is marked anew (a new file of that name, locked by a live process). The
    first then gets its lock on the removed file, and must not remove the new mark."""
    marks = tmp_path / "marks"
    root = _hung_root(tmp_path)
    marker = subprocess.Popen([sys.executable, "-c", _MARKER, str(marks), root],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert marker.stdin is not None and marker.stdout is not None
    try:
        assert marker.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, "-c", "import sys; from probes.remote import hung_marks;"
                        " hung_marks.MARK_DIR = sys.argv[1]; hung_marks.mark_hung(sys.argv[2])",
                        str(marks), root], check=True, timeout=30)  # a mark, its process gone
        (stale,) = os.listdir(marks)
        monkeypatch.setattr(hung_marks, "MARK_DIR", str(marks))
        _fresh()
        meanwhile: list[str] = []

        def clear_and_mark_again() -> None:
            assert marker.stdin is not None and marker.stdout is not None
            meanwhile.append(_later_process_sees(marks, root))  # clears the stale mark
            marker.stdin.write("\n")
            marker.stdin.flush()
            meanwhile.append(marker.stdout.readline().strip())

        _once_after((os.open,), lambda: _opens(marks / stale), clear_and_mark_again)
        try:
            hung_at(root)
        finally:
            sys.setprofile(None)
        assert meanwhile == ["None", "held"]
        assert _later_process_sees(marks, root + "/global_step_5") == root
    finally:
        marker.stdin.close()
        marker.wait(timeout=30)
