"""How the SSH transport starts (probes.slurm.asyncssh_load, probes.slurm.ssh): asyncssh
imported without its liboqs look-up where there is none (what it offers is what the real
look-up would have given), and its own ciphers offered AES-GCM first."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from probes.slurm import asyncssh_load, ssh

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux look-up")


def test_a_library_that_is_there_may_be_found() -> None:
    assert ctypes.util.find_library("c") is not None
    assert asyncssh_load._may_have("c")


def test_a_library_that_is_not_there_is_not() -> None:
    name = "jobtables-no-such-lib"
    assert ctypes.util.find_library(name) is None
    assert not asyncssh_load._may_have(name)


def test_asyncssh_offers_what_the_real_look_up_gives() -> None:
    """sntrup761 (liboqs) is offered exactly when ``find_library`` finds liboqs; the real
    ``find_library`` is back in place after the import."""
    from asyncssh.crypto import pq

    found = any(ctypes.util.find_library(n) for n in asyncssh_load._OQS)
    assert pq.sntrup_available == found
    assert ctypes.util.find_library.__module__ == "ctypes.util"


def test_every_default_cipher_is_offered_aes_gcm_first() -> None:
    """Only the order of asyncssh's own ciphers changes: none added, none dropped."""
    from asyncssh.encryption import get_default_encryption_algs

    offered = ssh._ciphers()
    default = [a.decode("ascii") for a in get_default_encryption_algs()]
    assert sorted(offered) == sorted(default)
    assert offered[:2] == ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"]
