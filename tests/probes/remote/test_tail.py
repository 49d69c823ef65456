"""The collector's bounded tail reads: from the end of a file, partial first line dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.remote import logread
from probes.remote.collector import read_tail


def write(path: Path, data: bytes) -> str:
    """Write bytes to a file and return its path as the collector takes it."""
    path.write_bytes(data)
    return str(path)


def test_small_file_read_whole(tmp_path: Path) -> None:
    """A file smaller than the budget is returned whole from offset 0, with its mtime."""
    tail = read_tail(write(tmp_path / "a.out", b"one\ntwo\n"), 1024, 0)
    assert (tail["status"], tail["text"]) == ("ok", "one\ntwo\n")
    assert (tail["offset"], tail["size"]) == (0, 8)
    assert tail["lines"] == 2
    assert tail["mtime"] > 0


def test_partial_first_line_dropped(tmp_path: Path) -> None:
    """Starting mid-file, the cut first line is dropped and the offset moves past it."""
    tail = read_tail(write(tmp_path / "a.out", b"aaaa\nbbbb\ncccc\n"), 8, 0)
    assert (tail["text"], tail["offset"]) == ("cccc\n", 10)


def test_start_at_line_boundary_keeps_given_offset(tmp_path: Path) -> None:
    """Reading from the caller's offset keeps the first line: the caller knows it is whole."""
    tail = read_tail(write(tmp_path / "a.out", b"aaaa\nbbbb\ncccc\n"), 1024, 5)
    assert (tail["text"], tail["offset"]) == ("bbbb\ncccc\n", 5)


def test_offset_past_end_means_rotated(tmp_path: Path) -> None:
    """An offset beyond the file size (truncated/rotated log) restarts from the tail."""
    tail = read_tail(write(tmp_path / "a.out", b"new\n"), 1024, 10_000)
    assert (tail["text"], tail["offset"]) == ("new\n", 0)


def test_invalid_utf8_replaced(tmp_path: Path) -> None:
    """Undecodable bytes become one `?` each (one byte in the answer, like text), never an
    error."""
    tail = read_tail(write(tmp_path / "a.out", b"ok \xff\xfe\n"), 1024, 0)
    assert tail["text"] == "ok ??\n"


def test_single_long_line_without_newline_yields_nothing(tmp_path: Path) -> None:
    """A budget inside one endless line returns no text rather than a fragment."""
    tail = read_tail(write(tmp_path / "a.out", b"x" * 10_000), 100, 0)
    assert (tail["text"], tail["offset"]) == ("", 10_000)


def test_missing_file_is_a_failed_read(tmp_path: Path) -> None:
    """An OSError is a failed read naming the error, never an exception."""
    tail = read_tail(str(tmp_path / "nope.out"), 100, 0)
    assert tail["status"] == "failed"
    assert tail["error"].startswith("FileNotFoundError")


def test_one_gigabyte_sparse_file_reads_only_the_budget(tmp_path: Path) -> None:
    """A 1 GB sparse log costs one bounded read: the last lines come back, <= max_bytes read."""
    log = tmp_path / "big.out"
    lines = b"".join(f"step:{n} - actor/entropy:0.5\n".encode() for n in range(1, 6))
    with log.open("wb") as handle:
        handle.truncate(1 << 30)
        handle.seek(1 << 30)
        handle.write(lines)
    tail = read_tail(str(log), 4096, 0)
    assert tail["size"] == (1 << 30) + len(lines)
    assert tail["text"].endswith("step:5 - actor/entropy:0.5\n")
    assert len(tail["text"].encode()) <= 4096
    assert tail["offset"] >= tail["size"] - 4096


