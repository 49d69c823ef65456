"""The SFT completion check reads only what is the job's, under the request's deadlines.

``trainer_state.json`` / ``trainer_log.jsonl`` lie in the job's workdir and in whatever output
dirs its log names: paths the job's user controls. They go through the collector's guard
(``probes.remote.guard``) as every other read does: another owner's file, a symlink in place of
the file or of a ``checkpoint-N`` dir, a root under /proc are not read, and a check reached
past the request's deadline reads nothing (the job's log, read before it, still stands).
"""

from __future__ import annotations

import getpass
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from probes.remote import collector
from probes.remote.completion import collect_completion
from probes.remote.guard import Guard

ME = getpass.getuser()
STATE = '{"global_step": 60, "max_steps": 95}'


def _job(tmp: Path, stdout: str) -> dict[str, Any]:
    return {"id": "7", "user": ME, "stdout": stdout, "workdir": str(tmp), "offset": 0,
            "checkpoint_roots": [], "trial_roots": [], "completed": True}


def _completion(job: dict[str, Any], **req: Any) -> dict[str, Any]:
    entry: dict[str, Any] = collector.collect(
        {"tail_bytes": 4096, "min_lines": 1, "jobs": [job], **req})["jobs"]["7"]
    return entry


def _steps(entry: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(s["kind"], s["current_steps"], s["total_steps"])
            for s in entry["completion"]["sources"]]


def test_another_owners_state_is_not_read(tmp_path: Path) -> None:
    """A trainer_state.json the job's user does not own (the bot account's, a teammate's
    save dir the log names) is not the job's completion: its steps are not reported."""
    if os.geteuid() != 0:
        pytest.fail("needs root to own a file as another user (run the suite as root)")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "trainer_state.json").write_text(STATE)
    os.chown(theirs / "trainer_state.json", 65534, 65534)
    (tmp_path / "trainer_log.jsonl").write_text(
        json.dumps({"current_steps": 95, "total_steps": 95}) + "\n")
    entry = _completion(_job(tmp_path, _log(tmp_path, theirs)))
    assert _steps(entry) == [("trainer_log.jsonl", 95, 95)]


def _log(tmp: Path, output_dir: Path) -> str:
    log = tmp / "sft_7.out"
    log.write_text(f"output_dir={output_dir}\n{{'loss': 1.0}}\n")
    return str(log)


def test_symlinked_state_and_checkpoint_dir_are_not_followed(tmp_path: Path) -> None:
    """The file a symlink names, or a checkpoint-N that is a symlink, is not read."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "checkpoint-60").mkdir(parents=True)
    (elsewhere / "checkpoint-60" / "trainer_state.json").write_text(STATE)
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "trainer_state.json").symlink_to(elsewhere / "checkpoint-60" / "trainer_state.json")
    (work / "out" / "checkpoint-60").symlink_to(elsewhere / "checkpoint-60")
    entry = _completion(_job(work, _log(work, work / "out")))
    assert entry["log"]["status"] == "ok"
    assert entry["completion"]["sources"] == []


def test_a_linked_output_dir_the_user_can_list_is_still_read(tmp_path: Path) -> None:
    """A save dir that is itself a link (``out -> /scratch/$USER/run``) is followed, as a
    checkpoint root is: the files in it are the user's own."""
    scratch = tmp_path / "scratch" / "run"
    (scratch / "checkpoint-60").mkdir(parents=True)
    (scratch / "checkpoint-60" / "trainer_state.json").write_text(STATE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(scratch)
    entry = _completion(_job(work, _log(work, work / "out")))
    assert _steps(entry) == [("trainer_state.json", 60, 95)]


def test_an_output_dir_under_proc_is_not_entered(tmp_path: Path) -> None:
    """A log naming /proc/self as its output dir gets nothing read there."""
    entry = _completion(_job(tmp_path, _log(tmp_path, Path("/proc/self/cwd"))))
    assert entry["completion"]["sources"] == []


def test_the_check_reads_nothing_past_the_deadline(tmp_path: Path) -> None:
    """With the request's deadline spent, the check reads nothing and does not raise (a hung
    NFS save dir would otherwise hold the whole collector)."""
    (tmp_path / "trainer_state.json").write_text(STATE)
    spent = Guard(os.geteuid(), 5.0, until=time.monotonic() - 1.0, user=ME)
    assert collect_completion(str(tmp_path), "", [], spent)["sources"] == []
    fresh = Guard(os.geteuid(), 5.0, user=ME)
    assert [s["current_steps"] for s in
            collect_completion(str(tmp_path), "", [], fresh)["sources"]] == [60]
