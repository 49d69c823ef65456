"""Resumed log reads: only the bytes appended since the last sweep, and a rotated, truncated,
rewritten or overrun log detected and read afresh (``probes.remote.logread``)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.remote import collector
from probes.remote.logread import ANCHOR, complete_utf8
from probes.remote.script import build_collector_script

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"
BANNER = b"***** Running training *****\n  Total optimization steps = 200\n"


def steps(first: int, last: int) -> bytes:
    return b"".join(b"{'loss': %d.5, 'epoch': 0.%d}\n" % (s, s) for s in range(first, last + 1))


def read(log: Path, cursor: Any, *, tail_bytes: int = 1 << 20, **job: Any) -> dict[str, Any]:
    """One tracked collector read of ``log`` (``cursor`` None: the first, cold, read)."""
    spec = {"id": "7", "stdout": str(log), "workdir": str(log.parent), "cursor": cursor,
            "checkpoint_roots": [], "trial_roots": [], **job}
    answer = collector.collect({"tail_bytes": tail_bytes, "min_lines": 1, "jobs": [spec]})
    out: dict[str, Any] = answer["jobs"]["7"]["log"]
    return out


def test_a_resumed_read_sends_only_the_appended_bytes(tmp_path: Path) -> None:
    """After a cold read, the next read starts at its end and carries only what was appended."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 50))
    first = read(log, None)
    assert (first["fresh"], first["offset"], first["cursor"]["offset"]) == (
        "new", 0, log.stat().st_size)
    with log.open("ab") as fh:
        fh.write(steps(51, 53))
    second = read(log, first["cursor"])
    assert second["continued"] is True and "fresh" not in second
    assert second["text"] == steps(51, 53).decode()
    assert (second["offset"], second["cursor"]["offset"]) == (
        first["cursor"]["offset"], log.stat().st_size)


def test_an_unchanged_log_sends_no_text(tmp_path: Path) -> None:
    """Nothing appended: no text at all, zero lines, the same cursor back."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 500))
    cursor = read(log, None)["cursor"]
    again = read(log, cursor)
    assert "text" not in again and again["lines"] == 0 and again["continued"] is True
    assert again["cursor"] == cursor
    assert len(json.dumps(again)) < 600  # path, sizes, digest: no log bytes


def test_a_rotated_log_is_read_afresh(tmp_path: Path) -> None:
    """``mv run.out run.out.1`` and a new file at the path: another inode, a fresh tail."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 50))
    cursor = read(log, None)["cursor"]
    log.rename(tmp_path / "run.out.1")
    log.write_bytes(BANNER + steps(1, 60))  # longer than before: size alone would pass
    again = read(log, cursor)
    assert again["fresh"] == "rotated" and "continued" not in again
    assert again["text"] == (BANNER + steps(1, 60)).decode() and again["offset"] == 0


def test_a_truncated_log_is_read_afresh(tmp_path: Path) -> None:
    """Same inode, smaller than the offset read (``truncate``, ``> log``): a fresh tail."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 50))
    cursor = read(log, None)["cursor"]
    with log.open("r+b") as fh:
        fh.truncate(len(BANNER) + 10)
    again = read(log, cursor)
    assert again["fresh"] == "truncated"
    assert again["cursor"]["offset"] == len(BANNER) + 10


@pytest.mark.parametrize("appending", [True, False], ids=["o_append", "no_o_append"])
def test_copytruncate_is_detected(tmp_path: Path, appending: bool) -> None:
    """logrotate's copytruncate, then the trainer writes on past the old size: with O_APPEND
    from the start of the file, without it from its old offset (a sparse file of NULs)."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 50))
    cursor = read(log, None)["cursor"]
    shutil.copyfile(log, tmp_path / "run.out.1")
    fd = os.open(log, os.O_WRONLY | (os.O_APPEND if appending else 0))
    try:
        os.ftruncate(fd, 0)
        if not appending:
            os.lseek(fd, cursor["offset"], os.SEEK_SET)
        os.write(fd, steps(51, 200))
    finally:
        os.close(fd)
    assert log.stat().st_size >= cursor["offset"]  # the size check alone would pass
    assert read(log, cursor)["fresh"] == "rewritten"


