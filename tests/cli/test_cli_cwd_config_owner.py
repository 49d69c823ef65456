"""A ``jobtables.toml`` found in the current directory is read only when it is the user's own.

With neither ``--config`` nor ``$JOBTABLES_CONFIG`` the config is ``./jobtables.toml`` (CONTRACT
§1). Found running ``jobtables sweep`` as root in a sticky world-writable directory where
another user (``jtuser``) had left a ``jobtables.toml`` naming a Kubernetes cluster whose
kubeconfig's ``exec`` credential plugin was their script: the sweep ran that script as root
(it wrote ``PWNED-by-root``), as ``git`` once ran another user's hooks from a repository in
/tmp. A config taken from the current directory by default is now refused, exit 2 with one
line saying why, when another user owns it (root's is trusted, as root could do anything) or
anyone may write it; named with ``--config`` or ``$JOBTABLES_CONFIG`` it is the user's
explicit choice and read as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING

ROOT = Path(__file__).resolve().parents[2]
REPLAY = f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n'


def _planted(shared: Path) -> Path:
    """A config naming a Kubernetes cluster whose kubeconfig runs ``plugin`` for credentials,
    the plugin leaving a marker when it runs; all in ``shared``."""
    marker = shared / "RAN"
    plugin = shared / "plugin.sh"
    plugin.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{\"apiVersion\": "
                      "\"client.authentication.k8s.io/v1beta1\", \"kind\": \"ExecCredential\", "
                      "\"status\": {\"token\": \"x\"}}'\n")
    plugin.chmod(0o755)
    (shared / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users:\n- name: u\n  user:\n    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        f"      command: {plugin}\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    config = shared / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "team"\nkind = "kubernetes"\n'
                      f'kubeconfig = "{shared / "kubeconfig"}"\nrequest_timeout_s = 2\n')
    return marker


def _jobtables(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "JOBTABLES_CONFIG"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "bot.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _shared(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def test_another_users_config_in_the_current_directory_runs_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("needs root to own a file as another user (run the suite as root)")
    shared = _shared(tmp_path)
    marker = _planted(shared)
    for path in shared.iterdir():
        os.chown(path, 65534, 65534)
    for argv in (["sweep", "--format", "json"], ["check-config"], ["job", "x"]):
        done = _jobtables(shared, *argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "jobtables.toml" in lines[0], done.stderr
        assert "owned by uid 65534" in lines[0] and "--config" in lines[0], lines[0]
        assert not marker.exists()


def test_a_world_writable_config_in_the_current_directory_is_refused(tmp_path: Path) -> None:
    shared = _shared(tmp_path)
    (shared / "jobtables.toml").write_text(REPLAY)
    (shared / "jobtables.toml").chmod(0o666)
    done = _jobtables(shared, "sweep", "--format", "json")
    assert done.returncode == 2 and "writable by anyone" in done.stderr, done.stderr


def test_named_explicitly_or_the_users_own_it_is_read(tmp_path: Path) -> None:
    """``--config`` (and $JOBTABLES_CONFIG) is the user's choice whoever owns the file; the
    user's own ./jobtables.toml is read by default as before."""
    shared = _shared(tmp_path)
    config = shared / "jobtables.toml"
    config.write_text(REPLAY)
    assert _jobtables(shared, "sweep", "--format", "json").returncode == 0
    if os.geteuid() == 0:
        os.chown(config, 65534, 65534)
        done = _jobtables(shared, "sweep", "--format", "json", "--config", str(config))
        assert done.returncode == 0, done.stderr