def test_lines_before_a_long_last_line_are_read(tmp_path: Path) -> None:
    """A log whose last line is longer than the budget (a 50 MB dump with no line break) is
    read up to that line: its steps before it are not lost. Before, the tail was inside the
    one line and the read gave no text at all (``fetch-failed``, "0 lines < floor 1")."""
    steps = b"".join(b"{'loss': 1.%d, 'grad_norm': 0.5}\n" % n for n in range(40))
    path = write(tmp_path / "a.out", b"x" * 50 + b"\n" + steps + b"a" * 3000)
    tail = read_tail(path, 1024, 0)
    assert tail["status"] == "ok"
    assert tail["text"].endswith("{'loss': 1.39, 'grad_norm': 0.5}\n"), tail["text"][-80:]
    assert tail["lines"] > 20 and "a" * 10 not in tail["text"]
    assert tail["text"].startswith("{'loss': 1.")  # the cut line before the window dropped
    assert tail["offset"] == len(b"x" * 50 + b"\n" + steps) - len(tail["text"])
    assert tail["size"] == len(b"x" * 50 + b"\n" + steps) + 3000


def test_a_short_log_before_a_long_last_line_is_read_whole(tmp_path: Path) -> None:
    tail = read_tail(write(tmp_path / "a.out", b"one\ntwo\n" + b"z" * 5000), 1024, 0)
    assert (tail["text"], tail["offset"], tail["lines"]) == ("one\ntwo\n", 0, 2)


def test_a_tracked_read_before_a_long_line_resumes_at_the_end(tmp_path: Path) -> None:
    """The bot's read keeps its cursor at the end of the file: the next sweep reads only what
    is appended after the long line, not the lines before it again."""
    data = b"step 1\nstep 2\n" + b"b" * 4000
    tail = read_tail(write(tmp_path / "a.out", data), 1024, 0, track=True)
    assert tail["text"] == "step 1\nstep 2\n"
    assert tail["cursor"]["offset"] == len(data)


