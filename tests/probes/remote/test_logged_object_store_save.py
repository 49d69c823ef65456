"""A save line naming an object-store destination names no folder on the login node.

Levanter (``checkpoint.py`` at 9263f81) saves wherever fsspec reaches and logs the
destination whole: ``Saved checkpoint to gs://bucket/ckpts/lev-run1/step-100 for step 100``;
so do others (``s3://``, ``hdfs://``). The save line's path reader started a path at any ``/``
after a ``:``, took ``//bucket/ckpts/lev-run1/step-100`` from it, and, the path running through
a step directory, made ``//bucket/ckpts/lev-run1`` (the login node's ``/bucket/...``) a root
of its own to search for the run's steps. An object store's path is none of the login node's.
"""

from __future__ import annotations

import pytest

from probes.remote.logged_paths import logged_checkpoint_dirs

STAMP = "2026-12-05T16:10:00 - 0 - levanter.checkpoint - checkpoint.py:384 - INFO :: "


@pytest.mark.parametrize("scheme", ["gs", "s3", "hdfs"])
def test_an_object_store_save_names_no_folder(scheme: str) -> None:
    line = STAMP + f"Saved checkpoint to {scheme}://bucket/ckpts/lev-run1/step-100 for step 100"
    assert logged_checkpoint_dirs(line, ["/w"], "/w") == []


def test_a_local_save_still_names_its_folder() -> None:
    """Near miss: the same line with a path on the login node."""
    line = STAMP + "Saved checkpoint to /scratch/u/ckpts/lev-run1/step-100 for step 100"
    assert logged_checkpoint_dirs(line, ["/w"], "/w") == [("/scratch/u/ckpts/lev-run1", [])]
