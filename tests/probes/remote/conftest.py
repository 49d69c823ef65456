"""Fixtures for the collector's tests on the local file system."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def reachable_tmp() -> Iterator[Path]:
    """A scratch directory every user may enter, as a shared scratch or a FUSE mount is.

    pytest's own ``tmp_path`` lies under a ``0700`` directory of the user running the suite:
    a job of another uid could not reach anything there, so the collector lists nothing of
    another owner's in it (``Guard.may_list``)."""
    path = Path(tempfile.mkdtemp(prefix="jt-reachable-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