def test_a_log_replaced_in_place_with_the_same_size_is_read_afresh(tmp_path: Path) -> None:
    """Rewritten in place to exactly the same size, another head: the digest differs."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 50))
    cursor = read(log, None)["cursor"]
    body = log.read_bytes()
    with log.open("r+b") as fh:
        fh.write(b"#" + body[1:])
    assert log.stat().st_size == cursor["offset"]
    again = read(log, cursor)
    assert again["fresh"] == "rewritten" and again["text"].startswith("#****")


def test_a_rerun_with_the_same_banner_is_read_afresh(tmp_path: Path) -> None:
    """A restarted run (``>`` log) printing the same first 4 KiB, grown past the old offset
    between sweeps: only the bytes before the offset tell it apart."""
    log = tmp_path / "run.out"
    banner = BANNER + b"#" * ANCHOR + b"\n"
    log.write_bytes(banner + steps(1, 50))
    cursor = read(log, None)["cursor"]
    log.write_bytes(banner + steps(101, 180))  # same head, same inode, longer
    again = read(log, cursor)
    assert again["fresh"] == "rewritten" and "{'loss': 101.5" in again["text"]


def test_more_than_the_tail_budget_appended_is_a_fresh_cold_tail(tmp_path: Path) -> None:
    """Past ``tail_bytes`` of new bytes the read would not be bounded: a cold tail instead,
    flagged ``gap`` so the client starts a new carry (the read is not contiguous)."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 10))
    cursor = read(log, None, tail_bytes=4096)["cursor"]
    with log.open("ab") as fh:
        fh.write(steps(11, 400))
    again = read(log, cursor, tail_bytes=4096)
    assert again["fresh"] == "gap" and "continued" not in again
    assert again["offset"] > cursor["offset"] and len(again["text"]) <= 4096
    assert again["text"].endswith("{'loss': 400.5, 'epoch': 0.400}\n")


@pytest.mark.parametrize("cursor", [
    {"path": "/elsewhere.out", "dev": 1, "ino": 2, "offset": 3, "digest": "0" * 32},
    {"dev": "1", "ino": 2, "offset": 3, "digest": "0" * 32},
    {"dev": 1, "ino": 2, "offset": -3, "digest": "0" * 32},
    {"dev": 1, "ino": 2, "offset": 3, "digest": 7},
    "not a cursor",
], ids=["other_path", "string_dev", "negative_offset", "digest_type", "string"])
def test_a_malformed_cursor_is_a_fresh_read(tmp_path: Path, cursor: Any) -> None:
    """The client's cursor is a hint from its store: a malformed one reads the file afresh."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 5))
    if isinstance(cursor, dict) and "path" not in cursor:
        cursor = dict(cursor, path=str(log))
    again = read(log, cursor)
    assert again["fresh"] == "new" and again["text"] == log.read_text()


def test_a_forged_digest_is_a_fresh_read(tmp_path: Path) -> None:
    """A cursor naming the right inode and offset with the wrong digest is not trusted."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 5))
    cursor = dict(read(log, None)["cursor"], digest="f" * 32)
    assert read(log, cursor)["fresh"] == "rewritten"


def test_a_split_character_waits_for_its_last_bytes(tmp_path: Path) -> None:
    """A read never ends inside a UTF-8 character: the chunks decode as the whole does."""
    log = tmp_path / "run.out"
    whole = "step 1 loss \u2248 0.5 \U0001f525\n".encode()
    log.write_bytes(whole[:13])  # inside the 3-byte "≈"
    first = read(log, None)
    assert first["cursor"]["offset"] == 12
    texts = [first["text"]]
    cursor = first["cursor"]
    for end in (15, 20, len(whole)):  # then inside the 4-byte emoji, then whole
        log.write_bytes(whole[:end])
        again = read(log, cursor)
        texts.append(again.get("text", ""))
        cursor = again["cursor"]
    assert "".join(texts) == whole.decode() and cursor["offset"] == len(whole)


@pytest.mark.parametrize(("data", "whole"), [
    (b"ab", 2), (b"a\xe2\x89", 1), (b"a\xe2\x89\x88", 4), (b"\xf0\x9f\x94", 0),
    (b"\xf0\x9f\x94\xa5", 4), (b"a\xc3", 1), (b"a\xff", 2), (b"\x80\x80\x80\x80", 4), (b"", 0),
])
def test_complete_utf8_cuts_only_a_trailing_partial_character(data: bytes, whole: int) -> None:
    """The length up to the last whole character; invalid bytes are not held back."""
    assert complete_utf8(data) == whole