def test_the_long_line_scan_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No line break within ``LONG_LINE_SCAN`` before the tail: nothing, as one endless line."""
    monkeypatch.setattr(logread, "LONG_LINE_SCAN", 2048)
    tail = read_tail(write(tmp_path / "a.out", b"old\n" + b"c" * 4000), 1024, 0)
    assert (tail["text"], tail["offset"]) == ("", 4004)
    monkeypatch.setattr(logread, "LONG_LINE_SCAN", 4096)
    assert read_tail(str(tmp_path / "a.out"), 1024, 0)["text"] == "old\n"


def _bar(count: int) -> bytes:
    """tqdm writing to a file: each redraw starts with ``\\r``, no ``\\n`` until it closes."""
    return b"".join(b"\rGenerating: %3d%%|###   | %d/5000 [00:%02d<01:00, 12.3it/s]"
                    % (n * 100 // 5000, n, n % 60) for n in range(1, count + 1))


def test_a_tail_inside_a_carriage_return_bar_keeps_its_redraws(tmp_path: Path) -> None:
    """A bar redrawn with '\\r' for longer than the budget is lines to the parser: the tail
    keeps its latest redraws (its progress), not the set-up lines before the bar began."""
    head = b"".join(b"setup line %d\n" % n for n in range(50))
    path = write(tmp_path / "a.out", head + _bar(3000))
    for track in (False, True):
        tail = read_tail(path, 4096, 0, track=track)
        assert tail["text"].endswith("| 3000/5000 [00:00<01:00, 12.3it/s]"), tail["text"][-80:]
        assert "setup line" not in tail["text"]
        assert tail["text"].startswith("Generating: ")  # the cut redraw before it dropped
        assert tail["offset"] == tail["size"] - len(tail["text"].encode())


def test_a_long_line_after_crlf_lines_reads_them(tmp_path: Path) -> None:
    """CRLF logs: the tail before a long last line starts on a whole line (no '\\n' left)."""
    data = b"".join(b"step %d\r\n" % n for n in range(300)) + b"q" * 5000
    tail = read_tail(write(tmp_path / "a.out", data), 1024, 0)
    assert tail["text"].endswith("step 299\r\n") and tail["text"].startswith("step ")


def test_lines_before_two_long_lines_are_read(tmp_path: Path) -> None:
    """Two lines in a row each longer than the budget (two dumps): the lines before both are
    read. Before, the window before the last one held only the cut end of the other: 0 lines."""
    steps = b"".join(b"step %d\n" % n for n in range(30))
    path = write(tmp_path / "a.out", steps + b"p" * 3000 + b"\n" + b"q" * 3000)
    tail = read_tail(path, 1024, 0)
    assert tail["text"].endswith("step 29\n") and tail["lines"] == 30, tail["text"][-40:]
    assert tail["offset"] == 0


def test_lines_after_a_copytruncate_hole_are_read(tmp_path: Path) -> None:
    """After logrotate's copytruncate, a writer without O_APPEND goes on at its old offset: the
    log is a hole of NULs, then the new lines. The first of them is no cut line (the hole ends
    where the writer's text begins) and is read. Replayed on the real SLURM (sft-sparse: a 20 GB
    hole, then one step line): the tail dropped it as a partial line and read 0 lines."""
    path = tmp_path / "a.out"
    with path.open("wb") as f:
        f.truncate(4 << 20)
        f.seek(4 << 20)
        f.write(b"{'loss': 0.9, 'grad_norm': 0.5}\n{'loss': 0.8, 'grad_norm': 0.4}\n")
    tail = read_tail(str(path), 1 << 20, 0)
    assert tail["text"].splitlines()[-2:] == ["{'loss': 0.9, 'grad_norm': 0.5}",
                                              "{'loss': 0.8, 'grad_norm': 0.4}"]
    assert tail["lines"] == 2


def test_a_tail_that_ends_in_a_hole_reads_the_lines_before_it(tmp_path: Path) -> None:
    """A log whose end is a hole (extended by truncate, nothing written after) still reads
    the lines before the hole, as a long last line does."""
    path = tmp_path / "a.out"
    with path.open("wb") as f:
        f.write(b"{'loss': 0.9}\n")
        f.truncate(4 << 20)
    tail = read_tail(str(path), 1 << 20, 0)
    assert tail["text"] == "{'loss': 0.9}\n"


def test_lines_after_a_hole_within_the_tail_are_read(tmp_path: Path) -> None:
    """A copytruncate hole smaller than the tail (a log rotated at 64 KiB): the read starts at
    the file's first byte, so no line is cut, and the hole's NULs were glued to the first line
    after it ('????...{'loss': 0.9, ...}', a line no parser reads: its step lost)."""
    path = tmp_path / "a.out"
    with path.open("wb") as f:
        f.truncate(64 << 10)
        f.seek(64 << 10)
        f.write(b"{'loss': 0.9, 'grad_norm': 0.5}\n{'loss': 0.8, 'grad_norm': 0.4}\n")
    tail = read_tail(str(path), 1 << 20, 0)
    assert tail["text"] == "{'loss': 0.9, 'grad_norm': 0.5}\n{'loss': 0.8, 'grad_norm': 0.4}\n"
    assert tail["lines"] == 2


def test_a_log_ending_in_a_hole_larger_than_the_scan_reads_the_lines_before_it(
        tmp_path: Path) -> None:
    """A 5 GB sparse log (its lines, then a hole to 5 GB: ``truncate -s 5G``, a preallocated
    file) read on the real SLURM in the hostile dry run: the tail and the whole long-line scan
    were NULs, so the job was ``fetch-failed`` 'last line over 65 MiB', its 15 steps unread.
    The scan skips the hole (``SEEK_DATA``/``SEEK_HOLE``, never reading it) to the last data
    before it; the bytes read stay bounded."""
    path = tmp_path / "sparse.out"
    lines = b"".join(b"step:%d - actor/entropy:0.5\n" % n for n in range(1, 16))
    with path.open("wb") as f:
        f.write(lines)
        f.truncate(5 << 30)
    tail = read_tail(str(path), 1 << 20, 0)
    assert tail["status"] == "ok" and "endless" not in tail
    assert tail["text"] == lines.decode()
    assert tail["size"] == 5 << 30
