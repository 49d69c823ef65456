"""scripts/install on a machine whose Python cannot make a venv yet (Debian without
python3-venv): it says what to install and leaves no half-made .venv behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Debian's venv without ensurepip: the interpreter is linked in, then pip fails to install.
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
  echo "The virtual environment was not created successfully because ensurepip is not" >&2
  exit 1
fi
exit 0
"""


def test_a_failed_venv_is_not_left_for_the_next_run(tmp_path: Path) -> None:
    """A non-root run whose venv creation failed left .venv/bin/python behind; the next run,
    after python3-venv was installed, took that as the venv and failed in pip."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "install", tmp_path / "scripts" / "install")
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    (fakes / "python3.11").write_text(FAKE_PYTHON)
    (fakes / "id").write_text("#!/bin/sh\necho 1000\n")  # a non-root user
    for f in fakes.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}",
           "PYTHON": str(fakes / "python3.11")}
    run = subprocess.run(["bash", str(tmp_path / "scripts" / "install")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2, run.stderr
    assert "install python3-venv" in run.stderr
    assert not (tmp_path / ".venv").exists()
