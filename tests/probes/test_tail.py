"""read_tail: bounded reads from the end of a file, partial first line dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.errors import FetchError
from probes.tail import read_tail


def write(path: Path, data: bytes) -> Path:
    """Write bytes to a file and return its path."""
    path.write_bytes(data)
    return path


def test_small_file_read_whole(tmp_path: Path) -> None:
    """A file smaller than the budget is returned whole from offset 0."""
    log = write(tmp_path / "a.out", b"one\ntwo\n")
    tail = read_tail(log, 1024)
    assert (tail.text, tail.offset, tail.size) == ("one\ntwo\n", 0, 8)
    assert tail.mtime.tzinfo is not None


def test_partial_first_line_dropped(tmp_path: Path) -> None:
    """Starting mid-file, the cut first line is dropped and the offset moves past it."""
    log = write(tmp_path / "a.out", b"aaaa\nbbbb\ncccc\n")
    tail = read_tail(log, 8)
    assert tail.text == "cccc\n"
    assert tail.offset == 10


def test_start_at_line_boundary_keeps_given_offset(tmp_path: Path) -> None:
    """Reading from the caller's offset keeps the first line: the caller knows it is whole."""
    log = write(tmp_path / "a.out", b"aaaa\nbbbb\ncccc\n")
    tail = read_tail(log, 1024, offset=5)
    assert (tail.text, tail.offset) == ("bbbb\ncccc\n", 5)


def test_offset_past_end_means_rotated(tmp_path: Path) -> None:
    """An offset beyond the file size (truncated/rotated log) restarts from the tail."""
    log = write(tmp_path / "a.out", b"new\n")
    tail = read_tail(log, 1024, offset=10_000)
    assert (tail.text, tail.offset) == ("new\n", 0)


def test_invalid_utf8_replaced(tmp_path: Path) -> None:
    """Undecodable bytes become replacement characters, never an error."""
    log = write(tmp_path / "a.out", b"ok \xff\xfe\n")
    assert read_tail(log, 1024).text == "ok \ufffd\ufffd\n"


def test_single_long_line_without_newline_yields_nothing(tmp_path: Path) -> None:
    """A budget inside one endless line returns no text rather than a fragment."""
    log = write(tmp_path / "a.out", b"x" * 10_000)
    tail = read_tail(log, 100)
    assert tail.text == ""
    assert tail.offset == 10_000


def test_missing_file_is_fetch_error(tmp_path: Path) -> None:
    """OSError becomes FetchError with the original chained."""
    with pytest.raises(FetchError) as caught:
        read_tail(tmp_path / "nope.out", 100)
    assert isinstance(caught.value.__cause__, OSError)


def test_one_gigabyte_sparse_file_reads_only_the_budget(tmp_path: Path) -> None:
    """A 1 GB sparse log costs one bounded read: the last lines come back, <= max_bytes read."""
    log = tmp_path / "big.out"
    lines = b"".join(f"step:{n} - actor/entropy:0.5\n".encode() for n in range(1, 6))
    with log.open("wb") as handle:
        handle.truncate(1 << 30)
        handle.seek(1 << 30)
        handle.write(lines)
    tail = read_tail(log, 4096)
    assert tail.size == (1 << 30) + len(lines)
    assert tail.text.endswith("step:5 - actor/entropy:0.5\n")
    assert len(tail.text.encode()) <= 4096
    assert tail.offset >= tail.size - 4096