def test_checkpoint_dirs_the_log_named_are_still_listed_after_resuming(tmp_path: Path) -> None:
    """A checkpoint directory printed before the last read is still searched on a read that
    carries only new lines (the cursor remembers it, re-checked inside the workdir)."""
    ckpts = tmp_path / "ckpts"
    (ckpts / "global_step_10").mkdir(parents=True)
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + f"Saved checkpoint to {ckpts}/global_step_10\n".encode())
    spec = {"id": "7", "stdout": str(log), "workdir": str(tmp_path),
            "checkpoint_roots": [], "trial_roots": []}

    def sweep(cursor: Any) -> dict[str, Any]:
        answer = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1,
                                    "jobs": [dict(spec, cursor=cursor)]})
        job: dict[str, Any] = answer["jobs"]["7"]
        return job

    first = sweep(None)
    assert first["log"]["cursor"]["dirs"] == [str(ckpts)]
    with log.open("ab") as fh:
        fh.write(steps(11, 12))
    (ckpts / "global_step_20").mkdir()
    second = sweep(first["log"]["cursor"])
    assert second["log"]["continued"] and "Saved" not in second["log"]["text"]
    assert second["checkpoints"]["listings"][str(ckpts)] == ["global_step_10", "global_step_20"]
    outside = dict(first["log"]["cursor"], dirs=["/etc"])  # a tampered store: not a base
    assert "/etc" not in sweep(outside)["checkpoints"]["listings"]


def test_a_refused_log_with_a_cursor_is_still_refused(tmp_path: Path) -> None:
    """The guard judges a resumed read like any other: a symlink is not followed."""
    real = tmp_path / "real.out"
    real.write_bytes(BANNER)
    cursor = read(real, None)["cursor"]
    link = tmp_path / "run.out"
    link.symlink_to(real)
    again = read(link, dict(cursor, path=str(link)))
    assert again["status"] == "failed" and "symbolic link" in again["error"]


def test_queue_sweeps_resume_running_jobs_only(tmp_path: Path) -> None:
    """On the one-trip path cursors go by job key to RUNNING jobs; an ended job is read whole
    (no cursor asked, none given back)."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    picked = [next(j for j in base["jobs"] if j["job_state"] == s)
              for s in ("RUNNING", "COMPLETED")]
    logs = []
    for job in picked:
        log = tmp_path / f"{job['job_id']}.out"
        log.write_bytes(BANNER + steps(1, 3))
        job.update(standard_output=str(log), user_name=getpass.getuser())
        logs.append(log)
    squeue = tmp_path / "squeue.json"
    squeue.write_text(json.dumps({**base, "jobs": picked}))
    request = {"tail_bytes": 4096, "min_lines": 1,
               "squeue": {"argv": ["cat", str(squeue)], "users": [getpass.getuser()]},
               "roots": {"checkpoint": [], "trial": []}, "cursors": {}}
    running, ended = (str(j["job_id"]) for j in picked)
    first = collector.collect_queue(request)["jobs"]
    assert first[running]["log"]["fresh"] == "new" and "cursor" not in first[ended]["log"]
    for log in logs:
        with log.open("ab") as fh:
            fh.write(steps(4, 4))
    second = collector.collect_queue(dict(request, cursors={
        running: first[running]["log"]["cursor"], ended: first[running]["log"]["cursor"]}))["jobs"]
    assert second[running]["log"]["text"] == steps(4, 4).decode()
    assert second[ended]["log"]["text"] == (BANNER + steps(1, 4)).decode()


def test_resumed_reads_run_in_the_shipped_script_under_python37(tmp_path: Path) -> None:
    """The built script resumes under a 3.7 interpreter exactly as in process."""
    log = tmp_path / "run.out"
    log.write_bytes(BANNER + steps(1, 5))
    cursor = read(log, None)["cursor"]
    with log.open("ab") as fh:
        fh.write(steps(6, 7))
    spec = {"id": "7", "stdout": str(log), "workdir": str(tmp_path), "cursor": cursor,
            "checkpoint_roots": [], "trial_roots": []}
    script = build_collector_script({"tail_bytes": 4096, "min_lines": 1, "jobs": [spec]})
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    run = subprocess.run([str(PY37), "-"], input=script, capture_output=True, text=True,
                         check=True, timeout=60)
    shipped = json.loads(run.stdout)["jobs"]["7"]["log"]
    assert shipped == read(log, cursor)
    assert shipped["text"] == steps(6, 7).decode()
