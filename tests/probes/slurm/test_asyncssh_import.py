"""asyncssh imported without its liboqs look-up where there is none (probes.slurm.transport):
what it offers is what the real look-up would have given."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from probes.slurm import transport

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux look-up")


def test_a_library_that_is_there_may_be_found() -> None:
    assert ctypes.util.find_library("c") is not None
    assert transport._may_have("c")


def test_a_library_that_is_not_there_is_not() -> None:
    name = "jobtables-no-such-lib"
    assert ctypes.util.find_library(name) is None
    assert not transport._may_have(name)


def test_asyncssh_offers_what_the_real_look_up_gives() -> None:
    """sntrup761 (liboqs) is offered exactly when ``find_library`` finds liboqs; the real
    ``find_library`` is back in place after the import."""
    from asyncssh.crypto import pq

    found = any(ctypes.util.find_library(n) for n in transport._OQS)
    assert pq.sntrup_available == found
    assert ctypes.util.find_library.__module__ == "ctypes.util"
