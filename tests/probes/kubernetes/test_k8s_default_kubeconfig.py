"""A Kubernetes cluster with no ``kubeconfig`` reads kubectl's default; when it is missing the
cluster's detail names the file looked for, not 'the default kubeconfig'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_a_missing_default_kubeconfig_is_named(tmp_path: Path) -> None:
    """`kind = "kubernetes"` without kubeconfig on a machine with no ~/.kube/config read
    'kubeconfig the default kubeconfig: no such file': which file, the user had to guess."""
    config = tmp_path / "jobtables.toml"
    config.write_text('[[clusters]]\nname = "k"\nkind = "kubernetes"\n')
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)  # the default is read when the library is imported
    run = subprocess.run([sys.executable, "-m", "bot.cli", "sweep", "--config", str(config),
                          "--format", "json"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    (cluster,) = json.loads(run.stdout)["clusters"]
    assert cluster["status"] == "unreachable"
    assert cluster["detail"] == f"kubeconfig {tmp_path}/.kube/config: no such file"
