"""A kubeconfig path naming something that is no kubeconfig is the cluster's one-line reason.

Replayed through ``jobtables sweep`` with an operator's slip in ``kubeconfig``: a FIFO (or
any file that never ends) blocked the event loop in the library's synchronous read, so the
sweep never ended and the other clusters were lost with it; a file holding one line of
another format (a YAML scalar, e.g. a shadow-style line) or a list made the library's merge
raise TypeError out of the probe ('probe crashed', a traceback, detail 'probe error:
TypeError(...)'); a YAML error's detail ran over three lines. Each is now unreachable with
one line naming the file, never its contents, and the other cluster is reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _scalar(path: Path) -> None:
    path.write_text("one line of another file MARKER\n")


def _list(path: Path) -> None:
    path.write_text("- MARKER\n- b\n")


def _bad_items(path: Path) -> None:
    path.write_text("apiVersion: v1\ncurrent-context: c\nclusters: [MARKER]\n"
                    "contexts: [MARKER]\nusers: [MARKER]\n")


def _broken_yaml(path: Path) -> None:
    path.write_text("apiVersion: v1\nclusters: [MARKER\n")


@pytest.mark.parametrize(("make", "reason"), [
    (_fifo, "not a regular file"),
    (_scalar, "not a kubeconfig"),
    (_list, "not a kubeconfig"),
    (_bad_items, "Invalid kube-config file"),
    (_broken_yaml, "expected ',' or ']'"),
], ids=["fifo", "scalar", "list", "bad-items", "broken-yaml"])
def test_a_kubeconfig_that_is_none_is_unreachable_in_one_line(
        tmp_path: Path, make: Callable[[Path], None], reason: str) -> None:
    from bot.cli import DEMO_RECORDING

    kubeconfig = tmp_path / "kubeconfig"
    make(kubeconfig)
    toml = tmp_path / "jobtables.toml"
    toml.write_text(
        f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\nkubeconfig = "{kubeconfig}"\n'
        'namespace = "ml"\n\n'
        f'[[clusters]]\nname = "snapshot"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "JOBTABLES_CONFIG": ""}, cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    clusters = {c["name"]: c for c in json.loads(done.stdout)["clusters"]}
    assert clusters["snapshot"]["status"] == "ok"
    beta = clusters["beta"]
    assert beta["status"] == "unreachable"
    assert beta["detail"].startswith(f"kubeconfig {kubeconfig}: ")
    assert reason in beta["detail"] and "\n" not in beta["detail"]
    assert "MARKER" not in beta["detail"]


@pytest.mark.parametrize(("make", "reason"), [
    (_fifo, "not a regular file"),
    (_scalar, "not a kubeconfig"),
    (_bad_items, "not a kubeconfig"),
    (_broken_yaml, "expected ',' or ']'"),
], ids=["fifo", "scalar", "bad-items", "broken-yaml"])
def test_a_kubeconfig_lists_bad_file_is_named_alone(
        tmp_path: Path, make: Callable[[Path], None], reason: str) -> None:
    """A ``KUBECONFIG``-style list (``good:bad``) whose second file is no kubeconfig: the
    detail names that file, not the whole list (which of them was wrong went unsaid)."""
    good = tmp_path / "good"
    good.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    bad = tmp_path / "bad"
    make(bad)
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{good}:{bad}"\nnamespace = "ml"\n')
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "JOBTABLES_CONFIG": ""}, cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr
    beta = json.loads(done.stdout)["clusters"][0]
    assert beta["status"] == "unreachable"
    assert beta["detail"].startswith(f"kubeconfig {bad}: "), beta["detail"]
    assert reason in beta["detail"] and str(good) not in beta["detail"]
    assert "MARKER" not in beta["detail"] and "\n" not in beta["detail"]


@pytest.mark.parametrize("key", ["certificate-authority", "client-certificate", "client-key",
                                 "tokenFile"])
@pytest.mark.parametrize("make", [_fifo, lambda p: p.symlink_to("/dev/zero")],
                         ids=["fifo", "zero"])
def test_a_file_the_kubeconfig_names_that_is_none_is_unreachable(
        tmp_path: Path, key: str, make: Callable[[Path], None]) -> None:
    """The files a kubeconfig names (a relative path, from its own directory): the library
    read a ``tokenFile`` whole, and the TLS context its certificates, synchronously in the
    event loop: a FIFO or ``/dev/zero`` there hung the sweep (the subprocess' timeout). Each is
    now the cluster's one-line reason naming the key and the file, the other cluster kept."""
    from bot.cli import DEMO_RECORDING

    named = tmp_path / "named"
    make(named)
    user: dict[str, str] = {"token": "t"} if key != "tokenFile" else {}
    cluster: dict[str, str] = {"server": "https://127.0.0.1:9"}
    (cluster if key == "certificate-authority" else user)[key] = "named"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    toml = tmp_path / "jobtables.toml"
    toml.write_text(
        f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\nkubeconfig = "{kubeconfig}"\n\n'
        f'[[clusters]]\nname = "snapshot"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json"],
        capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, "JOBTABLES_CONFIG": ""}, cwd=Path(__file__).parents[3])
    assert done.returncode == 0, done.stderr
    clusters = {c["name"]: c for c in json.loads(done.stdout)["clusters"]}
    assert clusters["snapshot"]["status"] == "ok"
    beta = clusters["beta"]
    assert beta["status"] == "unreachable"
    assert beta["detail"] == (f"kubeconfig {kubeconfig}: {key} {named}: not a regular file"), \
        beta["detail"]


@pytest.mark.parametrize("listed", ["{d}/absent", "{d}/absent:{d}/gone"], ids=["one", "list"])
def test_a_kubeconfig_that_does_not_exist_says_so(tmp_path: Path, listed: str) -> None:
    """No file of ``kubeconfig`` exists: the detail says so, in one line, and nothing else is
    printed. It read 'Invalid kube-config file. Expected key current-context in kube-config'
    (the library's merge of nothing), after its 'Config not found: ...' warning on stderr."""
    kubeconfig = listed.format(d=tmp_path)
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\nnamespace = "ml"\n')
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "sweep", "--config", str(toml), "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "JOBTABLES_CONFIG": ""}, cwd=Path(__file__).parents[3])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    beta = json.loads(done.stdout)["clusters"][0]
    assert beta["status"] == "unreachable"
    said = "no such file" if ":" not in kubeconfig else "none of its files exists"
    assert beta["detail"] == f"kubeconfig {kubeconfig}: {said}", beta["detail"]
