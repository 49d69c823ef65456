"""The collector's ``python3`` imports nothing from the directory it runs in.

The collector is sent to ``python3`` on stdin, which puts the current directory first on
``sys.path``. Found running ``jobtables sweep`` (a ``local = true`` cluster) from a sticky
world-writable directory where ``jtuser`` had left a ``json.py``: the collector imported it and
ran it as the user running jobtables (root here: it wrote ``PWNED-by-root``); a
``__future__.py`` is imported even before the script's first line. Over SSH the directory is
the login account's home, where the same holds for whoever can write there. The collector (and
the deep probe's rollout reader) now runs ``python3 -I -``: isolated, neither the current
directory nor the user's site-packages on its path, no ``PYTHON*`` variable read (the scripts
are standard library only).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes.remote.script import COLLECTOR_ARGV, build_collector_script
from tests.probes.slurm.conftest import SlurmEnv

PLANT = "import pathlib\npathlib.Path(__file__).with_name('RAN-' + __name__).touch()\n"


def _planted(directory: Path) -> Path:
    directory.mkdir()
    directory.chmod(0o1777)
    for module in ("json", "__future__", "struct", "threading"):
        (directory / f"{module}.py").write_text(PLANT)
    return directory


def test_the_shipped_script_imports_nothing_from_its_directory(tmp_path: Path) -> None:
    """The collector argv run in a directory holding modules of stdlib names: none runs,
    and the answer is the collector's."""
    here = _planted(tmp_path / "shared")
    request = {"tail_bytes": 4096, "min_lines": 1, "jobs": []}
    run = subprocess.run(list(COLLECTOR_ARGV), input=build_collector_script(request), cwd=here,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert '"protocol"' in run.stdout
    assert sorted(p.name for p in here.glob("RAN-*")) == []


def test_jobtables_sweep_from_a_shared_directory_runs_no_planted_module(
        slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """``jobtables sweep`` on a ``local = true`` cluster from that directory: the report comes,
    no planted module ran."""
    here = _planted(tmp_path / "shared")
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "local22"\nkind = "slurm"\nlocal = true\n'
                      f'users = ["{slurm_env.user}"]\n')
    # The console script, as a user runs it (``python -m`` would put the directory on the
    # path of jobtables' own Python first).
    jobtables = Path(sys.executable).with_name("jobtables")
    done = subprocess.run([str(jobtables), "sweep", "--format", "json", "--config",
                           str(config)], cwd=here, capture_output=True, timeout=240,
                          check=False)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert sorted(p.name for p in here.glob("RAN-*")) == []


@pytest.mark.parametrize(
    "python", ["python3", str(Path.home() / ".pyenv/versions/3.7.16/bin/python")])
def test_isolated_mode_runs_on_the_login_nodes_pythons(python: str, tmp_path: Path) -> None:
    """``-I`` is there from Python 3.4: the oldest login-node Python the scripts support
    (3.7 here) runs the collector so."""
    request = {"tail_bytes": 4096, "min_lines": 1, "jobs": []}
    run = subprocess.run([python, *COLLECTOR_ARGV[1:]], input=build_collector_script(request),
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and '"protocol"' in run.stdout, run.stderr
