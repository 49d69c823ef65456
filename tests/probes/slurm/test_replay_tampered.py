"""A tampered replay directory: each is the cluster's clear error, and nothing outside DIR is read.

A recording travels (bug reports): its files are data from someone else. A symlink planted in
it (to ``/etc/shadow``, a file of another user, ``/dev/zero``) is refused, never followed; a
file that is no regular file or is larger than a recording file can be is refused before it
is read; malformed JSON or shapes name the file. Every case is the replay cluster
``unreachable`` with that detail (exit 0 through the CLI), never an internal error or a hang.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main
from probes.config import ReplayCluster
from probes.slurm import replay
from probes.slurm.replay import ReplayProbe


def copy_recording(tmp_path: Path) -> Path:
    dest = tmp_path / "rec"
    shutil.copytree(DEMO_RECORDING, dest)
    return dest


def outside(tmp_path: Path, name: str, text: str) -> Path:
    """A file outside the recording, holding a valid recording file's text."""
    path = tmp_path / "elsewhere" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def link_out(name: str) -> Callable[[Path, Path], None]:
    def tamper(rec: Path, tmp_path: Path) -> None:
        target = outside(tmp_path, name, (rec / name).read_text())
        (rec / name).unlink()
        (rec / name).symlink_to(target)
    return tamper


def link_to(name: str, target: str) -> Callable[[Path, Path], None]:
    def tamper(rec: Path, tmp_path: Path) -> None:
        (rec / name).unlink(missing_ok=True)
        (rec / name).symlink_to(target)
    return tamper


def write(name: str, data: bytes) -> Callable[[Path, Path], None]:
    def tamper(rec: Path, tmp_path: Path) -> None:
        (rec / name).write_bytes(data)
    return tamper


def edit_meta(**fields: object) -> Callable[[Path, Path], None]:
    def tamper(rec: Path, tmp_path: Path) -> None:
        meta = json.loads((rec / "cluster.json").read_text())
        (rec / "cluster.json").write_text(json.dumps({**meta, **fields}))
    return tamper


def a_directory(rec: Path, tmp_path: Path) -> None:
    (rec / "squeue.json").unlink()
    (rec / "squeue.json").mkdir()


def a_fifo(rec: Path, tmp_path: Path) -> None:
    (rec / "sacct.json").unlink(missing_ok=True)
    os.mkfifo(rec / "sacct.json")


def set_first_entry(rec: Path, entry: object) -> str:
    """Replace the first job's entry of collected.json; its job id."""
    data = json.loads((rec / "collected.json").read_text())
    first = next(iter(data["jobs"]))
    data["jobs"][first] = entry
    (rec / "collected.json").write_text(json.dumps(data))
    return str(first)


@pytest.mark.parametrize(("tamper", "says"), [
    (link_out("collected.json"), "collected.json is a symbolic link"),
    (link_out("squeue.json"), "squeue.json is a symbolic link"),
    (link_to("scontrol.txt", "/etc/shadow"), "scontrol.txt is a symbolic link"),
    (link_to("sacct.json", "/dev/zero"), "sacct.json is a symbolic link"),
    (a_fifo, "sacct.json is not a regular file"),
    (a_directory, "squeue.json is not a regular file"),
    (write("scontrol.txt", b"\xff\xfe JobId=1"), "scontrol.txt is not UTF-8 text"),
    (write("collected.json", b"[1, 2]"), "collected.json: not a recording's collected file"),
    (write("collected.json", b'{"jobs": [1]}'),
     "collected.json: not a recording's collected file"),
    (write("collected.json", b'{"jobs": '), "recording file collected.json is unreadable"),
    (write("sacct.json", b"{bad"), "sacct.json"),
    (edit_meta(recorded_at="9999-99-99T99"), "recording file cluster.json: recorded_at"),
    (edit_meta(recorded_at=1e308), "recording file cluster.json: recorded_at"),
    (write("squeue.json", b'{"jobs": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
     "recording file squeue.json: squeue --json printed JSON nested too deep"),
    (write("sacct.json", b'{"jobs": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
     "recording file sacct.json: squeue --json printed JSON nested too deep"),
])
async def test_a_tampered_recording_is_the_clusters_clear_error(
        tmp_path: Path, tamper: Callable[[Path, Path], None], says: str) -> None:
    """Each was followed (a symlink to a file outside DIR read as the recording's, /etc/shadow
    read as root, /dev/zero read for ever), or an internal error named only by its Python
    exception (``probe error: AttributeError(...)``), or a malformed file silently taken."""
    rec = copy_recording(tmp_path)
    tamper(rec, tmp_path)
    probe = ReplayProbe(ReplayCluster(name="r", path=str(rec)))
    facts = await probe.collect()
    assert facts.status == "unreachable" and facts.jobs == ()
    assert facts.detail is not None and says in facts.detail, facts.detail
    assert "Error(" not in facts.detail


async def test_a_file_larger_than_a_recording_file_is_refused_unread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collected.json past the bound (lowered here, so the test writes little) is refused
    with its size, not read into memory."""
    rec = copy_recording(tmp_path)
    size = (rec / "collected.json").stat().st_size
    monkeypatch.setattr(replay, "MAX_FILE_BYTES", size - 1)
    facts = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert facts.status == "unreachable" and facts.detail is not None
    assert f"collected.json is {size} bytes, over the {size - 1}" in facts.detail


@pytest.mark.parametrize(("entry", "says"), [
    ("a string", "not an object: str"),
    ({"log": 5, "checkpoints": "x"}, "malformed: AttributeError"),
    ({"log": {"status": "ok", "text": 5}}, "malformed: ValidationError"),
])
async def test_one_malformed_entry_fails_that_job_only(tmp_path: Path, entry: object,
                                                       says: str) -> None:
    """An entry of collected.json that is no object, or whose parts are not of their shape,
    is that job's failed fetch (as a garbled line of the live collector's answer is) naming
    it; the other jobs replay as recorded (the whole cluster was 'probe error:
    AttributeError(...)')."""
    rec = copy_recording(tmp_path)
    whole = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    first = set_first_entry(rec, entry)
    facts = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert facts.status == "ok" and len(facts.jobs) == len(whole.jobs)
    bad = next(job for job in facts.jobs if job.record.job_id == first)
    assert bad.log is not None and bad.log.status == "failed"
    assert bad.log.error is not None and says in bad.log.error, bad.log.error
    assert [j for j in facts.jobs if j.record.job_id != first] == [
        j for j in whole.jobs if j.record.job_id != first]


def test_a_recording_dir_given_through_a_symlink_still_replays(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Near-miss: the path the config names may itself be a link to the recording (only the
    files inside it must be its own); the sweep is the demo's."""
    link = tmp_path / "latest"
    link.symlink_to(copy_recording(tmp_path))
    config = tmp_path / "c.toml"
    config.write_text(f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{link}"\n')
    assert main(["sweep", "--config", str(config), "--format", "json"]) == 0
    swept = json.loads(capsys.readouterr().out)
    assert main(["demo", "--format", "json"]) == 0
    assert swept["jobs"] == json.loads(capsys.readouterr().out)["jobs"]
