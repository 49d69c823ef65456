"""`jobtables record` writes for its owner only and never through a planted link.

The directory is 0700 and every file 0600; a symlink (or a hard link, or a FIFO) planted
inside DIR is refused, never written through; a non-empty DIR that is not a recording is
refused before anything connects; no environment variable reaches any file.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.models import JobState, SchedulerRecord
from probes.slurm.probe import Snapshot
from probes.slurm.recording import RecordingRefused, record, write_recording
from tests.probes.slurm.conftest import RecordingRunner

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
META = {"format": 1, "name": "c", "kind": "slurm", "recorded_at": "2026-12-01T09:00:00Z",
        "users": ["alice"], "slurm_version": None}


def _snapshot() -> Snapshot:
    record_ = SchedulerRecord(cluster="c", job_id="7", name="rl-x", user="alice",
                              state=JobState.RUNNING, workdir="/w", stdout_path="/w/o")
    return Snapshot(squeue="", squeue_format="plain", scontrol="", sacct=None,
                    records=(record_,), slurm_version=None)


def _write(dest: Path) -> None:
    write_recording(dest, META, _snapshot(), {"7"}, {"7": {"log": {"status": "ok",
                                                                  "text": "step 1\n"}}})


def test_files_0600_dir_0700_and_no_environment(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file 0600, the directory 0700; an environment marker is in no file."""
    monkeypatch.setenv("JT_RECORD_MARKER", "MARKER-IN-ENV")
    dest = tmp_path / "rec"
    _write(dest)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700
    files = sorted(p.name for p in dest.iterdir())
    assert files == ["cluster.json", "collected.json", "scontrol.txt", "squeue.json"]
    for path in dest.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert "MARKER-IN-ENV" not in path.read_text()
    _write(dest)  # a recording may be re-recorded in place
    assert stat.S_IMODE((dest / "squeue.json").stat().st_mode) == 0o600


def test_re_recorded_in_place_leaves_nothing_of_the_last_recording(tmp_path: Path) -> None:
    """A recording with ``sacct.json`` re-recorded from a cluster without sacct: the old
    accounting is gone, not replayed as the new recording's; other files stand."""
    dest = tmp_path / "rec"
    snap = dataclasses.replace(_snapshot(), sacct='{"jobs": []}')
    write_recording(dest, META, snap, {"7"}, {})
    assert (dest / "sacct.json").exists()
    (dest / "notes.txt").write_text("mine")
    _write(dest)
    assert not (dest / "sacct.json").exists()
    assert sorted(p.name for p in dest.iterdir()) == [
        "cluster.json", "collected.json", "notes.txt", "scontrol.txt", "squeue.json"]


@pytest.mark.parametrize("plant", ["symlink", "hardlink", "fifo"])
def test_a_planted_link_inside_dir_is_refused(tmp_path: Path, plant: str) -> None:
    """squeue.json planted as a symlink/hard link/FIFO: refused, the target untouched."""
    dest = tmp_path / "rec"
    _write(dest)
    target = tmp_path / "victim"
    target.write_text("precious\n")
    (dest / "squeue.json").unlink()
    if plant == "symlink":
        (dest / "squeue.json").symlink_to(target)
    elif plant == "hardlink":
        os.link(target, dest / "squeue.json")
    else:
        os.mkfifo(dest / "squeue.json")
    with pytest.raises(RecordingRefused):
        _write(dest)
    assert target.read_text() == "precious\n"


def test_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """DIR itself a symlink: not written through."""
    (tmp_path / "real").mkdir()
    (tmp_path / "rec").symlink_to(tmp_path / "real")
    with pytest.raises(RecordingRefused, match="symbolic link"):
        _write(tmp_path / "rec")
    assert list((tmp_path / "real").iterdir()) == []


async def test_non_empty_dir_that_is_not_a_recording_is_refused_before_connecting(
    tmp_path: Path,
) -> None:
    """A non-empty DIR without a recording's cluster.json: refused, no command runs."""
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine\n")
    runners: list[RecordingRunner] = []

    def factory(cluster: SlurmCluster) -> RecordingRunner:
        runners.append(RecordingRunner(cluster))
        return runners[-1]

    cluster = SlurmCluster(name="c", host="h", known_hosts="/dev/null")
    with pytest.raises(RecordingRefused, match="not a recording"):
        await record(cluster, dest, runner_factory=factory)
    assert runners == [] or all(r.calls == [] for r in runners)
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("under", ["a-file", "missing-then-file"])
def test_dir_that_cannot_be_created_is_refused_not_a_crash(tmp_path: Path, under: str) -> None:
    """DIR whose parent is a regular file (or cannot be made): one refusal naming DIR and the
    reason (``jobtables record`` prints it as one line), never an unhandled OSError."""
    (tmp_path / "a-file").write_text("x\n")
    parent = tmp_path / "a-file" if under == "a-file" else tmp_path / "a-file" / "sub"
    dest = parent / "rec"
    with pytest.raises(RecordingRefused, match=f"cannot create {dest}"):
        _write(dest)
