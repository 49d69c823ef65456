"""The CLI's Kubernetes memory is used only from a state dir and a file that are the user's own.

``jobtables sweep`` remembers the jobs it saw live in a file under its state dir
(``bot.cli_memory``) and reports a job it remembers and no longer finds as FAILED
``silent-wedge``. A state dir another user owns, or one others may write in
(``JOBTABLES_STATE_DIR=/tmp/team``), lets them plant a memory: jobs that never ran reported
failed, real ones marked cancelled. Such a dir (or a memory file another user owns or may
write) is no memory: one warning line on stderr says why, the sweep reads the cluster as if
it were the first, and nothing is written there.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli_memory import CliProbeMemory
from probes.config import KubernetesCluster
from tests.cli.test_cli_k8s_vanished import ROOT, _add_running, _config, _rows
from tests.probes.kubernetes.standin import KubeStandIn

CLUSTER = KubernetesCluster(name="beta", kubeconfig="/nonexistent/kubeconfig", namespace="ml")
MEMORY = {"seen": {}, "gone": {}, "cancelled": ["rl-x"], "vanished": []}


async def _cli(tmp_path: Path, state: Path, *argv: str) -> tuple[Any, str]:
    """``jobtables ARGV --format json`` with its state dir at ``state``: (JSON, stderr)."""
    env = {**os.environ, "JOBTABLES_STATE_DIR": str(state)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *argv, "--format", "json", "--config",
        str(tmp_path / "jobtables.toml"), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        stdout, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr.decode()
    return json.loads(stdout), stderr.decode()


async def test_a_planted_memory_in_a_shared_state_dir_forges_no_job(tmp_path: Path) -> None:
    """A memory naming a live job, copied into a world-writable state dir (as another user
    could): the job, gone from the cluster, is not reported FAILED silent-wedge; one stderr
    line names the dir and why; the dir is left as it was (no memory written there)."""
    standin = KubeStandIn(jobsets={})
    await standin.start()
    try:
        _config(tmp_path, standin)
        _add_running(standin, "rl-forged")
        own = tmp_path / "own"
        assert "rl-forged" in _rows((await _cli(tmp_path, own, "sweep"))[0])
        del standin.jobs["rl-forged"], standin.pods["rl-forged-0"]
        shared = tmp_path / "shared"
        shutil.copytree(own, shared)
        shared.chmod(0o777)
        before = {p.name: p.read_bytes() for p in shared.iterdir()}
        report, stderr = await _cli(tmp_path, shared, "sweep")
        assert "rl-forged" not in _rows(report), _rows(report)
        warned = [line for line in stderr.splitlines() if str(shared) in line]
        assert len(warned) == 1 and "writable by others" in warned[0], stderr
        assert {p.name: p.read_bytes() for p in shared.iterdir()} == before
        # the user's own dir still remembers it (no regression of the memory itself)
        assert _rows((await _cli(tmp_path, own, "sweep"))[0])["rl-forged"] == (
            "FAILED", ["silent-wedge"])
    finally:
        await standin.stop()


def _planted(directory: Path) -> Path:
    directory.mkdir(mode=0o700, exist_ok=True)
    CliProbeMemory(directory).save(CLUSTER, MEMORY)
    (path,) = directory.iterdir()
    return path


def test_the_users_own_memory_is_read_back(tmp_path: Path) -> None:
    """The baseline the refusals below depart from: a 0700 dir, a 0600 file of the user's."""
    _planted(tmp_path / "state")
    assert CliProbeMemory(tmp_path / "state").load(CLUSTER) == MEMORY


def test_a_state_dir_another_user_owns_is_no_memory(tmp_path: Path) -> None:
    """A 0700 dir owned by another user (root running with a user's JOBTABLES_STATE_DIR, or
    the reverse): neither read nor written."""
    if os.geteuid() != 0:
        pytest.fail("needs root to own a dir as another user (run the suite as root)")
    state = tmp_path / "state"
    path = _planted(state)
    os.chown(state, 65534, 65534)
    os.chown(path, 65534, 65534)
    assert CliProbeMemory(state).load(CLUSTER) is None
    path.unlink()
    CliProbeMemory(state).save(CLUSTER, MEMORY)
    assert list(state.iterdir()) == []


@pytest.mark.parametrize("kind", ["other-owner", "group-writable", "symlink"])
def test_a_memory_file_not_the_users_own_is_no_memory(tmp_path: Path, kind: str) -> None:
    """In the user's own dir, a memory file another user owns, others may write, or that is
    a symlink to a file elsewhere, is no memory."""
    if kind == "other-owner" and os.geteuid() != 0:
        pytest.fail("needs root to own a file as another user (run the suite as root)")
    state = tmp_path / "state"
    path = _planted(state)
    if kind == "other-owner":
        os.chown(path, 65534, 65534)
    elif kind == "group-writable":
        path.chmod(0o664)
    else:
        elsewhere = tmp_path / "elsewhere.json"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    assert CliProbeMemory(state).load(CLUSTER) is None
