"""Read the bounded tail of a local log file.

Policy: never read more than ``max_bytes``, whatever the file size (a 1 GB log costs one seek
and one bounded read). Reading starts at ``max(offset, size - max_bytes)``; when that is not
the start of the file or the caller's own ``offset`` (a line boundary the caller knows), the
first, partial line is dropped. Bytes are decoded as UTF-8 with replacement characters.
``OSError`` becomes ``FetchError``, with the original chained.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from probes.errors import FetchError
from probes.models import Frozen


class TailRead(Frozen):
    """A bounded tail: the text, the byte where it starts, and the file's size and mtime."""

    text: str
    offset: int
    size: int
    mtime: datetime


def read_tail(path: Path, max_bytes: int, *, offset: int = 0) -> TailRead:
    """Read at most ``max_bytes`` from the end of ``path`` (or from ``offset`` if later)."""
    try:
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            # an offset past the end means the file was truncated or rotated: start over
            known = offset if 0 <= offset <= size else 0
            start = max(known, size - max(max_bytes, 0))
            handle.seek(start)
            data = handle.read(min(max(max_bytes, 0), size - start))
    except OSError as exc:
        raise FetchError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if start not in (0, known) and data:
        newline = data.find(b"\n")
        cut = len(data) if newline < 0 else newline + 1
        data, start = data[cut:], start + cut
    return TailRead(
        text=data.decode("utf-8", errors="replace"),
        offset=start,
        size=size,
        mtime=datetime.fromtimestamp(stat.st_mtime, tz=UTC),
    )
